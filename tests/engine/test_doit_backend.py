"""doit's verdict is the task key's: up to date while it holds (a touched input too), and ``status`` says
which part of it moved, through doit's public API only."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest

from accelbuild.config.load import load_pipelines
from accelbuild.engine import doit_backend, plan, task_key
from accelbuild.engine.doit_backend import RunOptions

from conftest import EXAMPLE_MODELS, write

PIPELINE = "accelbuild: 1\nname: p\nmodels:\n  - name: cls\n    path: models/tinycls.onnx\n"


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[plan.Job], RunOptions]:
    """The import task of a one-model pipeline, run once."""
    (tmp_path / "models").mkdir()
    shutil.copy(EXAMPLE_MODELS / "tinycls.onnx", tmp_path / "models" / "tinycls.onnx")
    write(tmp_path / "p.yaml", PIPELINE)
    monkeypatch.chdir(tmp_path)
    jobs = plan.plan(load_pipelines(["p.yaml"]), until="import")
    options = RunOptions(root=tmp_path, state_dir=tmp_path / "s", cache_dir=tmp_path / "s" / "cache")
    assert [r.status for r in doit_backend.run_jobs(jobs, options, io.StringIO())] == ["ran"]
    return jobs, options


def _reasons(jobs: list[plan.Job], options: RunOptions) -> list[str]:
    return doit_backend.explain(jobs, options)[0].reasons


def test_up_to_date_while_the_key_holds_even_when_the_input_is_touched(built) -> None:
    jobs, options = built
    assert _reasons(jobs, options) == []
    os.utime("models/tinycls.onnx", ns=(1, 1))
    assert _reasons(jobs, options) == []
    assert [r.status for r in doit_backend.run_jobs(jobs, options, io.StringIO())] == ["up-to-date"]


def test_status_names_the_input_that_moved_the_key(built) -> None:
    jobs, options = built
    with open("models/tinycls.onnx", "ab") as handle:
        handle.write(b"\0")
    assert _reasons(jobs, options) == ["input model changed: models/tinycls.onnx"]


def test_another_version_is_another_key(built, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs, options = built
    monkeypatch.setattr(task_key, "__version__", "99.0.0")
    assert _reasons(jobs, options) == ["accelbuild version changed"]
    assert [r.status for r in doit_backend.run_jobs(jobs, options, io.StringIO())] == ["ran"]
