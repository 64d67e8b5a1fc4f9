"""benchmark: ``benchmark.json`` (Vela's estimates, labelled with its version, and the int8 model's accuracy
against float measured in LiteRT), ``layer_stats.yaml`` (Vela's per-layer figures) and ``report.html``."""

from __future__ import annotations

import json
import logging
from typing import Any

import onnx
import yaml

from accelbuild import accuracy
from accelbuild.errors import StageError
from accelbuild.quantize import frames, measure
from accelbuild.stages.context import StageContext
from accelbuild.targets import end_to_end
from accelbuild.targets.ethos_u.report import render
from accelbuild.targets.ethos_u.spec import BenchmarkParams
from accelbuild.targets.ethos_u.tflite import kernels, verify
from accelbuild.targets.ethos_u.tflite.writer import io_layout
from accelbuild.util.files import write_bytes_atomic, write_json_atomic

log = logging.getLogger(__name__)
KIB = 1024


def run(ctx: StageContext) -> None:
    p: BenchmarkParams = ctx.params
    models = [_model(ctx, p, name, p.data[i], p.calibration_frames[i] if p.calibration_frames else None)
              for i, name in enumerate(p.models)]
    estimated_by = f"vela {p.vela_version}"
    combined = end_to_end.combined_fps([m["fps"] for m in models], "in_turn")
    summary = {
        "estimated_by": estimated_by,
        "accelerator": p.accelerator,
        "fps": round(combined[0], 2),
        "fps_is": combined[1],
        "latency_ms": max(m["latency_ms"] for m in models),
        "npu_ops": sum(m["npu_ops"] for m in models),
        "cpu_ops": sum(len(m["cpu_ops"]) for m in models),
        "sram_bytes": max(m["sram_bytes"] for m in models),
        "offload": {"npu_layers": sum(m["npu_ops"] for m in models),
                    "host_layers": sum(len(m["cpu_ops"]) for m in models)},
        "models": models,
    }
    write_json_atomic(ctx.outputs["benchmark.json"], summary)
    stats = {m["name"]: [_layer(layer) for layer in _vela(ctx, m["name"])["layers"]] for m in models}
    write_bytes_atomic(ctx.outputs["layer_stats.yaml"],
                       yaml.safe_dump(stats, sort_keys=False, default_flow_style=False).encode())
    write_bytes_atomic(ctx.outputs["report.html"], render(p.pipeline, summary, stats).encode())
    for m in models:
        whole = m["end_to_end"]
        host = (f"; end to end {whole['fps']:,.1f} FPS, {whole['latency_ms']:.3f} ms ({whole['bound']}-bound, host "
                "sections measured here)") if whole["host_measured_on"] else ""
        log.info("%s: %s: %.1f FPS, %.3f ms (estimated by %s)%s; %d NPU / %d CPU operators; cosine %.5f vs float "
                 "(%s)", p.pipeline, m["name"], m["fps"], m["latency_ms"], estimated_by, host, m["npu_ops"],
                 len(m["cpu_ops"]), m["accuracy"]["cosine"], frames.said(m["accuracy"]))


def _vela(ctx: StageContext, name: str) -> dict[str, Any]:
    return json.loads(ctx.inputs[f"{name}/vela.json"].read_text())


def _model(ctx: StageContext, p: BenchmarkParams, name: str, data: Any, calibrated: int | None) -> dict[str, Any]:
    record = _vela(ctx, name)
    s = record["summary"]
    if s.get("inferences_per_second") is None:  # Vela writes nan: nothing of the model runs on the NPU
        raise StageError(f"{name}: Vela placed every operator on the CPU ({', '.join(o['op'] for o in record['cpu_ops']) or 'none'}), "
                         "so it estimates no time on the Ethos-U; nothing of this model runs on the NPU. Build it on "
                         "family cpu, or crop it to the layers the NPU runs")
    feeds, names = accuracy.ai_inputs_named(name, ctx.inputs, ctx.inputs[f"{name}/ai.onnx"],
                                            ctx.inputs[f"{name}/pre.onnx"], p.accuracy, data)
    qdq = onnx.load(str(ctx.inputs[f"{name}/quantized.onnx"]))
    chosen = kernels.choose(qdq, len(feeds))
    interp = verify.interpreter(ctx.inputs[f"{name}/int8.tflite"].read_bytes(), chosen.name)
    ai = measure.session(onnx.load(str(ctx.inputs[f"{name}/ai.onnx"])))
    reference, lite, quantized = verify.outputs_per_frame(ai, interp, io_layout(qdq), feeds, measure.session(qdq))
    flash = float(s.get("off_chip_flash_memory_used", 0)) + float(s.get("on_chip_flash_memory_used", 0))
    return {
        "name": name,
        "fps": round(float(s["inferences_per_second"]), 2),
        "latency_ms": round(float(s["inference_time"]) * 1000.0, 6),
        "cycles": int(s["cycles_total"]),
        "clock_mhz": float(s["core_clock"]) / 1e6,
        "system_config": s.get("system_config"),
        "memory_mode": s.get("memory_mode"),
        "npu_ops": record["npu_ops"],
        "cpu_ops": record["cpu_ops"],
        # the ONNX nodes written as float CPU operators (no int8 form), and why: the ONNX side of cpu_ops
        "float_operators": json.loads(ctx.inputs[f"{name}/int8.json"].read_text()).get("float_operators", []),
        "sram_bytes": int(round(float(s["sram_memory_used"]) * KIB)),
        "flash_bytes": int(round(flash * KIB)),
        "dram_bytes": int(round(float(s.get("dram_memory_used", 0)) * KIB)),
        "macs": int(s.get("nn_macs", 0)),
        "accuracy": {**frames.record(reference, lite, frames.labelled(names, calibrated,
                                                                      accuracy.is_random(p.accuracy, data)),
                                     [o.name for o in ai.get_outputs()]),
                     "runtime": f"{chosen.runtime}, int8.tflite", "kernels": chosen.record(),
                     **accuracy.describe_inputs(p.accuracy, data, len(feeds))},
        "crosscheck": {"against": "quantized.onnx in onnxruntime", **measure.compare(quantized, lite)},
        "end_to_end": end_to_end.model_record(ctx.inputs, name, float(s["inferences_per_second"]),
                                              float(s["inference_time"]) * 1000.0, f"estimated by vela "
                                              f"{p.vela_version}", p.host, feeds[0]),
    }


def _layer(row: dict[str, Any]) -> dict[str, Any]:
    return {"name": row.get("name"), "op": row.get("original_operator"), "npu_op": row.get("nng_operator"),
            "unit": row.get("target"), "cycles": row.get("op_cycles"), "macs": row.get("mac_count"),
            "sram_accesses": row.get("sram_ac"), "dram_accesses": row.get("dram_ac"),
            "flash_accesses": row.get("offflash_ac"), "mac_utilisation_pct": row.get("util_mac")}
