"""benchmark: ``benchmark.json`` and ``report.html``. Speed is the compiler's cycle estimate (the sum of its
layer table's cycles, NPU layers only: the toolkit does not time CPU layers) at the platform's documented NPU
clock, labelled "estimated by rknn-toolkit2 <version>"; where no clock is documented, cycles and no time.
Accuracy is the toolkit's simulator against the float model (quantize.json)."""

from __future__ import annotations

import json
import logging
from typing import Any

from accelbuild import accuracy
from accelbuild.quantize import frames
from accelbuild.stages.context import StageContext
from accelbuild.targets import end_to_end
from accelbuild.targets.rknn.report import render
from accelbuild.targets.rknn.spec import BenchmarkParams
from accelbuild.util.files import write_bytes_atomic, write_json_atomic

log = logging.getLogger(__name__)


def run(ctx: StageContext) -> None:
    p: BenchmarkParams = ctx.params
    models = [_model(ctx, p, name) for name in p.models]
    timed = all(m["fps"] is not None for m in models)
    combined = end_to_end.combined_fps([m["fps"] for m in models], "in_turn") if timed else (None, None)
    summary: dict[str, Any] = {
        "estimated_by": p.toolkit,
        "platform": p.platform,
        "clock_mhz": p.npu_clock_mhz,
        "clock_source": p.clock_source,
        "fps": round(combined[0], 2) if combined[0] is not None else None,
        "fps_is": combined[1],
        "latency_ms": max(m["latency_ms"] for m in models) if timed else None,
        "offload": {"npu_layers": sum(m["npu_layers"] for m in models),
                    "host_layers": sum(m["cpu_model_layers"] for m in models)},
        "models": models,
    }
    if not timed:
        summary["timing"] = p.clock_source
    write_json_atomic(ctx.outputs["benchmark.json"], summary)
    placements = {name: _placement(ctx, name) for name in p.models}
    write_bytes_atomic(ctx.outputs["report.html"], render(p.pipeline, summary, placements).encode())
    for m in models:
        speed = (f"{m['fps']:,.1f} FPS, {m['latency_ms']:.3f} ms" if m["fps"] is not None
                 else f"{m['cycles']:,} cycles")
        log.info("%s: %s: %s (estimated by %s); %d NPU / %d CPU layers; simulator cosine %.5f vs float (%s)",
                 p.pipeline, m["name"], speed, p.toolkit, m["npu_layers"], m["cpu_model_layers"],
                 m["accuracy"]["cosine"], frames.said(m["accuracy"]))


def _placement(ctx: StageContext, name: str) -> dict[str, Any]:
    return json.loads(ctx.inputs[f"{name}/placement.json"].read_text())


def _model(ctx: StageContext, p: BenchmarkParams, name: str) -> dict[str, Any]:
    placement = _placement(ctx, name)
    record = json.loads(ctx.inputs[f"{name}/quantize.json"].read_text())
    cycles = placement["cycles"]
    latency_ms = cycles / (p.npu_clock_mhz * 1e3) if p.npu_clock_mhz else None
    fps = 1000.0 / latency_ms if latency_ms else None
    model: dict[str, Any] = {
        "name": name,
        "estimated_by": p.toolkit,
        "fps": round(fps, 2) if fps is not None else None,
        "latency_ms": round(latency_ms, 6) if latency_ms is not None else None,
        "cycles": cycles,
        "npu_cycles": placement["npu_cycles"],
        "ddr_cycles": placement["ddr_cycles"],
        "npu_layers": placement["npu_layers"],
        "cpu_layers": placement["cpu_layers"],
        "cpu_model_layers": placement["cpu_model_layers"],
        "host_ops": placement["host_ops"],
        "internal_memory_bytes": placement["internal_memory_bytes"],
        "weight_memory_bytes": placement["weight_memory_bytes"],
        "accuracy": record["output"],
    }
    if fps is not None and latency_ms is not None:
        feed = accuracy.random_inputs(_ai(ctx, name), 1, 0)[0]
        model["end_to_end"] = end_to_end.model_record(ctx.inputs, name, fps, latency_ms,
                                                      f"estimated by {p.toolkit}", p.host, feed)
    else:
        model["timing"] = p.clock_source
    return model


def _ai(ctx: StageContext, name: str):
    import onnx

    return onnx.load(str(ctx.inputs[f"{name}/ai.onnx"]))
