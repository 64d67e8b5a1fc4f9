"""The whole pipeline through benchmark, the bench command, and closed-loop compilation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import TWO_MODEL_PIPELINE, run_cli, run_cli_process, tree_bytes, write

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
    run = run_cli_process if "-j" in extra else run_cli  # -j: doit's worker processes, in a process of their own
    result = run("run", "p.yaml", "--state-dir", "s", "--json", *extra, cwd=project)
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
    whole = model["end_to_end"]  # the host post time's p10-p90 and the end-to-end range it gives
    low, high = whole["host_post_ms_p10_p90"]
    assert low <= whole["host_post_ms"] <= high and model["host"]["post_ms_p10_p90"] == [low, high]
    assert whole["fps_spread"][0] <= whole["fps"] <= whole["fps_spread"][1]
    stats = yaml.safe_load((project / "build/p/layer_stats.yaml").read_text())
    assert {"name", "model", "chip", "cores", "start_cycle", "end_cycle", "macs", "weight_bytes"} == set(stats[0])
    report = (project / "build/p/report.html").read_text()
    assert report.startswith("<!DOCTYPE html>") and "simulated" in report
    trust = bench["credibility"]  # the built-in profile's band, from docs/credibility.md's run
    assert trust["calibrated"] is True and "published measurements" in trust["text"]
    assert "How far to trust these figures" in report and trust["text"].replace("'", "&#x27;") in report
    assert "random inputs (2, seed 0)" in report  # the accuracy figures say what inputs they come from


def test_multi_model_figures_are_per_model_and_name_what_binds(project: Path) -> None:
    """Each model has its own rate and binding resource; the total is labelled a sum of different models'
    frames; the latency says whose it is; the terminal names the simulator's binding resource per model."""
    result = _run(project, TWO_MODEL_PIPELINE)
    bench = json.loads((project / "build/p/benchmark.json").read_text())
    names = [m["name"] for m in bench["models"]]
    assert names == ["det", "cls"]
    assert bench["fps"] == min(m["fps"] for m in bench["models"])  # whole sets per second, named so
    assert bench["fps_is"] == "sets per second, one frame of each of the 2 models (the slowest model's rate)"
    for model in bench["models"]:
        whole = model["end_to_end"]
        assert whole["accelerator"] == "simulated" and whole["fps"] <= model["fps"]
        assert whole["latency_ms"] >= model["latency_ms"]
    assert bench["latency_model"] in names
    assert bench["latency_ms"] == next(m["latency_ms"] for m in bench["models"] if m["name"] == bench["latency_model"])
    assert [entry["model"] for entry in bench["agreement"]] == names
    for model, entry in zip(bench["models"], bench["agreement"]):
        assert model["binding"]["kind"] in {"layer", "host_link", "host_buffers", "chip_link", "stalls"}
        assert 0 < model["binding"]["busy"] <= 1
        assert entry["simulated"]["binding"] == model["binding"]
        assert f"p: {model['name']}: " in result.stderr and "bound by" in result.stderr
    assert "summed" not in result.stderr and "p: 2 models" not in result.stderr
    assert f"p: {bench['fps']:,.1f} sets per second, one frame of each of the 2 models" in result.stderr
    mapping = json.loads((project / "build/p/mapping.json").read_text())
    assert all("bottleneck" in m for m in mapping["models"])


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


def test_closed_loop_ships_the_best_measured_split(project: Path) -> None:
    """<dfp_name> is the best measured split (the bytes of best_split.dfp and of its splits/ entry), the
    benchmark measures exactly that program, and closed_loop.json says which file is which."""
    _run(project, PIPELINE + "closed_loop: {enabled: true, jobs: 2, keep_splits: true}\n")
    out = project / "build/p"
    record = json.loads((out / "closed_loop.json").read_text())
    shipped = (out / "p.dfp").read_bytes()
    assert shipped == (out / "best_split.dfp").read_bytes()
    assert shipped == (out / "splits" / f"{record['best']:02d}" / "split.dfp").read_bytes()
    assert record["dfp"] == "p.dfp" and record["programs"]["p.dfp"]["split"] == record["best"]
    assert record["cost_model_choice"] == 0 and record["cost_model_choice_fps"] == record["splits"][0]["fps"]
    choice = out / "cost_model_choice.dfp"
    if record["best"] == 0:
        assert not choice.exists() and list(record["programs"]) == ["p.dfp"]
    else:
        assert choice.read_bytes() == (out / "splits/00/split.dfp").read_bytes()
        assert record["programs"]["cost_model_choice.dfp"]["split"] == 0
    bench = json.loads((out / "benchmark.json").read_text())
    assert bench["dfp"] == "p.dfp" and bench["fps"] == record["best_fps"]
    assert all(entry["agree"] for entry in bench["agreement"])   # the shipped split's own prediction


