"""commands/status.py: the task listing of ``status`` and ``run --dry-run``."""

from __future__ import annotations

import json

import pytest

from accelbuild.commands.status import print_explanations
from accelbuild.engine.doit_backend import Explanation

TASKS = [Explanation("p:m:import", False, []),
         Explanation("p:m:crop", True, ["input model changed: m.onnx"]),
         Explanation("p:m:quantize", True, ["never built here", "restorable from the artifact cache"], cached=True)]


def test_text_lists_each_task_and_a_cached_one_without_never_built(capsys: pytest.CaptureFixture[str]) -> None:
    assert print_explanations(TASKS, as_json=False, dry_run=False) == 0
    assert capsys.readouterr().out.splitlines() == [
        "up-to-date  p:m:import",
        "would run   p:m:crop",
        "              input model changed: m.onnx",
        "cached      p:m:quantize  (the artifact cache holds its outputs for these inputs: restored, not run)",
        "              restorable from the artifact cache"]


def test_json_says_status_and_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    print_explanations(TASKS, as_json=True, dry_run=True)
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["dry_run"] and out["failing_checks"] == []
    assert [(t["status"], t["would_run"]) for t in out["tasks"]] == [("skipped", False), ("skipped", True),
                                                                     ("skipped", False)]
    print_explanations(TASKS, as_json=True, dry_run=False)
    assert [t["status"] for t in json.loads(capsys.readouterr().out)["tasks"]] == ["up-to-date", "outdated", "cached"]
