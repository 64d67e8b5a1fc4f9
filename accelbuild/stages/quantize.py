"""Quantize stage: ``ai.onnx`` in; ``quantized.onnx`` (integer weights behind DequantizeLinear) and
``quantize.json`` (per-layer precision, weight bytes and SQNR; output accuracy against float;
host packet costs) out."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import onnx

from accelbuild import accuracy
from accelbuild.build.worker import StageContext
from accelbuild.config.schema_check import did_you_mean
from accelbuild.errors import ConfigError, InputFileError
from accelbuild.frontends.onnx_model import save_onnx
from accelbuild.targets.mx3 import packets
from accelbuild.quantize import auto_precision, measure
from accelbuild.quantize.rewrite import quantize_layers, quantized_model
from accelbuild.quantize.weights import BITS, WeightedLayer, weighted_layers
from accelbuild.util.files import write_json_atomic

log = logging.getLogger(__name__)


def extra_inputs(inputs: dict[str, Path]) -> dict[str, Path]:
    """The pre-processing section, when the crop stage wrote one: it shapes the accuracy inputs."""
    pre = inputs["ai"].with_name("pre.onnx")
    return {"pre": pre} if pre.exists() else {}


def run(ctx: StageContext) -> None:
    ai = onnx.load(str(ctx.inputs["ai"]))
    pre_path = ctx.inputs["ai"].with_name("pre.onnx")
    pre = onnx.load(str(pre_path)) if pre_path.exists() else None
    layers = weighted_layers(ai)
    q = ctx.model.quantize
    bits = {layer.name: q.weight_bits for layer in layers}
    bits.update(_overrides(ctx, layers))
    bench = ctx.pipeline.benchmark
    samples = accuracy.through(pre, accuracy.model_inputs(pre or ai, bench.samples, bench.seed, bench.data))
    auto_record = None
    if q.auto_precision:
        decision = auto_precision.choose_bits(ai, layers, q.weight_bits, samples)
        bits, auto_record = decision.bits, decision.record
        log.info("%s: auto precision raised %d layer(s) to 16 bits", ctx.model.name, len(decision.record["raised"]))
    quantized = quantize_layers(ai, layers, bits)
    model = quantized_model(ai, quantized)
    save_onnx(model, ctx.outputs["quantized.onnx"])
    reference = measure.run_all(measure.session(ai), samples)
    measured = measure.run_all(measure.session(measure.with_bf16_activations(model)), samples)
    records = [layer.record() for layer in quantized]
    write_json_atomic(ctx.outputs["quantize.json"], {
        "weight_bits": q.weight_bits,
        "weights": sum(r["weights"] for r in records),
        "weight_bytes": sum(r["weight_bytes"] for r in records),
        "layers": records,
        "activations": "bfloat16",
        "output": {**measure.compare(reference, measured), "samples": len(samples)},
        "auto_precision": auto_record,
        "packets": _packets(ai, ctx.pipeline.target.input_format, ctx.pipeline.target.output_format),
    })


def _overrides(ctx: StageContext, layers: list[WeightedLayer]) -> dict[str, int]:
    names = [layer.name for layer in layers]
    q = ctx.model.quantize
    if q.bits:
        for name in q.bits:
            if name not in names:
                where = ctx.pipeline.where("models", ctx.model.index, "quantize", "bits", name, key=True)
                raise ConfigError(where, f"no weighted layer named {name!r} in model {ctx.model.name!r}"
                                         f"{did_you_mean(name, names)}")
        return dict(q.bits)
    if q.bits_file is not None:
        shown = ctx.pipeline.source.data["models"][ctx.model.index]["quantize"]["bits_file"]
        table = _read_bits_file(ctx.inputs["bits_file"], shown)
        for name in table:
            if name not in names:
                raise InputFileError(shown, f"no weighted layer named {name!r} in model {ctx.model.name!r}"
                                            f"{did_you_mean(name, names)}")
        return table
    return {}


def _read_bits_file(path: Path, shown: str) -> dict[str, int]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(shown, f"not a readable JSON file: {exc}") from None
    if not isinstance(data, dict):
        raise InputFileError(shown, "expected a JSON object {layer_name: bits}")
    for name, value in data.items():
        if value not in BITS or isinstance(value, bool):
            raise InputFileError(shown, f"layer {name!r}: bits must be 4, 8 or 16, not {value!r}")
    return data


def _packets(ai: onnx.ModelProto, input_format: str, output_format: str) -> dict[str, Any]:
    def shapes(values: list[onnx.ValueInfoProto]) -> dict[str, list[int]]:
        return {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in values}

    inputs = shapes([v for v in ai.graph.input if v.name not in {t.name for t in ai.graph.initializer}])
    outputs = shapes(list(ai.graph.output))
    in_table = packets.table(inputs, packets.FORMATS)
    out_table = packets.table(outputs, [f for f in packets.FORMATS if f != "RGB888"])
    return {
        "input_format": input_format,
        "output_format": output_format,
        "inputs": in_table,
        "outputs": out_table,
        "input_bytes_per_frame": sum(t[input_format] for t in in_table.values()),
        "output_bytes_per_frame": sum(t[output_format] for t in out_table.values()),
    }
