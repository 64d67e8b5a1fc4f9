"""Operators that map values onto levels: BUCKETIZE (the bucket of each value) and FAKE_QUANT (each value
rounded to the nearest of TensorFlow's nudged quantization levels, in float)."""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import OK, SAME_SHAPE, Check, Result, fail, input_count, register
from accelbuild.frontends.tflite.reader import Operator
from accelbuild.frontends.tflite.tensors import onnx_type


def _float_in(g: Graph, op: Operator) -> Result:
    return OK if onnx_type(g.tensor(op.inputs[0])) == TensorProto.FLOAT else fail("input is not float")


def _sorted_boundaries(g: Graph, op: Operator) -> Result:
    bounds = list(op.options.get("boundaries", ()))
    if bounds != sorted(bounds) or g.tensor(op.outputs[0]).dtype != "INT32":
        return fail(f"boundaries {bounds} are not sorted, or the output is not int32")
    return _float_in(g, op)


@register("BUCKETIZE", "count of boundaries <= x: GreaterOrEqual against them, Cast, ReduceSum", input_count(1),
          SAME_SHAPE, Check("float input; sorted boundaries; int32 output", _sorted_boundaries))
def bucketize(g: Graph, op: Operator) -> None:
    base = g.name(op)
    bounds = np.asarray(list(op.options.get("boundaries", ())), np.float32)
    column, above, counts = (g.fresh(f"{base}/{role}") for role in ("column", "above", "counts"))
    g.node("Unsqueeze", [g.value(op.inputs[0]), g.ints(f"{base}/axes", [-1])], [column], column)
    g.node("GreaterOrEqual", [column, g.add_const(f"{base}/boundaries", bounds)], [above], above)
    g.node("Cast", [above], [counts], counts, to=TensorProto.INT32)
    g.emit(op, "ReduceSum", [counts, g.ints(f"{base}/sum_axes", [-1])], keepdims=0)


def nudged(low: float, high: float, bits: int, narrow: bool) -> tuple[float, float, float]:
    """TensorFlow's ``Nudge``: (nudged min, nudged max, scale) so that 0.0 is a level."""
    quant_min, quant_max = (1 if narrow else 0), (1 << bits) - 1
    scale = (high - low) / (quant_max - quant_min)
    zero = quant_min - low / scale
    nudged_zero = quant_min if zero < quant_min else quant_max if zero > quant_max else math.floor(zero + 0.5)
    return (quant_min - nudged_zero) * scale, (quant_max - nudged_zero) * scale, scale


def _fake_quant_options(g: Graph, op: Operator) -> Result:
    o = op.options
    if o.get("narrow_range"):
        return fail("narrow_range, which LiteRT does not run on activations either")
    if not 2 <= o.get("num_bits", 8) <= 16 or not o.get("min", 0.0) < o.get("max", 0.0):
        return fail(f"num_bits {o.get('num_bits')} with range [{o.get('min')}, {o.get('max')}]")
    return _float_in(g, op)


@register("FAKE_QUANT", "Clip to the nudged range, then Floor(x / scale + 0.5) * scale (float levels)",
          input_count(1), SAME_SHAPE, Check("float input; 2 to 16 bits; min < max; no narrow_range", _fake_quant_options))
def fake_quant(g: Graph, op: Operator) -> None:
    o, base = op.options, g.name(op)
    low, high, scale = nudged(float(o["min"]), float(o["max"]), int(o.get("num_bits", 8)), narrow=False)
    steps = [g.fresh(f"{base}/{role}") for role in ("clipped", "shifted", "scaled", "half", "levels", "level")]
    g.node("Clip", [g.value(op.inputs[0]), g.scalar(np.float32(low).item()), g.scalar(np.float32(high).item())],
           [steps[0]], steps[0])
    g.node("Sub", [steps[0], g.scalar(np.float32(low).item())], [steps[1]], steps[1])
    g.node("Mul", [steps[1], g.scalar(np.float32(1.0 / scale).item())], [steps[2]], steps[2])
    g.node("Add", [steps[2], g.scalar(0.5)], [steps[3]], steps[3])
    g.node("Floor", [steps[3]], [steps[4]], steps[4])
    g.node("Mul", [steps[4], g.scalar(np.float32(scale).item())], [steps[5]], steps[5])
    g.emit(op, "Add", [steps[5], g.scalar(np.float32(low).item())])
