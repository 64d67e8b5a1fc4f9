"""End-to-end figures of one model, for every family: its accelerator part (simulated, estimated by a
compiler, or measured) with its cropped host sections (pre.onnx, post.onnx) timed in onnxruntime on this
machine, and labelled with both.

A frame's latency is the host pre time, the accelerator's latency and the host post time in sequence. Its
rate is the slowest of the three stages, since the host sections of one frame overlap the accelerator's work
on another (the application pipelines them: one thread per stage).

Host timings vary from run to run (more so on a shared machine), so each section keeps the p10 and p90 of its
timed runs besides the median, and the record gives the end-to-end figures at those times too
(``fps_spread``, ``latency_ms_spread``): ``compare`` calls a difference inside that spread no win.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from accelbuild.util.machine import onnxruntime_version, this_machine

HOST_RUNS = 20  # timed runs of each host section (after 2 warm-up runs); the median is recorded


def measured_on() -> str:
    """The machine and onnxruntime the host sections are timed with."""
    return this_machine().describe(onnxruntime_version())


@dataclass(frozen=True)
class SectionTime:
    """One host section's timed runs: the median (the figure) and the p10 and p90 (its spread), in ms."""

    median_ms: float
    p10_ms: float
    p90_ms: float

    @classmethod
    def of(cls, seconds: list[float]) -> SectionTime:
        p10, p90 = (float(np.percentile(seconds, q)) for q in (10, 90))
        return cls(*(round(1000 * v, 4) for v in (statistics.median(seconds), p10, p90)))

    @property
    def p10_p90(self) -> list[float]:
        return [self.p10_ms, self.p90_ms]


