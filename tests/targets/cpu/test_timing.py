"""The cpu family's timed figures: fps, median and p90 of the same frames, consistent with each other."""

from __future__ import annotations

from accelbuild.targets.cpu.timing import Timing, time_frames


def test_fps_is_the_median_latencys_rate_even_with_delayed_frames() -> None:
    """A shared machine: 80 frames at 2.371 ms, 20 delayed to 50.245 ms. Frames over the whole loop would
    read 48.8 FPS beside a 2.371 ms median; fps is 1000 / median, the mean says what the delays cost."""
    latencies = (2.371,) * 80 + (50.245,) * 20
    record = Timing(100, 5, latencies, sum(latencies) / 1e3).record()
    assert record["latency_ms"] == 2.371 and record["latency_p90_ms"] == 50.245
    assert record["fps"] == round(1000 / 2.371, 2) == 421.76
    assert record["latency_mean_ms"] == round(sum(latencies) / 100, 4)
    assert record["fps_from"].startswith("1000 / latency_ms")


def test_timed_frames_give_fps_and_median_that_agree() -> None:
    calls = []
    record = time_frames(lambda i: calls.append(sum(range(2000))), 12, warmup=3).record()
    assert len(calls) == 15 and record["frames"] == 12 and record["warmup_frames"] == 3
    assert record["fps"] == round(1000 / record["latency_ms"], 2)  # the recorded median's rate, exactly
    assert record["latency_min_ms"] <= record["latency_ms"] <= record["latency_p90_ms"] <= record["latency_max_ms"]
