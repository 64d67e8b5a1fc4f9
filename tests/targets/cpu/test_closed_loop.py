"""Family cpu's closed loop: every candidate configuration measured, the fastest measured kept (ties inside the
measured spread named), each measurement cached on its own; through the CLI on the example classifier."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbuild.stages.params import AccuracyInputs
from accelbuild.targets.cpu import closed_loop
from accelbuild.targets.cpu.closed_loop import Candidate
from accelbuild.targets.cpu.spec import ClosedLoopParams

from conftest import run_cli, write

PIPELINE = """\
accelbuild: 2
name: p
target: {{family: cpu{target}, closed_loop: {{enabled: true{loop}}}}}
models:
  - name: cls
    path: models/tinycls.onnx
benchmark: {{frames: 10, accuracy: {{samples: 2}}}}
"""


def params(threads: tuple[int, ...] = (1,)) -> ClosedLoopParams:
    return ClosedLoopParams("m", ("float", "extended", 1), threads, AccuracyInputs(2, 0, None), None, 10, "1",
                            "machine")


def figures(q25: float, median: float, q75: float) -> dict:
    return {"fps": round(1000 / median, 2), "fps_spread": [round(1000 / q75, 2), round(1000 / q25, 2)],
            "latency_ms": median, "latency_q25_ms": q25, "latency_q75_ms": q75, "cached": False, "seconds": 0.5}


def test_the_fastest_by_median_is_kept_and_overlapping_spreads_are_ties() -> None:
    p = params()
    todo = closed_loop.candidates(p)
    assert len(todo) == 6 and Candidate("float", "extended", 1) in todo
    lat = {c: figures(3.0, 3.2, 3.4) for c in todo}
    lat[todo[4]] = figures(0.9, 1.0, 1.1)  # int8/extended: fastest
    lat[todo[5]] = figures(1.05, 1.2, 1.3)  # int8/all: slower by median, but its spread reaches the fastest's
    lat[todo[3]] = figures(0.95, 1.0, 1.2)  # int8/basic: the same median, later in candidate order
    chosen, record = closed_loop._choose(p, todo, lat, 2.0)
    assert chosen == Candidate("int8", "basic", 1)  # equal medians: the first in candidate order
    assert record["ties"] == ["int8/extended/threads=1", "int8/all/threads=1"]
    assert record["default"]["label"] == "float/extended/threads=1" and not record["default"]["tie_with_chosen"]
    assert record["cost"] == {"candidates": 6, "measured": 6, "from_cache": 0, "measurement_seconds": 3.0,
                              "loop_seconds": 2.0}


def _build(project: Path, target: str = "", loop: str = "") -> dict:
    write(project / "p.yaml", PIPELINE.format(target=target, loop=loop))
    result = run_cli("run", "p.yaml", cwd=project)
    assert result.code == 0, result.stderr
    return json.loads((project / "build/p/cls/closed_loop.json").read_text())


def test_the_loop_measures_every_candidate_keeps_the_fastest_and_caches_each(project: Path) -> None:
    record = _build(project)
    rows = record["candidates"]
    assert len(rows) == len({(r["precision"], r["graph_optimization"], r["threads"]) for r in rows})
    assert {r["precision"] for r in rows} == {"float", "int8"} and {r["threads"] for r in rows} >= {0, 1}
    assert all(r["fps_spread"][0] <= r["fps"] <= r["fps_spread"][1] and r["frames"] == 10 for r in rows)
    fastest = min(rows, key=lambda r: r["latency_ms"])
    assert record["chosen"]["label"] == fastest["label"]
    assert record["cost"]["measured"] == len(rows) and record["cost"]["from_cache"] == 0
    assert record["default"]["label"] == "float/extended/threads=default"
    session = json.loads((project / "build/p/cls/session.json").read_text())
    chosen = record["chosen"]
    assert (session["precision"], session["graph_optimization"], session["intra_op_num_threads"]) == (
        chosen["precision"], chosen["graph_optimization"], chosen["threads"])
    assert session["source"]["file"] == ("ai.onnx" if chosen["precision"] == "float" else "quantized.onnx")
    bench = json.loads((project / "build/p/benchmark.json").read_text())
    assert bench["precision"] == chosen["precision"] and bench["measured"] is True

    again = _build(project, target=", threads: 1")  # another default: candidates with 0 threads drop out
    assert again["cost"]["measured"] == 0 and again["cost"]["from_cache"] == len(again["candidates"]) > 0
    assert again["default"]["label"] == "float/extended/threads=1"
    assert {r["threads"] for r in again["candidates"]} == {r["threads"] for r in rows} - {0}


@pytest.mark.parametrize(("target", "loop", "message"), [
    (", backend: tvm", "", "backend tvm has none to choose from"),
    ("", ", keep_splits: true", "unknown key 'keep_splits' in target.closed_loop"),
])
def test_closed_loop_settings_that_cannot_apply_are_usage_errors(project: Path, target: str, loop: str,
                                                                  message: str) -> None:
    write(project / "p.yaml", PIPELINE.format(target=target, loop=loop))
    result = run_cli("run", "p.yaml", cwd=project)
    assert result.code == 2 and message in result.stderr and "p.yaml:3:" in result.stderr
