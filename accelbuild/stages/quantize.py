"""Quantize stage: ``ai.onnx`` in; ``quantized.onnx`` (integer weights behind DequantizeLinear) and
``quantize.json`` (per-layer precision, weight bytes and SQNR; output accuracy against float;
host packet costs) out."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import onnx

from accelbuild import accuracy
from accelbuild.config.schema_check import did_you_mean
from accelbuild.errors import ConfigError, InputFileError
from accelbuild.families import get_target
from accelbuild.frontends.onnx_model import save_onnx
from accelbuild.passes import sections
from accelbuild.quantize import auto_precision, frames, measure, precision_measures
from accelbuild.quantize.rewrite import quantize_layers, quantized_model
from accelbuild.quantize.weights import weighted_layers
from accelbuild.stages.context import StageContext
from accelbuild.stages.params import PrecisionRules, QuantizeParams
from accelbuild.util.files import write_json_atomic

log = logging.getLogger(__name__)
EXACT_SQNR_DB = 200.0  # what weights.sqnr_db gives an exact copy (no noise)


def run(ctx: StageContext) -> None:
    ai = onnx.load(str(ctx.inputs["ai"]))
    pre = sections.read_section(ctx.inputs["pre"])
    q: QuantizeParams = ctx.params
    if q.precision.quantizes:
        _check_precision(ctx, q)
    samples, names = accuracy.stage_inputs_named(pre or ai, q.accuracy, ctx.inputs, q.data)
    samples = accuracy.through(pre, samples)
    random = accuracy.is_random(q.accuracy, q.data)
    reference = measure.run_all(measure.session(ai), samples)
    refused = accuracy.non_finite_float(q.model, pre or ai, ai, reference, names, random)
    if refused:
        raise ConfigError(ctx.locate("data"), refused)
    if not q.precision.quantizes:
        _unchanged(ctx, ai, q)
        return
    if q.precision.integer:
        from accelbuild.stages import quantize_integer

        bits = _overrides(ctx, quantize_integer.layer_names(ai), "layer")
        quantize_integer.quantize(ctx, ai, samples, bits, names, random, reference)
        return
    layers = weighted_layers(ai)
    bits = {layer.name: q.weight_bits for layer in layers}
    bits.update(_overrides(ctx, [layer.name for layer in layers]))
    auto_record = None
    if q.auto_precision is not None:
        target = q.auto_precision
        candidates = [c for c in precision_measures.weight_candidates(layers, q.weight_bits) if c.extra_bytes > 0]
        decision = auto_precision.raise_to_target(candidates, precision_measures.weight_cosine(ai, layers, samples),
                                                  target.min_cosine, target.max_extra_bytes)
        bits.update(decision.bits)
        auto_record = decision.record
        log.info("%s: auto precision raised %d layer(s) to 16 bits; cosine %.5f (%s)", q.model,
                 len(decision.record["raised"]), decision.cosine,
                 "target reached" if decision.reached else "target not reached")
    quantized = quantize_layers(ai, layers, bits)
    model = quantized_model(ai, quantized)
    save_onnx(model, ctx.outputs["quantized.onnx"])
    measured = measure.bf16_outputs(model, samples)
    records = [layer.record() for layer in quantized]
    write_json_atomic(ctx.outputs["quantize.json"], {
        "weight_bits": q.weight_bits,
        "weights": sum(r["weights"] for r in records),
        "weight_bytes": sum(r["weight_bytes"] for r in records),
        "layers": records,
        "activations": q.precision.activations,
        # weights are quantized without data; the frames are held out unless auto_precision chose by them
        "output": {**frames.record(reference, measured, frames.labelled(
                       names, len(names) if q.auto_precision is not None else None, random),
                                   [o.name for o in ai.graph.output]),
                   **accuracy.describe_inputs(q.accuracy, q.data, len(samples))},
        "auto_precision": auto_record,
        **get_target(q.family).quantize_record(ai, q.target),
    })


def _unchanged(ctx: StageContext, ai: onnx.ModelProto, q: QuantizeParams) -> None:
    """The family runs the model as it is (a float precision): quantized.onnx is ai.onnx, and the record
    says so (weights at their stored precision; the output is the float model's own)."""
    layers = []
    for layer in weighted_layers(ai):
        tensor = next(t for t in ai.graph.initializer if t.name == layer.weight)
        count = int(np.prod(layer.shape))
        bits = 8 * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        layers.append({"name": layer.name, "op": layer.op, "bits": bits, "weights": count,
                       "weight_bytes": count * bits // 8, "sqnr_db": EXACT_SQNR_DB})
    save_onnx(ai, ctx.outputs["quantized.onnx"])
    write_json_atomic(ctx.outputs["quantize.json"], {
        "weight_bits": None,
        "weights": sum(r["weights"] for r in layers),
        "weight_bytes": sum(r["weight_bytes"] for r in layers),
        "layers": layers,
        "activations": "float",
        "unchanged": True,
        "output": {"cosine": 1.0, "sqnr_db": EXACT_SQNR_DB, "max_abs_err": 0.0,
                   "why": "quantized.onnx is ai.onnx: this target runs the float model as it is"},
        "auto_precision": None,
        **get_target(q.family).quantize_record(ai, q.target),
    })
    log.info("%s: float precision: quantized.onnx is ai.onnx unchanged", q.model)


def _check_precision(ctx: StageContext, q: QuantizeParams) -> None:
    """Every precision asked for is one the family's hardware stores."""
    allowed = q.precision.weight_bits
    if q.weight_bits not in allowed:
        raise ConfigError(ctx.locate("quantize", "weight_bits"),
                          f"{q.weight_bits}-bit weights are not stored by this target (it stores "
                          f"{', '.join(map(str, allowed))} bits)")
    for name, bits in q.bits.items():
        if isinstance(bits, dict):
            _check_split_bits(ctx, q, name, bits)
        elif bits not in allowed:
            raise ConfigError(ctx.locate("quantize", "bits", name),
                              f"{bits}-bit weights are not stored by this target (it stores "
                              f"{', '.join(map(str, allowed))} bits)")
    if q.activations is not None and q.activations.bits not in q.precision.activation_bits:
        raise ConfigError(ctx.locate("quantize", "activation_bits"),
                          f"{q.activations.bits}-bit activations are not computed by this target (it computes "
                          f"{', '.join(map(str, q.precision.activation_bits))} bits)")


def _check_split_bits(ctx: StageContext, q: QuantizeParams, name: str, bits: dict[str, int]) -> None:
    """``{weights, activations}`` for one layer: a family that sets them apart, at precisions it computes."""
    if not q.precision.split_layer_bits:
        raise ConfigError(ctx.locate("quantize", "bits", name),
                          "this target takes one precision per layer, not separate weights/activations bits; give one number "
                          f"(the layer's {'weights and output activation' if q.precision.integer else 'weights'})")
    for part, allowed in (("weights", q.precision.weight_bits), ("activations", q.precision.activation_bits)):
        if part in bits and bits[part] not in allowed:
            raise ConfigError(ctx.locate("quantize", "bits", name, part),
                              f"{bits[part]}-bit {part} are not supported by this platform (it takes "
                              f"{', '.join(map(str, allowed))} bits per layer)")


def check_overrides(ctx: StageContext, ai: onnx.ModelProto) -> dict[str, int]:
    """The per-layer bits of ``bits`` / ``bits_file``, each naming a layer of ``ai`` that the family's
    precision rules let it set (else a user error)."""
    if not ctx.params.precision.quantizes:
        return {}
    _check_precision(ctx, ctx.params)
    if ctx.params.precision.integer:
        from accelbuild.stages import quantize_integer

        return _overrides(ctx, quantize_integer.layer_names(ai), "layer")
    return _overrides(ctx, [layer.name for layer in weighted_layers(ai)])


def _overrides(ctx: StageContext, names: list[str], what: str = "weighted layer") -> dict[str, int]:
    """``bits`` / ``bits_file``, each name one of ``names`` (else a positioned user error)."""
    q: QuantizeParams = ctx.params
    if q.bits:
        for name in q.bits:
            if name not in names:
                where = ctx.locate("quantize", "bits", name, key=True)
                raise ConfigError(where, f"no {what} named {name!r} in model {q.model!r}"
                                         f"{did_you_mean(name, names)}")
        return dict(q.bits)
    if q.bits_file is not None:
        shown = q.bits_file
        table = _read_bits_file(ctx.inputs["bits_file"], shown, q.precision)
        for name in table:
            if name not in names:  # at the YAML line that names the file: that is where the fix starts
                raise ConfigError(ctx.locate("quantize", "bits_file"),
                                  f"{shown}: no {what} named {name!r} in model {q.model!r}"
                                  f"{did_you_mean(name, names)}")
        return table
    return {}


def _split_bits_fit(value: dict, precision: PrecisionRules) -> bool:
    """A non-empty ``{weights, activations}`` whose bits the platform takes (a bits file is not schema-checked)."""
    choices = {"weights": precision.weight_bits, "activations": precision.activation_bits}
    return bool(value) and set(value) <= set(choices) and all(
        not isinstance(bits, bool) and bits in choices[part] for part, bits in value.items())


def _read_bits_file(path: Path, shown: str, precision: PrecisionRules) -> dict[str, int | dict[str, int]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(shown, f"not a readable JSON file: {exc}") from None
    if not isinstance(data, dict):
        raise InputFileError(shown, "expected a JSON object {layer_name: bits}")
    allowed = precision.weight_bits
    for name, value in data.items():
        if isinstance(value, dict) and precision.split_layer_bits:
            if not _split_bits_fit(value, precision):
                raise InputFileError(shown, f"layer {name!r}: expected {{\"weights\": 8|16, \"activations\": "
                                            f"8|16}} with bits this platform takes, not {json.dumps(value)}")
            continue
        if value not in allowed or isinstance(value, bool):
            raise InputFileError(shown, f"layer {name!r}: bits must be {', '.join(map(str, allowed[:-1]))} or "
                                        f"{allowed[-1]}, not {value!r}")
    return data
