"""Phase-1 pipelines keep building the same bytes.

Every shipped example pipeline of family mx3 (examples/valid/ and pipelines/tinydet.yaml) is built from a fresh copy,
and the SHA-256 of every artifact is compared with ``data/phase1_artifacts.json``, recorded before the
target boundary moved the mx3 code. Host timings are measured on this machine, so benchmark.json is
compared without them and report.html only where no host section was timed.

Re-record (only when an issue says the bytes may change): ``ACCELBUILD_RECORD=1 python -m pytest
tests/test_phase1_bytes.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from conftest import REPO, run_cli

RECORD = Path(__file__).parent / "data" / "phase1_artifacts.json"
HOST_MEASURED = ("host", "end_to_end_fps", "end_to_end_bound")


def _without_host_times(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_host_times(v) for k, v in value.items() if k not in HOST_MEASURED}
    if isinstance(value, list):
        return [_without_host_times(v) for v in value]
    return value


def _digests(build_roots: list[Path], base: Path) -> dict[str, str]:
    digests = {}
    for root in build_roots:
        for path in sorted(root.rglob("*")):
            if not path.is_file():
                continue
            rel = str(path.relative_to(base))
            data = path.read_bytes()
            if path.name == "benchmark.json":
                bench = json.loads(data)
                timed = any("host" in m for m in bench.get("models", []))
                data = json.dumps(_without_host_times(bench), sort_keys=True).encode()
                if timed:
                    (path.parent / ".timed").touch()
            digests[rel] = hashlib.sha256(data).hexdigest()
    for root in build_roots:  # report.html carries host times wherever they were measured
        for marker in root.rglob(".timed"):
            digests.pop(str((marker.parent / "report.html").relative_to(base)), None)
            digests.pop(str(marker.relative_to(base)), None)
            marker.unlink()
    return digests


def _phase1(config: Path) -> bool:
    """Phase-1 examples are those of family mx3 (the default); later families have their own tests."""
    return "family:" not in config.read_text(encoding="utf-8")


def test_phase1_pipelines_build_the_recorded_bytes(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("build"))
    shutil.copytree(REPO / "pipelines", tmp_path / "pipelines", ignore=shutil.ignore_patterns("build"))
    configs = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "examples" / "valid").glob("*.yaml")
                     if _phase1(p))
    result = run_cli("run", *configs, "pipelines/tinydet.yaml", "-j", "2", "--keep-going", "--json",
                     "--state-dir", "state", cwd=tmp_path, timeout=300)
    failed = {t["name"] for t in result.json()["tasks"] if t["status"] == "failed"}
    assert failed == set(), result.stderr
    digests = _digests([tmp_path / "examples" / "valid" / "build", tmp_path / "pipelines" / "build"], tmp_path)
    if os.environ.get("ACCELBUILD_RECORD"):
        RECORD.parent.mkdir(exist_ok=True)
        RECORD.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(RECORD.read_text())
    assert sorted(digests) == sorted(recorded)
    changed = sorted(name for name in recorded if digests[name] != recorded[name])
    assert changed == []
