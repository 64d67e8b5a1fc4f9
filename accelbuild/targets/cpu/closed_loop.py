"""Family cpu's closed loop (the map stage with ``closed_loop.enabled``): every candidate session configuration
(precision x graph optimization level x intra-op threads) measured where the build's figures are measured, on
the pipeline's device (``ctx.fan_out``, one measurement at a time) or on this machine, and the fastest measured
kept in session.json; closed_loop.json records every candidate's figures, the device and what the loop cost.

Each candidate runs the benchmark's frames (the same accuracy inputs) through an onnxruntime session of its
model (float: ai.onnx; int8: quantized.onnx, the integer path) with its options: 5 warm-up frames, then
``benchmark.frames`` timed one at a time. Its figure is fps = 1000 / median latency, and its spread the fps
at the first and third quartiles of the same frames' latencies. A candidate ties with the fastest when their
interquartile latency ranges overlap: such a difference is inside the measured spread. The fastest by median
is kept, ties or not (equal medians: the first in candidate order), and closed_loop.json names the ties.

Measurements are cached one by one (``ctx.cache``), keyed by the candidate, the bytes of its model and frames,
the frame count, the code of this module and the device (its resource and machine): a re-run with another
candidate set measures only the new candidates; another device measures them all again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from accelbuild import accuracy
from accelbuild.errors import StageError
from accelbuild.stages.context import StageContext
from accelbuild.targets.cpu import session
from accelbuild.targets.cpu.spec import ClosedLoopParams
from accelbuild.targets.cpu.timing import WARMUP_FRAMES, time_frames

log = logging.getLogger(__name__)

PRECISIONS = ("float", "int8")
LEVELS = ("basic", "extended", "all")
MODEL_OF = {"float": "ai.onnx", "int8": "quantized.onnx"}
RULE = ("fastest by median latency; a candidate whose interquartile latency range overlaps the fastest's is a tie "
        "(its difference is inside the measured spread); the fastest by median is kept (equal medians: the first "
        "in candidate order)")


@dataclass(frozen=True)
class Candidate:
    precision: str
    graph_optimization: str
    threads: int  # 0: onnxruntime's default (one per physical core)

    @property
    def label(self) -> str:
        return f"{self.precision}/{self.graph_optimization}/threads={self.threads or 'default'}"


@dataclass(frozen=True)
class Shared:
    """What every measurement needs: the models' bytes by precision and the frames (sent to a device once)."""

    models: dict[str, bytes]
    frames: list[dict[str, np.ndarray]]
    count: int  # timed frames per candidate
    onnxruntime: str
    machine: str  # the description the build keyed the measurements on
    device: str | None


def candidates(p: ClosedLoopParams) -> list[Candidate]:
    """Every configuration, in a fixed order (the default configuration among them)."""
    return [Candidate(precision, level, threads) for precision in PRECISIONS for level in LEVELS
            for threads in p.threads]


def measure(candidate: Candidate, shared: Shared) -> dict[str, Any]:
    """Time one candidate here (on the device when sent there); raises ``StageError`` on another machine than
    the one the build keyed."""
    import onnxruntime as ort

    from accelbuild.targets.cpu.target import device_description

    here = device_description()
    if here != shared.machine:
        where = f"device {shared.device}" if shared.device else "this machine"
        raise StageError(f"{where} is {here}, but the build keyed its measurements on {shared.machine}")
    started = time.perf_counter()
    config = session.choose(candidate.precision, candidate.threads or None, candidate.graph_optimization,
                            shared.onnxruntime)
    sess = ort.InferenceSession(shared.models[candidate.precision], session.options(config, for_saving=True),
                                providers=list(config["providers"]))
    wanted = [i.name for i in sess.get_inputs()]
    frames = [{k: f[k] for k in wanted} for f in shared.frames]
    timing = time_frames(lambda i: sess.run(None, frames[i % len(frames)]), shared.count)
    lat = np.asarray(timing.latencies_ms)
    q25, median, q75, p90 = (float(np.percentile(lat, q)) for q in (25, 50, 75, 90))
    return {"fps": round(1000.0 / median, 2), "fps_spread": [round(1000.0 / q75, 2), round(1000.0 / q25, 2)],
            "latency_ms": round(median, 4), "latency_q25_ms": round(q25, 4), "latency_q75_ms": round(q75, 4),
            "latency_p90_ms": round(p90, 4), "frames": timing.frames, "warmup_frames": timing.warmup_frames,
            "seconds": round(time.perf_counter() - started, 3)}


