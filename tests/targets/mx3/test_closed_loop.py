"""The closed loop's choice among simulated splits: by the combined figure benchmark.json reports (the
slowest model's rate), never by different models' rates added."""

from __future__ import annotations

from accelbuild.targets.mx3.closed_loop import choose


def _split(det: float, cls: float) -> dict:
    return {"fps": min(det, cls), "model_fps": {"det": det, "cls": cls}}


def test_a_split_that_buys_a_faster_model_with_a_slower_one_is_not_chosen() -> None:
    figures = [_split(4_369, 9_323), _split(4_000, 13_000), _split(4_369, 9_000)]
    assert choose(figures, -1, ["det", "cls"]) == 0  # 4,369 sets/s; split 1 adds up to more frames, at 4,000
    assert choose(figures, 1, ["det", "cls"]) == 1  # prioritize_model: cls
    assert choose([_split(5_000, 9_000), _split(5_000, 9_500)], -1, ["det", "cls"]) == 1  # then the rates together
    assert choose([_split(5_000, 9_000), _split(5_000, 9_000)], -1, ["det", "cls"]) == 0  # then the cost model's
