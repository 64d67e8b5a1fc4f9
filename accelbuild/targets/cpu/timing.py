"""Wall-clock timing of onnxruntime sessions on this machine: warm-up, then one run per frame."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

WARMUP_FRAMES = 5  # first runs allocate buffers and spin up threads; not part of the figures


@dataclass(frozen=True)
class Timing:
    frames: int
    warmup_frames: int
    latencies_ms: tuple[float, ...]
    total_s: float

    def record(self) -> dict[str, float | int]:
        """The figures of these frames. ``fps`` is 1000 / the median latency: a single stream's rate at the
        same frames' typical latency, so fps and latency never disagree. A frame another process delayed
        moves the mean (``latency_mean_ms``, whose inverse is frames over the whole loop) and p90, not the
        median: on a shared machine, frames / total time read 49 FPS beside a 2.4 ms median."""
        lat = np.asarray(self.latencies_ms)
        median = round(float(np.median(lat)), 4)  # as recorded: fps is 1000 / the recorded figure
        return {
            "fps": round(1000.0 / median, 2) if median > 0 else 0.0,
            "fps_from": "1000 / latency_ms (the median of the timed frames)",
            "latency_ms": median,
            "latency_mean_ms": round(float(lat.mean()), 4),
            "latency_p90_ms": round(float(np.percentile(lat, 90)), 4),
            "latency_min_ms": round(float(lat.min()), 4),
            "latency_max_ms": round(float(lat.max()), 4),
            "frames": self.frames,
            "warmup_frames": self.warmup_frames,
        }


def time_frames(run_frame: Callable[[int], object], frames: int, warmup: int = WARMUP_FRAMES) -> Timing:
    """Call ``run_frame(i)`` ``warmup`` times untimed, then ``frames`` times, timing each call (one frame at a
    time, as a single stream runs)."""
    for i in range(warmup):
        run_frame(i)
    latencies = []
    start = time.perf_counter()
    for i in range(frames):
        t0 = time.perf_counter()
        run_frame(i)
        latencies.append((time.perf_counter() - t0) * 1e3)
    return Timing(frames, warmup, tuple(latencies), time.perf_counter() - start)