def test_closed_loop_keeps_the_cost_models_choice_when_another_split_is_shipped(project: Path, monkeypatch) -> None:
    """When the measurement picks another split than the cost model's first, both programs are kept:
    <dfp_name> (= best_split.dfp) is the measured best, cost_model_choice.dfp the first choice."""
    from accelbuild.config.load import load_pipeline
    from accelbuild.stages.context import Locator, StageContext
    from accelbuild.stages.front import stages_of
    from accelbuild.targets.mx3 import assemble_stage, closed_loop

    text = PIPELINE + "closed_loop: {enabled: true, jobs: 1, keep_splits: true}\n"
    _run(project, text, "--until", "map")
    monkeypatch.chdir(project)
    spec = load_pipeline("p.yaml")
    stage = next(s for s in stages_of(spec) if s.name == "assemble")
    monkeypatch.setattr(closed_loop, "choose", lambda figures, prioritize, names: len(figures) - 1)
    ctx = StageContext(stage.params(spec, None), stage.inputs(spec, None), stage.outputs(spec, None), Locator(None))
    assemble_stage.run(ctx)
    out = project / "build/p"
    record = json.loads((out / "closed_loop.json").read_text())
    last = len(record["splits"]) - 1
    assert last > 0 and record["best"] == last
    assert (out / "p.dfp").read_bytes() == (out / "best_split.dfp").read_bytes() \
        == (out / f"splits/{last:02d}/split.dfp").read_bytes()
    assert (out / "cost_model_choice.dfp").read_bytes() == (out / "splits/00/split.dfp").read_bytes()
    assert record["programs"] == {
        "p.dfp": {"split": last, "what": "the program to ship: the best measured split", "same_bytes_as": "best_split.dfp"},
        "cost_model_choice.dfp": {"split": 0, "what": "the cost model's first choice, measured slower"}}


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


def test_the_bandwidth_tab_measures_bytes_per_frame_in_the_steady_state(project: Path) -> None:
    """Each link's bytes per frame come from the schedule and equal quantize.json's packets and mapping.json's
    chip link; the window is the steady state, so the host-out rate is the output bytes at the frame rate."""
    from accelbuild.targets.mx3 import benchmarking
    from accelbuild.targets.mx3.sim import timing
    from accelbuild.targets.mx3.sim.program import load_program

    _run(project, PIPELINE)
    program = load_program(project / "build/p/p.dfp")
    sim = timing.simulate(program, 60, record_frames=12)
    report = benchmarking.timing_for_report(sim, program, recorded_frames=12)
    bandwidth = report["bandwidth"]
    packets = json.loads((project / "build/p/det/quantize.json").read_text())["packets"]
    mapping = json.loads((project / "build/p/mapping.json").read_text())
    per_frame = bandwidth["bytes_per_frame"]
    assert per_frame["host in · det"] == packets["input_bytes_per_frame"]
    assert per_frame["host out · det"] == packets["output_bytes_per_frame"]
    links = [t for t in per_frame if t.startswith("chip link")]
    assert [per_frame[t] for t in links] == [c["bytes_per_frame"] for c in mapping["links"]["chip_links"]]
    assert links  # two chips: the tensors that cross are on the chip link
    moved = bandwidth["window_bytes"]["host out · det"]
    expected = packets["output_bytes_per_frame"] * sim.model_fps["det"] * bandwidth["window_us"] / 1e6
    assert moved == pytest.approx(expected, rel=0.1)  # the steady state: one output per frame period
    host_in = next(t for t in report["timeline"] if t["track"] == "host in · det")
    assert len(host_in["spans"]) == 12  # the timeline shows the first frames only


def test_the_bandwidth_window_says_which_models_are_running() -> None:
    """Ten frames each: det (1 kFPS) moves data to the window's end; cls (1.6 kFPS) finishes its frames early."""
    from accelbuild.targets.mx3 import benchmarking
    from accelbuild.targets.mx3.sim.timing import Span, TimingResult

    spans = [Span("host in · det", "host_in", f * 1e-3, f * 1e-3 + 2e-4, 1000, f) for f in range(10)]
    spans += [Span("host in · cls", "host_in", f * 6.25e-4, f * 6.25e-4 + 1e-4, 100, f) for f in range(10)]
    sim = TimingResult(frames=10, fps=2600.0, model_fps={"det": 1000.0, "cls": 1600.0}, first_latency_ms={},
                       steady_latency_ms={}, layers=[], core_utilization={}, spans=spans)
    bandwidth = benchmarking.steady_bandwidth(sim, 1e-3)
    assert bandwidth["window_us"] == pytest.approx(4000.0)  # four periods before det's last input, at 9 ms
    assert bandwidth["running"]["det"] == {"from_us": None, "until_us": None}
    assert bandwidth["running"]["cls"] == {"from_us": None, "until_us": pytest.approx(725.0)}  # 5.725 ms - 5 ms
    late = benchmarking.running_models(sim, [s for s in spans], 7.5e-3, 9e-3)
    assert late["cls"] == {"from_us": None, "until_us": 0.0} and late["det"] == {"from_us": None, "until_us": None}
