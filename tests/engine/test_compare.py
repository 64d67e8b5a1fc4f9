"""``compare``: a difference inside the measured figures' own spread is no win, the cosine line says what
each side's headline is (a frame's own, or pooled over frames), and a one-sided credibility band makes fps a
bound."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accelbuild.engine import compare
from accelbuild.engine.compare import Side, as_json, folder_side, text
from accelbuild.targets import credibility


def _side(label: str, e2e_fps: float, spread: list[float] | None, cosine: float = 0.99,
          pooled_over: int | None = None) -> Side:
    model: dict[str, Any] = {
        "name": "det", "fps": 2000.0, "latency_ms": 0.5, "cosine": cosine, "worst_file": "astronaut.png",
        "worst_cosine": 0.961059 if pooled_over else cosine, "cosine_measured_on": "calibration",
        "no_signal_frames": 0, "end_to_end_fps": e2e_fps, "end_to_end_latency_ms": 1000.0 / e2e_fps,
        "end_to_end_accelerator": "simulated", "end_to_end_host": "this machine",
        "end_to_end_fps_spread": spread,
        "end_to_end_latency_ms_spread": None if spread is None else [1000.0 / spread[1], 1000.0 / spread[0]]}
    if pooled_over:
        model["cosine_pooled_over"] = pooled_over
    return Side(label, {"kind": "simulated", "fps": 2000.0, "fps_is": "frames per second of the model",
                        "latency_ms": 0.5, "weight_bytes": 1000, "models": [model], "simulated": True})


def _row(sides: list[Side], label: str) -> dict[str, Any]:
    return next(r for r in compare.as_json(sides)["rows"] if r["row"] == label)


def test_host_timed_figures_inside_their_spread_are_level_not_a_win() -> None:
    """The sweep's six variants: one accelerator figure, end-to-end 826-1,346 FPS from host timings whose
    p10-p90 ranges overlap. No side is best, by 41.5% or otherwise; the ranges are shown."""
    figures = [(1346.0, [780.0, 1420.0]), (826.0, [700.0, 1300.0]), (1100.0, [760.0, 1380.0]),
               (950.0, [720.0, 1350.0]), (1200.0, [800.0, 1400.0]), (1010.0, [740.0, 1390.0])]
    sides = [_side(f"v{i}", fps, spread) for i, (fps, spread) in enumerate(figures)]
    row = _row(sides, "end-to-end fps")
    assert row["best"] is None and row["within_noise"] and len(row["level"]) == 6
    assert row["spreads"][0] == [780.0, 1420.0]
    assert _row(sides, "fps")["within_noise"]  # the accelerator figures are the same
    text = compare.text(sides)
    line = next(x for x in text.splitlines() if x.startswith("end-to-end fps"))
    assert "1,346 (780-1,420)" in line and "= (within spread)" in line


def test_a_difference_beyond_the_spread_is_a_win() -> None:
    sides = [_side("slow", 500.0, [480.0, 520.0]), _side("fast", 1000.0, [950.0, 1040.0])]
    row = _row(sides, "end-to-end fps")
    assert row["best"] == "fast" and not row["within_noise"]
    latency = _row(sides, "end-to-end latency_ms")
    assert latency["best"] == "fast"


def test_only_the_sides_level_with_the_best_are_named() -> None:
    """Two sides overlap at the top, a third is far below: the two beat the third (--json's best is the first
    of them, as for any group level at the top) and the text names both, level."""
    sides = [_side("a", 1000.0, [900.0, 1100.0]), _side("b", 1050.0, [950.0, 1150.0]),
             _side("c", 400.0, [390.0, 410.0])]
    row = _row(sides, "end-to-end fps")
    assert row["best"] == "a" and not row["within_noise"] and row["level"] == ["a", "b"]
    line = next(x for x in compare.text(sides).splitlines() if x.startswith("end-to-end fps"))
    assert "= a, b (within spread)" in line


def test_without_a_recorded_spread_the_noise_decides() -> None:
    """Records written before the spread was kept: the measured timing's run-to-run noise still applies."""
    sides = [_side("a", 1000.0, None), _side("b", 1030.0, None), _side("c", 1500.0, None)]
    assert _row(sides, "end-to-end fps")["best"] == "c"
    assert _row(sides[:2], "end-to-end fps")["within_noise"]


def test_a_pooled_cosine_is_said_to_be_pooled_with_the_worst_frame_at_its_own_figure() -> None:
    sides = [_side("npu", 1000.0, None, cosine=0.99105, pooled_over=6), _side("plain", 1000.0, None, cosine=0.98)]
    frames = compare.as_json(sides)["worst_frames"]["det"]
    assert frames[0]["pooled_over"] == 6 and frames[0]["cosine"] == 0.961059
    line = next(x for x in compare.text(sides).splitlines() if x.startswith("det cosine:"))
    assert "npu: pooled over 6 calibration frames, worst frame astronaut.png at 0.961059" in line
    assert "plain: worst frame astronaut.png (calibration)" in line and "worst frame with signal" not in line


def _build(folder: Path, fps: float, trust: dict) -> Path:
    folder.mkdir(parents=True)
    bench = {"simulated": True, "fps": fps, "fps_is": "frames per second of the model", "credibility": trust,
             "models": [{"name": "m", "fps": fps, "latency_ms": 1000 / fps, "accuracy": {"cosine": 0.999}}]}
    (folder / "benchmark.json").write_text(json.dumps(bench))
    return folder


def test_a_one_sided_band_makes_fps_a_bound_in_compare(tmp_path: Path) -> None:
    digest = credibility._table()["mx3"]["mx3"]["profile_digest"]
    mx3 = credibility.band("mx3", "mx3", digest)
    assert mx3["direction"] == "model_faster" and mx3["fps_bound"] == "upper"
    assert "every one of 51 published measurements of 51 networks ran slower than this profile predicts" in mx3["text"]
    assert mx3["text"].endswith("so read its FPS as an upper bound and its latency as a lower bound")
    npu = credibility.band("npu", "tda4vm", credibility._table()["npu"]["tda4vm"]["profile_digest"])
    assert "fps_bound" not in npu and npu["text"].startswith("simulated; this profile's figures are within +-")
    sides = [folder_side(_build(tmp_path / "a", 1000.0, mx3), "a"), folder_side(_build(tmp_path / "b", 900.0, npu), "b")]
    shown = text(sides)
    assert f"a: its fps is an upper bound: {mx3['text']}" in shown and "b: its fps is" not in shown
    assert as_json(sides)["fps_bound"] == ["upper", None]


def test_each_kind_of_figure_is_named_for_what_it_is() -> None:
    from accelbuild.engine.metrics import kind

    assert kind({"measured": True, "fps": 1.0}) == "measured"
    assert kind({"estimated_by": "rknn-toolkit2 2.5.0", "fps": 1.0}) == "estimated by rknn-toolkit2 2.5.0"
    assert kind({"fps": None, "timing": "needs a device", "emulated_by": "onnxruntime-qnn 2.7.0"}) == \
        "no timing: needs a device; accuracy emulated by onnxruntime-qnn 2.7.0"
    assert kind({"simulated": True, "fps": 1.0}) == "simulated"