def section_time(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> SectionTime:
    """One host section timed in onnxruntime on this machine (``HOST_RUNS`` runs after 2 warm-up runs)."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    feeds = {k: v for k, v in feeds.items() if k in wanted}
    return SectionTime.of(timed_seconds(lambda: session.run(None, feeds), HOST_RUNS, warmup=2))


def timed_seconds(call: Callable[[], object], runs: int, warmup: int) -> list[float]:
    """Wall-clock seconds of each of ``runs`` calls of ``call()``, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        call()
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return seconds


def median_seconds(call: Callable[[], object], runs: int, warmup: int) -> float:
    """Median wall-clock seconds of ``call()`` over ``runs`` calls, after ``warmup`` untimed ones."""
    return statistics.median(timed_seconds(call, runs, warmup))


def record(fps: float, latency_ms: float, accelerator: str, pre_ms: float | None = None,
           post_ms: float | None = None, host: bool = True, pre_p10_p90: list[float] | None = None,
           post_p10_p90: list[float] | None = None) -> dict[str, Any]:
    """benchmark.json's ``end_to_end`` of one model. ``accelerator``: how the accelerator part was obtained
    ("simulated", "estimated by vela 4.2.0", "measured"); ``pre_ms`` / ``post_ms``: its host sections'
    measured median times (None: the model has no such section), ``pre_p10_p90`` / ``post_p10_p90`` the p10
    and p90 of their runs; ``host``: false when benchmark.host turned the timing off (the record then says
    the figures are the accelerator's alone)."""
    fps_now, bound, latency = _combined(fps, latency_ms, pre_ms, post_ms)
    result: dict[str, Any] = {
        "fps": round(fps_now, 2),
        "latency_ms": round(latency, 4),
        "accelerator": accelerator,
        "host_measured_on": measured_on() if (pre_ms is not None or post_ms is not None) else None,
        "bound": bound,
        "host_pre_ms": pre_ms,
        "host_post_ms": post_ms,
    }
    if pre_p10_p90 is not None or post_p10_p90 is not None:  # the figures at the sections' p90, then p10 times
        slow = _combined(fps, latency_ms, *(None if s is None else s[1] for s in (pre_p10_p90, post_p10_p90)))
        fast = _combined(fps, latency_ms, *(None if s is None else s[0] for s in (pre_p10_p90, post_p10_p90)))
        result.update({"host_pre_ms_p10_p90": pre_p10_p90, "host_post_ms_p10_p90": post_p10_p90,
                       "fps_spread": [round(slow[0], 2), round(fast[0], 2)],
                       "latency_ms_spread": [round(fast[2], 4), round(slow[2], 4)]})
    if not host:
        result["sections"] = "accelerator only (benchmark.host: false)"
    elif pre_ms is None and post_ms is None:
        result["sections"] = "accelerator only (no pre/post sections)"
    else:
        result["sections"] = " + ".join(s for s, ms in (("pre.onnx", pre_ms), ("accelerator", 0.0),
                                                          ("post.onnx", post_ms)) if ms is not None)
    return result


def _combined(fps: float, latency_ms: float, pre_ms: float | None,
              post_ms: float | None) -> tuple[float, str, float]:
    """(frames per second, the stage bounding them, latency) of the accelerator with its host sections."""
    stages = {"accelerator": fps}
    for name, ms in (("host pre", pre_ms), ("host post", post_ms)):
        if ms:
            stages[name] = 1000.0 / ms
    bound = min(stages, key=lambda k: stages[k])
    return stages[bound], bound, latency_ms + (pre_ms or 0.0) + (post_ms or 0.0)


def combined_fps(per_model: list[float], how: str) -> tuple[float, str]:
    """The one figure a multi-model pipeline's headline may carry, and what it is: ``how`` = "concurrent"
    (models run side by side: whole sets per second are the slowest model's rate), "shared_input" (every
    model runs on each input frame), or "in_turn" (models take turns on one engine: a set is one frame of
    each, its time the sum of theirs)."""
    if len(per_model) == 1:
        return per_model[0], "frames per second of the model"
    if how == "in_turn":
        total = sum(1.0 / f for f in per_model if f > 0)
        return (1.0 / total if total else 0.0), (f"sets per second, one frame of each of the {len(per_model)} "
                                                 "models taking turns")
    slowest = min(per_model)
    if how == "shared_input":
        return slowest, "frames per second of the shared input (every model runs on each frame)"
    return slowest, f"sets per second, one frame of each of the {len(per_model)} models (the slowest model's rate)"


def host_section_times(pre: onnx.ModelProto | None, post: onnx.ModelProto | None, ai: onnx.ModelProto,
                       ai_feed: dict[str, np.ndarray]) -> tuple[SectionTime | None, SectionTime | None]:
    """(pre, post) timings of a model's host sections on this machine (None: no such section). The pre section
    runs on seeded random inputs of its own; the post section on the float AI section's outputs for
    ``ai_feed``, as it would in the application."""
    from accelbuild import accuracy
    from accelbuild.quantize import measure

    pre_time = section_time(pre, accuracy.random_inputs(pre, 1, 0)[0]) if pre is not None else None
    post_time = None
    if post is not None:
        session = measure.session(ai)
        names = [o.name for o in session.get_outputs()]
        outputs = dict(zip(names, session.run(None, {i.name: ai_feed[i.name] for i in session.get_inputs()})))
        post_time = section_time(post, outputs)
    return pre_time, post_time


def model_record(inputs: dict[str, Path], name: str, fps: float, latency_ms: float, accelerator: str,
                 host: bool, ai_feed: dict[str, np.ndarray]) -> dict[str, Any]:
    """``record`` for model ``name`` of a benchmark stage whose inputs hold ``<name>/pre.onnx``,
    ``<name>/post.onnx`` and ``<name>/ai.onnx``: its sections timed when ``host`` (benchmark.host) and when
    it has any."""
    from accelbuild.passes.sections import read_section

    pre_time = post_time = None
    if host:
        pre, post = (read_section(inputs[f"{name}/{s}"]) for s in ("pre.onnx", "post.onnx"))
        if pre is not None or post is not None:
            pre_time, post_time = host_section_times(pre, post, onnx.load(str(inputs[f"{name}/ai.onnx"])), ai_feed)
    return record(fps, latency_ms, accelerator, None if pre_time is None else pre_time.median_ms,
                  None if post_time is None else post_time.median_ms, host,
                  None if pre_time is None else pre_time.p10_p90, None if post_time is None else post_time.p10_p90)
