"""End-to-end figures of one model, for every family: its accelerator part (simulated, estimated by a
compiler, or measured) with its cropped host sections (pre.onnx, post.onnx) timed in onnxruntime on this
machine, and labelled with both.

A frame's latency is the host pre time, the accelerator's latency and the host post time in sequence. Its
rate is the slowest of the three stages, since the host sections of one frame overlap the accelerator's work
on another (the application pipelines them: one thread per stage).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from accelbuild.util.machine import onnxruntime_version, this_machine

HOST_RUNS = 20  # timed runs of each host section (after 2 warm-up runs); the median is recorded


def measured_on() -> str:
    """The machine and onnxruntime the host sections are timed with."""
    return this_machine().describe(onnxruntime_version())


def section_ms(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> float:
    """Median milliseconds of one host section in onnxruntime on this machine."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    feeds = {k: v for k, v in feeds.items() if k in wanted}
    return round(1000 * median_seconds(lambda: session.run(None, feeds), HOST_RUNS, warmup=2), 4)


def median_seconds(call: Callable[[], object], runs: int, warmup: int) -> float:
    """Median wall-clock seconds of ``call()`` over ``runs`` calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        call()
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def record(fps: float, latency_ms: float, accelerator: str, pre_ms: float | None = None,
           post_ms: float | None = None, host: bool = True) -> dict[str, Any]:
    """benchmark.json's ``end_to_end`` of one model. ``accelerator``: how the accelerator part was obtained
    ("simulated", "estimated by vela 4.2.0", "measured"); ``pre_ms`` / ``post_ms``: its host sections'
    measured times (None: the model has no such section); ``host``: false when benchmark.host turned the
    timing off (the record then says the figures are the accelerator's alone)."""
    stages = {"accelerator": fps}
    for name, ms in (("host pre", pre_ms), ("host post", post_ms)):
        if ms:
            stages[name] = 1000.0 / ms
    bound = min(stages, key=lambda k: stages[k])
    result: dict[str, Any] = {
        "fps": round(stages[bound], 2),
        "latency_ms": round(latency_ms + (pre_ms or 0.0) + (post_ms or 0.0), 4),
        "accelerator": accelerator,
        "host_measured_on": measured_on() if (pre_ms is not None or post_ms is not None) else None,
        "bound": bound,
        "host_pre_ms": pre_ms,
        "host_post_ms": post_ms,
    }
    if not host:
        result["sections"] = "accelerator only (benchmark.host: false)"
    elif pre_ms is None and post_ms is None:
        result["sections"] = "accelerator only (no pre/post sections)"
    else:
        result["sections"] = " + ".join(s for s, ms in (("pre.onnx", pre_ms), ("accelerator", 0.0),
                                                          ("post.onnx", post_ms)) if ms is not None)
    return result


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
                       ai_feed: dict[str, np.ndarray]) -> tuple[float | None, float | None]:
    """(pre ms, post ms) of a model's host sections on this machine (None: no such section). The pre section
    runs on seeded random inputs of its own; the post section on the float AI section's outputs for
    ``ai_feed``, as it would in the application."""
    from accelbuild import accuracy
    from accelbuild.quantize import measure

    pre_ms = section_ms(pre, accuracy.random_inputs(pre, 1, 0)[0]) if pre is not None else None
    post_ms = None
    if post is not None:
        session = measure.session(ai)
        names = [o.name for o in session.get_outputs()]
        outputs = dict(zip(names, session.run(None, {i.name: ai_feed[i.name] for i in session.get_inputs()})))
        post_ms = section_ms(post, outputs)
    return pre_ms, post_ms


def model_record(inputs: dict[str, Path], name: str, fps: float, latency_ms: float, accelerator: str,
                 host: bool, ai_feed: dict[str, np.ndarray]) -> dict[str, Any]:
    """``record`` for model ``name`` of a benchmark stage whose inputs hold ``<name>/pre.onnx``,
    ``<name>/post.onnx`` and ``<name>/ai.onnx``: its sections timed when ``host`` (benchmark.host) and when
    it has any."""
    from accelbuild.passes.sections import read_section

    pre_ms = post_ms = None
    if host:
        pre, post = (read_section(inputs[f"{name}/{s}"]) for s in ("pre.onnx", "post.onnx"))
        if pre is not None or post is not None:
            pre_ms, post_ms = host_section_times(pre, post, onnx.load(str(inputs[f"{name}/ai.onnx"])), ai_feed)
    return record(fps, latency_ms, accelerator, pre_ms, post_ms, host)