def run(ctx: StageContext) -> tuple[Candidate, dict[str, Any]]:
    """Measure every candidate (from the cache where measured before), choose, and return the chosen one with
    the closed_loop.json record."""
    p: ClosedLoopParams = ctx.params
    started = time.monotonic()
    models = {precision: ctx.inputs[name].read_bytes() for precision, name in MODEL_OF.items()}
    feeds = accuracy.ai_inputs(p.model, ctx.inputs, ctx.inputs["ai.onnx"], ctx.inputs["pre.onnx"], p.accuracy, p.data)
    shared = Shared(models, feeds, p.frames, p.onnxruntime, p.machine, p.device)
    todo = candidates(p)
    keys = {c: _key(ctx, p, c, models, feeds) for c in todo}
    results: dict[Candidate, dict[str, Any]] = {}
    for c in todo:
        found = ctx.cache.lookup(keys[c]) if ctx.cache is not None else None
        if found is not None and "measurement.json" in found:
            results[c] = {**json.loads(found["measurement.json"].read_bytes()), "cached": True}
    missing = [c for c in todo if c not in results]
    log.info("%s: closed loop: %d candidate(s), %d to measure on %s", p.model, len(todo), len(missing),
             f"device {p.device}" if p.device else "this machine")
    for c, result in zip(missing, _measure_all(ctx, p, missing, shared)):
        if ctx.cache is not None:
            ctx.cache.store(keys[c], {"measurement.json": json.dumps(result, sort_keys=True).encode()})
        results[c] = {**result, "cached": False}
        log.info("%s: closed loop: %s: %.1f FPS (%.1f..%.1f)", p.model, c.label, result["fps"],
                 *result["fps_spread"])
    return _choose(p, todo, results, time.monotonic() - started)


def _measure_all(ctx: StageContext, p: ClosedLoopParams, missing: list[Candidate],
                 shared: Shared) -> Iterator[dict[str, Any]]:
    """The measurements of ``missing`` in their order: on the device (through ``ctx.fan_out``) or here."""
    if p.device is None:
        return (measure(c, shared) for c in missing)
    if ctx.fan_out is None or getattr(ctx.fan_out, "device", None) != p.device:
        raise StageError(f"{p.model}: the closed loop measures on device {p.device}, but the build did not "
                         "reach it")
    return ctx.fan_out.map(measure, missing, shared)


def _key(ctx: StageContext, p: ClosedLoopParams, c: Candidate, models: dict[str, bytes],
         feeds: list[dict[str, np.ndarray]]) -> str:
    digest = hashlib.sha256(pickle.dumps([sorted(f.items()) for f in feeds], protocol=4)).hexdigest()
    code = ctx.code_digest(("accelbuild.targets.cpu.closed_loop", "accelbuild.targets.cpu.session",
                            "accelbuild.targets.cpu.timing")) if ctx.code_digest else ""
    material = {"unit": "cpu closed-loop candidate", "candidate": asdict(c), "frames": p.frames,
                "model": hashlib.sha256(models[c.precision]).hexdigest(), "inputs": digest,
                "onnxruntime": p.onnxruntime, "machine": p.machine, "device": p.device, "code": code}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _choose(p: ClosedLoopParams, todo: list[Candidate], results: dict[Candidate, dict[str, Any]],
            seconds: float) -> tuple[Candidate, dict[str, Any]]:
    best = min(todo, key=lambda c: (results[c]["latency_ms"], todo.index(c)))
    ties = [c for c in todo if c != best and results[c]["latency_q25_ms"] <= results[best]["latency_q75_ms"]]
    default = Candidate(*p.default)
    rows = [{**asdict(c), "label": c.label, **results[c]} for c in todo]
    measured = [r for r in rows if not r["cached"]]
    record = {
        "measured_on": {"device": p.device, "machine": p.machine} if p.device else p.machine,
        "model": p.model,
        "backend": "onnxruntime (model.ort)",
        "frames": p.frames,
        "warmup_frames": WARMUP_FRAMES,
        "figure": "fps = 1000 / median latency; spread: fps at the third and first quartile latencies",
        "rule": RULE,
        "chosen": {**asdict(best), "label": best.label, "fps": results[best]["fps"],
                   "fps_spread": results[best]["fps_spread"]},
        "default": {**asdict(default), "label": default.label, "fps": results[default]["fps"],
                    "fps_spread": results[default]["fps_spread"],
                    "tie_with_chosen": default == best or default in ties},
        "ties": [c.label for c in ties],
        "candidates": rows,
        "cost": {"candidates": len(rows), "measured": len(measured), "from_cache": len(rows) - len(measured),
                 "measurement_seconds": round(sum(r["seconds"] for r in measured), 3),
                 "loop_seconds": round(seconds, 3)},
    }
    log.info("%s: closed loop keeps %s: %.1f FPS (%.1f..%.1f) against the default %s: %.1f FPS (%.1f..%.1f)%s",
             p.model, best.label, results[best]["fps"], *results[best]["fps_spread"], default.label,
             results[default]["fps"], *results[default]["fps_spread"],
             f"; ties: {', '.join(c.label for c in ties)}" if ties else "")
    return best, record
