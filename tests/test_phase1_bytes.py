"""Phase-1 pipelines keep building the same bytes, written in config format 2 and in format 1.

Every shipped example pipeline of family mx3 (examples/valid/ and pipelines/tinydet.yaml) is built from a fresh copy,
and every artifact is compared with ``data/phase1_artifacts.json``, recorded before the target boundary moved
the mx3 code.

Two kinds of figure are not bytes of the build and are compared apart:

- host timings are measured on this machine, so benchmark.json is compared without them and report.html
  only where no host section was timed;
- figures measured by running models in onnxruntime (cosine, SQNR, max errors, the import check's error)
  depend on the CPU's SIMD kernels in their last digits (AVX-512 and AVX2 machines accumulate float sums in
  different orders, which can tip a quantizer's rounding; such pairs differed by 0.02 dB and by 0.118 dB of a
  frame's output SQNR, and by 0.494 dB on tinydet's smallest output, 1,900 values, on an AMD EPYC), so they are
  compared within a tolerance. Everything else in those records, and every model and program file, must match to the byte.

Re-record (only when an issue says the bytes may change): ``ACCELBUILD_RECORD=1 python -m pytest
tests/test_phase1_bytes.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import REPO, run_cli_process

RECORD = Path(__file__).parent / "fixtures" / "phase1_artifacts.json"
FORMAT1 = Path(__file__).parent / "fixtures" / "format1"  # shipped pipelines as written in format 1
HOST_MEASURED = ("host", "end_to_end_fps", "end_to_end_bound", "end_to_end")
# (relative, absolute) tolerance of each figure measured by running a model in onnxruntime
MEASURED = {"cosine": (0.0, 1e-4), "start_cosine": (0.0, 1e-4), "sqnr_db": (0.0, 1.0),
            "mean_cosine": (0.0, 1e-4), "worst_cosine": (0.0, 1e-4), "pooled_cosine": (0.0, 1e-4),
            "max_abs_err": (0.1, 1e-6), "max_rel_err": (0.1, 1e-6), "verify": (0.1, 1e-6)}
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _without_host_times(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_host_times(v) for k, v in value.items() if k not in HOST_MEASURED}
    if isinstance(value, list):
        return [_without_host_times(v) for v in value]
    return value


def _split_measured(value: object, pointer: str, measured: dict[str, list]) -> object:
    """``value`` with every onnxruntime-measured figure replaced by a marker; the figures go to ``measured``
    under their JSON pointer, with the kind that sets their tolerance."""
    if isinstance(value, dict):
        if value.get("pass") == "verify":  # the import check: "outputs match ... (max relative error 9.6e-08)"
            for i, note in enumerate(value.get("notes", [])):
                measured[f"{pointer}/notes/{i}"] = ["verify", [float(n) for n in NUMBER.findall(note)]]
            value = {**value, "notes": [NUMBER.sub("<measured>", note) for note in value.get("notes", [])]}
        out = {}
        for key, item in value.items():
            if key in MEASURED and isinstance(item, (int, float)) and not isinstance(item, bool):
                measured[f"{pointer}/{key}"] = [key, [item]]
                out[key] = "<measured>"
            else:
                out[key] = _split_measured(item, f"{pointer}/{key}", measured)
        return out
    if isinstance(value, list):
        return [_split_measured(item, f"{pointer}/{i}", measured) for i, item in enumerate(value)]
    return value


def _artifacts(build_roots: list[Path], base: Path) -> tuple[dict[str, str], dict[str, dict[str, list]]]:
    """SHA-256 of every artifact (JSON records without their measured figures), and those figures."""
    digests, measured = {}, {}
    for root in build_roots:
        for path in sorted(root.rglob("*")):
            if not path.is_file():
                continue
            rel = str(path.relative_to(base))
            data = path.read_bytes()
            if path.suffix == ".json":
                record = json.loads(data)
                if path.name == "benchmark.json":
                    if any("host" in m for m in record.get("models", [])):
                        (path.parent / ".timed").touch()
                    record = _without_host_times(record)
                figures: dict[str, list] = {}
                data = json.dumps(_split_measured(record, "", figures), sort_keys=True).encode()
                if figures:
                    measured[rel] = figures
            digests[rel] = hashlib.sha256(data).hexdigest()
    for root in build_roots:  # report.html carries host times wherever they were measured
        for marker in root.rglob(".timed"):
            digests.pop(str((marker.parent / "report.html").relative_to(base)), None)
            digests.pop(str(marker.relative_to(base)), None)
            marker.unlink()
    return digests, measured


def _figures_differing(recorded: dict[str, dict[str, list]], built: dict[str, dict[str, list]]) -> list[str]:
    differing = []
    for rel, figures in recorded.items():
        for pointer, (kind, want) in figures.items():
            got = built.get(rel, {}).get(pointer, [kind, []])[1]
            rel_tol, abs_tol = MEASURED[kind]
            if len(got) != len(want) or not all(math.isclose(g, w, rel_tol=rel_tol, abs_tol=abs_tol)
                                                for g, w in zip(got, want)):
                differing.append(f"{rel}#{pointer}: {got} vs recorded {want}")
    return differing


def _phase1(config: Path) -> bool:
    """Phase-1 examples are those of family mx3 (the default); later families have their own tests."""
    return "family:" not in config.read_text(encoding="utf-8")


def _as_format1(folders: list[Path]) -> None:
    """The pipelines as format-1 files: those with keys that moved as they were written before format 2
    (``fixtures/format1/``), the others with ``accelbuild: 1``."""
    for folder in folders:
        for path in folder.glob("*.yaml"):
            before = FORMAT1 / path.name
            text = before.read_text() if before.is_file() else path.read_text().replace("\naccelbuild: 2\n",
                                                                                       "\naccelbuild: 1\n")
            assert "\naccelbuild: 1\n" in text, path
            path.write_text(text)


@pytest.mark.parametrize("config_format", [2, 1])
def test_phase1_pipelines_build_the_recorded_bytes(tmp_path: Path, config_format: int) -> None:
    """The shipped pipelines (format 2) and their format-1 versions build the recorded bytes."""
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("build"))
    shutil.copytree(REPO / "pipelines", tmp_path / "pipelines", ignore=shutil.ignore_patterns("build"))
    if config_format == 1:
        _as_format1([tmp_path / "examples" / "valid", tmp_path / "pipelines"])
    configs = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "examples" / "valid").glob("*.yaml")
                     if _phase1(p))
    result = run_cli_process("run", *configs, "pipelines/tinydet.yaml", "-j", "2", "--keep-going", "--json",
                             "--state-dir", "state", cwd=tmp_path)
    failed = {t["name"] for t in result.json()["tasks"] if t["status"] == "failed"}
    assert failed == set(), result.stderr
    digests, measured = _artifacts([tmp_path / "examples" / "valid" / "build", tmp_path / "pipelines" / "build"],
                                   tmp_path)
    if os.environ.get("ACCELBUILD_RECORD") and config_format == 2:
        RECORD.parent.mkdir(exist_ok=True)
        RECORD.write_text(json.dumps({"digests": digests, "measured": measured}, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(RECORD.read_text())
    assert sorted(digests) == sorted(recorded["digests"])
    changed = sorted(name for name, digest in recorded["digests"].items() if digests[name] != digest)
    assert changed == []
    assert sorted(measured) == sorted(recorded["measured"])
    assert _figures_differing(recorded["measured"], measured) == []


def test_measured_figures_are_compared_within_their_tolerance_and_nothing_else_is() -> None:
    record = {"passes": [{"pass": "verify", "notes": ["outputs match (max relative error 9.6e-08)"]}],
              "output": {"cosine": 0.999894, "sqnr_db": 36.443, "bits": 8}}
    figures: dict[str, list] = {}
    canonical = _split_measured(record, "", figures)
    assert canonical == {"passes": [{"pass": "verify", "notes": ["outputs match (max relative error <measured>)"]}],
                         "output": {"cosine": "<measured>", "sqnr_db": "<measured>", "bits": 8}}
    noisy = {"/passes/0/notes/0": ["verify", [1.4e-07]], "/output/cosine": ["cosine", [0.999893]],
             "/output/sqnr_db": ["sqnr_db", [36.423]]}
    assert _figures_differing({"r.json": figures}, {"r.json": noisy}) == []
    worse = {**noisy, "/output/sqnr_db": ["sqnr_db", [35.2]]}
    assert _figures_differing({"r.json": figures}, {"r.json": worse}) == ["r.json#/output/sqnr_db: [35.2] vs "
                                                                          "recorded [36.443]"]
