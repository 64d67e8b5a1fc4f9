"""The whole pipeline through benchmark, the bench command, and closed-loop compilation."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from conftest import run_cli, tree_bytes, write

PIPELINE = """\
accelbuild: 1
name: p
target: {num_chips: 2, effort: hard}
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {images: [64, 64, 3]}
    crop: {outputs: [head.p3, head.p4, head.p5]}
benchmark: {frames: 60, accuracy: {samples: 2}}
"""


def _run(project: Path, text: str, *extra: str):
    write(project / "p.yaml", text)
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--json", *extra, cwd=project)
    assert result.code == 0, result.stderr
    return result


def test_benchmark_json_is_complete(project: Path) -> None:
    _run(project, PIPELINE)
    bench = json.loads((project / "build/p/benchmark.json").read_text())
    assert bench["simulated"] is True
    for key in ("fps", "latency_ms", "num_chips", "models"):
        assert key in bench
    model = bench["models"][0]
    assert {"name", "fps", "latency_ms", "accuracy"} <= set(model)
    assert {"cosine", "sqnr_db", "max_abs_err"} <= set(model["accuracy"])
    assert model["accuracy"]["cosine"] >= 0.999
    assert bench["host"]["post_ms"] > 0 and bench["host"]["pre_ms"] is None
    assert bench["end_to_end_fps"] <= bench["fps"]
    stats = yaml.safe_load((project / "build/p/layer_stats.yaml").read_text())
    assert {"name", "model", "chip", "cores", "start_cycle", "end_cycle", "macs", "weight_bytes"} == set(stats[0])
    report = (project / "build/p/report.html").read_text()
    assert report.startswith("<!DOCTYPE html>") and "simulated" in report


def test_bench_command(project: Path) -> None:
    _run(project, PIPELINE, "--until", "assemble")
    result = run_cli("bench", "build/p/p.dfp", "--frames", "50", "--json", cwd=project)
    assert result.code == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["simulated"] is True and figures["frames"] == 50 and figures["fps"] > 0
    assert run_cli("bench", "nope.dfp", cwd=project).code == 2


def test_closed_loop_picks_no_slower_split_and_reruns_nothing(project: Path) -> None:
    text = PIPELINE + "closed_loop: {enabled: true, jobs: 2, keep_splits: true}\n"
    _run(project, text, "--until", "assemble")
    record = json.loads((project / "build/p/closed_loop.json").read_text())
    assert record["splits"] and record["best_fps"] >= record["cost_model_choice_fps"]
    assert record["splits"][record["best"]]["fps"] == record["best_fps"]
    assert (project / "build/p/best_split.dfp").is_file()
    assert len(list((project / "build/p/splits").iterdir())) == len(record["splits"])
    write(project / "p.yaml", text.replace("keep_splits: true", "keep_splits: false"))
    third = run_cli("run", "p.yaml", "--state-dir", "s", "--until", "assemble", cwd=project)
    assert third.code == 0 and f"{len(record['splits'])} from the cache" in third.stderr
    assert not (project / "build/p/splits").exists()


def test_whole_build_is_byte_identical_across_runs_except_host_timings(project: Path, tmp_path_factory) -> None:
    other = tmp_path_factory.mktemp("again")
    import shutil

    shutil.copytree(project / "models", other / "models")
    _run(project, PIPELINE, "-j", "2")
    _run(other, PIPELINE, "-j", "1")
    first, second = tree_bytes(project / "build"), tree_bytes(other / "build")
    measured = {"p/benchmark.json", "p/report.html"}  # carry host times measured on this machine
    assert {k: v for k, v in first.items() if k not in measured} == \
        {k: v for k, v in second.items() if k not in measured}
    assert first["p/p.dfp"] == second["p/p.dfp"]


def test_clean_removes_closed_loop_splits(project: Path) -> None:
    _run(project, PIPELINE + "closed_loop: {enabled: true, jobs: 1, keep_splits: true}\n", "--until", "assemble")
    assert (project / "build/p/splits").is_dir()
    assert run_cli("clean", "p.yaml", "--state-dir", "s", cwd=project).code == 0
    assert not (project / "build/p").exists()
