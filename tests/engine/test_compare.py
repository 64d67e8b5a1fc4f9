"""compare says which way a one-sided credibility band runs: where every published measurement of the profile
is on one side of the model, its fps is a bound, not a figure with an error either way."""

from __future__ import annotations

import json
from pathlib import Path

from accelbuild.engine.compare import as_json, folder_side, text
from accelbuild.targets import credibility


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
