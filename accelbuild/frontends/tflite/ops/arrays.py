"""Array operators: TILE, BROADCAST_TO, REVERSE_V2, REVERSE_SEQUENCE, UNPACK, RANK, RANGE, MATRIX_DIAG, MATRIX_SET_DIAG,
CUMSUM, REDUCE_ANY / REDUCE_ALL, BROADCAST_ARGS, L2_NORMALIZATION, DILATE and STABLEHLO_PAD.

Shape-like inputs (multiples, axes) are constants and the file's static shapes give every ONNX shape
constant, as in :mod:`.shape`. Boolean reductions run as integer ReduceMax / ReduceMin.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import (
    OK,
    SAME_SHAPE,
    Check,
    Result,
    const_inputs,
    fail,
    input_count,
    register,
)
from accelbuild.frontends.tflite.ops.shape import INT64_MIN, _axis, _ints, _mean_axes, _mean_shape, _output_shape_is
from accelbuild.frontends.tflite.reader import Operator
from accelbuild.frontends.tflite.tensors import onnx_type

_NUMPY = {TensorProto.FLOAT: np.float32, TensorProto.INT32: np.int32, TensorProto.INT64: np.int64,
          TensorProto.BOOL: np.bool_}


def _tile_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape, reps = g.shape(op.inputs[0]), _ints(g, op.inputs[1])
    if len(reps) != len(shape) or min(reps, default=1) < 0:
        return f"multiples {reps} for rank {len(shape)}"
    return tuple(d * r for d, r in zip(shape, reps))


@register("TILE", "Tile", input_count(2), const_inputs(1, what="multiples"),
          _output_shape_is(_tile_shape, "one non-negative multiple per axis; output shape matches"))
def tile(g: Graph, op: Operator) -> None:
    g.emit(op, "Tile", [g.value(op.inputs[0]), g.ints(f"{g.name(op)}/repeats", _ints(g, op.inputs[1]))])


def _reverse_axes(g: Graph, op: Operator) -> list[int] | None:
    rank = len(g.shape(op.inputs[0]))
    axes = [_axis(a, rank) for a in _ints(g, op.inputs[1])]
    return None if None in axes else sorted(set(axes))


@register("REVERSE_V2", "Slice with step -1 along each axis", input_count(2), const_inputs(1, what="axis"),
          Check("axes in range", lambda g, op: OK if _reverse_axes(g, op) is not None else fail("axis out of range")),
          SAME_SHAPE)
def reverse_v2(g: Graph, op: Operator) -> None:
    axes, name = _reverse_axes(g, op), g.name(op)
    if not axes:
        g.emit(op, "Identity", [g.value(op.inputs[0])])
        return
    g.emit(op, "Slice", [g.value(op.inputs[0]), g.ints(f"{name}/starts", [-1] * len(axes)),
                         g.ints(f"{name}/ends", [INT64_MIN] * len(axes)), g.ints(f"{name}/axes", axes),
                         g.ints(f"{name}/steps", [-1] * len(axes))])


def _sequence_axes(g: Graph, op: Operator) -> Result:
    rank, o = len(g.shape(op.inputs[0])), op.options
    seq, batch = _axis(o.get("seq_dim", 0), rank), _axis(o.get("batch_dim", 0), rank)
    if seq is None or batch is None or seq == batch or {seq, batch} != {0, 1}:
        return fail(f"seq_dim {o.get('seq_dim', 0)} and batch_dim {o.get('batch_dim', 0)}, expected axes 0 and 1")
    return OK if g.shape(op.inputs[1]) == (g.shape(op.inputs[0])[batch],) else fail("seq_lengths per batch entry")


@register("REVERSE_SEQUENCE", "ReverseSequence", input_count(2), SAME_SHAPE,
          Check("batch and sequence axes are 0 and 1 (either order); one length per batch entry", _sequence_axes))
def reverse_sequence(g: Graph, op: Operator) -> None:
    rank = len(g.shape(op.inputs[0]))
    lengths = g.fresh(f"{g.name(op)}/lengths")
    g.node("Cast", [g.value(op.inputs[1])], [lengths], lengths, to=TensorProto.INT64)
    g.emit(op, "ReverseSequence", [g.value(op.inputs[0]), lengths],
           batch_axis=_axis(op.options.get("batch_dim", 0), rank), time_axis=_axis(op.options.get("seq_dim", 0), rank))


def _unpack_outputs(g: Graph, op: Operator) -> Result:
    shape = g.shape(op.inputs[0])
    axis = _axis(op.options.get("axis", 0), len(shape))
    if axis is None or len(op.outputs) != shape[axis]:
        return fail(f"{len(op.outputs)} outputs along axis {op.options.get('axis', 0)} of {list(shape)}")
    want = shape[:axis] + shape[axis + 1:]
    bad = [list(g.shape(i)) for i in op.outputs if g.shape(i) != want]
    return fail(f"outputs {bad} should be {list(want)}") if bad else OK


@register("UNPACK", "Split into ones, each Squeezed", input_count(1),
          Check("one output per slice along the axis, of the input's shape without it", _unpack_outputs))
def unpack(g: Graph, op: Operator) -> None:
    name, shape = g.name(op), g.shape(op.inputs[0])
    axis = _axis(op.options.get("axis", 0), len(shape))
    parts = [g.fresh(f"{name}/part{k}") for k in range(len(op.outputs))]
    g.node("Split", [g.value(op.inputs[0]), g.ints(f"{name}/split", [1] * len(parts))], parts, f"{name}/split",
           axis=axis)
    axes = g.ints(f"{name}/axes", [axis])
    for k, part in enumerate(parts):
        g.node("Squeeze", [part, axes], [g.out(op, k)], g.fresh(f"{g.name(op, k)}/squeeze"))


@register("RANK", "a constant: the input's rank", input_count(1),
          Check("an int32 scalar output", lambda g, op: OK if g.tensor(op.outputs[0]).dtype == "INT32"
                and g.shape(op.outputs[0]) == () else fail("output is not an int32 scalar")))
def rank(g: Graph, op: Operator) -> None:
    g.emit(op, "Identity", [g.add_const(f"{g.name(op)}/rank", np.array(len(g.shape(op.inputs[0])), np.int32))])


def _range_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    values = [g.const(i) for i in op.inputs]
    if any(g.shape(i) not in ((), (1,)) for i in op.inputs):
        return "start, limit and delta are not scalars"
    consts = [v for v in values if v is not None]
    if len(consts) < len(values):
        return g.shape(op.outputs[0]) if len(g.shape(op.outputs[0])) == 1 else "output is not 1-D"
    start, limit, delta = (float(v.reshape(-1)[0]) for v in consts)
    if delta == 0:
        return "delta is 0"
    return (max(0, int(np.ceil((limit - start) / delta))),)


@register("RANGE", "Range", input_count(3), _output_shape_is(_range_shape, "scalar inputs; output length matches"))
def range_(g: Graph, op: Operator) -> None:
    scalars = []
    for k, index in enumerate(op.inputs):
        scalar = g.fresh(f"{g.name(op)}/in{k}")
        g.node("Reshape", [g.value(index), g.ints(f"{scalar}/shape", [])], [scalar], scalar)
        scalars.append(scalar)
    g.emit(op, "Range", scalars)


def _diag_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape = g.shape(op.inputs[0])
    return (*shape, shape[-1]) if shape else "input is a scalar"


def _eye(g: Graph, op: Operator, n: int, m: int) -> str:
    kind = _NUMPY[onnx_type(g.tensor(op.outputs[0]))]
    return g.add_const(f"{g.name(op)}/eye", np.eye(n, m, dtype=kind))


@register("MATRIX_DIAG", "Unsqueeze, then Mul by an identity matrix", input_count(1),
          _output_shape_is(_diag_shape, "output [..., n, n] for an input [..., n]"))
def matrix_diag(g: Graph, op: Operator) -> None:
    n = g.shape(op.inputs[0])[-1]
    column = g.fresh(f"{g.name(op)}/column")
    g.node("Unsqueeze", [g.value(op.inputs[0]), g.ints(f"{column}/axes", [-2])], [column], column)
    g.emit(op, "Mul", [column, _eye(g, op, n, n)])


def _set_diag_shapes(g: Graph, op: Operator) -> Result:
    x, d = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    if len(x) < 2 or d != (*x[:-2], min(x[-2:])):
        return fail(f"diagonal {list(d)} does not fit matrices {list(x)}")
    return OK


@register("MATRIX_SET_DIAG", "Where over an identity mask (the new diagonal broadcast along the rows)",
          input_count(2), SAME_SHAPE, Check("the diagonal is [..., min(rows, columns)]", _set_diag_shapes))
def matrix_set_diag(g: Graph, op: Operator) -> None:
    rows, cols = g.shape(op.inputs[0])[-2:]
    name = g.name(op)
    mask = g.add_const(f"{name}/mask", np.eye(rows, cols, dtype=bool))
    diagonal, padded = g.fresh(f"{name}/diagonal"), g.fresh(f"{name}/padded")
    source = g.value(op.inputs[1])
    if cols > rows:  # pad the diagonal to one entry per column (the mask hides the extra ones)
        g.node("Pad", [source, g.ints(f"{name}/pads", [0] * (len(g.shape(op.inputs[1])) * 2 - 1) + [cols - rows])],
               [padded], padded)
        source = padded
    g.node("Unsqueeze", [source, g.ints(f"{diagonal}/axes", [-2])], [diagonal], diagonal)
    g.emit(op, "Where", [mask, diagonal, g.value(op.inputs[0])])


def _cumsum_axis(g: Graph, op: Operator) -> Result:
    values = g.const_value(op.inputs[1])
    ok = values.size == 1 and _axis(int(values.reshape(-1)[0]), len(g.shape(op.inputs[0]))) is not None
    return OK if ok else fail(f"axis {values.tolist()} is not one axis of the input")


@register("CUMSUM", "CumSum (exclusive, reverse)", input_count(2), const_inputs(1, what="axis"), SAME_SHAPE,
          Check("one axis in range", _cumsum_axis))
def cumsum(g: Graph, op: Operator) -> None:
    axis = _axis(_ints(g, op.inputs[1])[0], len(g.shape(op.inputs[0])))
    g.emit(op, "CumSum", [g.value(op.inputs[0]), g.add_const(f"{g.name(op)}/axis", np.array(axis, np.int64))],
           exclusive=int(bool(op.options.get("exclusive"))), reverse=int(bool(op.options.get("reverse"))))


def _bool_reduction(name: str, onnx_op: str) -> None:
    def convert(g: Graph, op: Operator) -> None:
        base = g.name(op)
        as_int, reduced = g.fresh(f"{base}/int"), g.fresh(f"{base}/reduced")
        g.node("Cast", [g.value(op.inputs[0])], [as_int], as_int, to=TensorProto.INT32)
        g.node(onnx_op, [as_int, g.ints(f"{base}/axes", _mean_axes(g, op))], [reduced], reduced,
               keepdims=int(bool(op.options.get("keep_dims"))))
        g.emit(op, "Cast", [reduced], to=TensorProto.BOOL)
    convert.__doc__ = f"{name} -> {onnx_op} of the bools as int32."
    register(name, f"{onnx_op} of the bools as int32", input_count(2), const_inputs(1, what="axis"),
             Check("a BOOL input", lambda g, op: OK if g.tensor(op.inputs[0]).dtype == "BOOL" else fail("input is not BOOL")),
             _output_shape_is(_mean_shape, "axes are valid; output shape matches keep_dims"))(convert)


_bool_reduction("REDUCE_ANY", "ReduceMax")
_bool_reduction("REDUCE_ALL", "ReduceMin")


def _broadcast_args(g: Graph, op: Operator) -> tuple[int, ...] | str:
    lengths = [g.shape(i) for i in op.inputs]
    if any(len(s) != 1 for s in lengths):
        return "shapes are not 1-D"
    return (max(s[0] for s in lengths),)


@register("BROADCAST_ARGS", "Max of the two shapes, the shorter left-padded with 1s (valid broadcasts only)",
          input_count(2), _output_shape_is(_broadcast_args, "1-D shapes; output as long as the longer"))
def broadcast_args(g: Graph, op: Operator) -> None:
    length = g.shape(op.outputs[0])[0]
    kind = _NUMPY[onnx_type(g.tensor(op.outputs[0]))]
    padded = []
    for k, index in enumerate(op.inputs):
        missing = length - g.shape(index)[0]
        if not missing:
            padded.append(g.value(index))
            continue
        out = g.fresh(f"{g.name(op)}/padded{k}")
        g.node("Concat", [g.add_const(f"{out}/ones", np.ones(missing, kind)), g.value(index)], [out], out, axis=0)
        padded.append(out)
    g.emit(op, "Max", padded)


@register("L2_NORMALIZATION", "x / sqrt(max(ReduceSumSquare over the last axis, 1e-6))", input_count(1), SAME_SHAPE,
          Check("float input of rank >= 1", lambda g, op: OK if g.shape(op.inputs[0]) and
                onnx_type(g.tensor(op.inputs[0])) == TensorProto.FLOAT else fail("not a float tensor of rank >= 1")))
def l2_normalization(g: Graph, op: Operator) -> None:
    """TFLite's kernel: ``x / sqrt(max(sum(x^2), epsilon))`` with epsilon 1e-6."""
    base, x = g.name(op), g.value(op.inputs[0])
    squares, floor, norm = (g.fresh(f"{base}/{role}") for role in ("squares", "floored", "norm"))
    g.node("ReduceSumSquare", [x, g.ints(f"{base}/axes", [-1])], [squares], squares, keepdims=1)
    g.node("Max", [squares, g.scalar(1e-6)], [floor], floor)
    g.node("Sqrt", [floor], [norm], norm)
    g.emit(op, "Div", [x, norm])


def _dilate_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape, factors = g.shape(op.inputs[0]), _ints(g, op.inputs[1])
    if len(factors) != len(shape) or min(factors, default=1) < 1 or g.shape(op.inputs[2]) not in ((), (1,)):
        return f"dilations {factors} for rank {len(shape)}, or a padding value that is not a scalar"
    return tuple((d - 1) * f + 1 if d else 0 for d, f in zip(shape, factors))


@register("DILATE", "per dilated axis: Unsqueeze, Pad with the padding value, Reshape, Slice off the tail",
          input_count(3), const_inputs(1, what="dilations"),
          _output_shape_is(_dilate_shape, "one dilation >= 1 per axis; a scalar padding value; output shape matches"))
def dilate(g: Graph, op: Operator) -> None:
    value, _ = _spread(g, op, _ints(g, op.inputs[1]), list(g.shape(op.inputs[0])), value_input=2)
    g.emit(op, "Identity", [value])


def _spread(g: Graph, op: Operator, factors: list[int], shape: list[int],
            value_input: int = 1) -> tuple[str, str]:
    """Input 0 with ``factor - 1`` padding values between neighbours along each axis (``shape`` is updated),
    and the scalar padding value."""
    name = g.name(op)
    fill = g.fresh(f"{name}/fill")
    g.node("Reshape", [g.value(op.inputs[value_input]), g.ints(f"{fill}/shape", [])], [fill], fill)
    value, rank = g.value(op.inputs[0]), len(shape)
    for axis in (a for a, f in enumerate(factors) if f > 1 and shape[a] > 0):
        n, f = shape[axis], factors[axis]
        column, padded, merged, cut = (g.fresh(f"{name}/ax{axis}_{role}") for role in
                                       ("column", "padded", "merged", "spread"))
        g.node("Unsqueeze", [value, g.ints(f"{column}/axes", [axis + 1])], [column], column)
        pads = [0] * (2 * (rank + 1))
        pads[rank + 1 + axis + 1] = f - 1
        g.node("Pad", [column, g.ints(f"{padded}/pads", pads), fill], [padded], padded)
        shape[axis] = n * f
        g.node("Reshape", [padded, g.ints(f"{merged}/shape", shape)], [merged], merged)
        shape[axis] = (n - 1) * f + 1
        g.node("Slice", [merged, g.ints(f"{cut}/starts", [0]), g.ints(f"{cut}/ends", [shape[axis]]),
                         g.ints(f"{cut}/axes", [axis])], [cut], cut)
        value = cut
    return value, fill


def _stablehlo_pad_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape, o = g.shape(op.inputs[0]), op.options
    low, high = list(o.get("edge_padding_low", ())), list(o.get("edge_padding_high", ()))
    interior = list(o.get("interior_padding", ()))
    if not len(low) == len(high) == len(interior) == len(shape) or min(interior, default=0) < 0:
        return f"paddings {low} / {high} / {interior} for rank {len(shape)}"
    if g.shape(op.inputs[1]) not in ((), (1,)):
        return "padding value is not a scalar"
    sizes = [d + (d - 1) * i * (d > 0) + lo + hi for d, lo, hi, i in zip(shape, low, high, interior)]
    return tuple(sizes) if min(sizes, default=1) >= 0 else f"paddings leave negative sizes {sizes}"


@register("STABLEHLO_PAD", "interior padding as DILATE does, then Pad (positive edges) and Slice (negative)",
          input_count(2), _output_shape_is(_stablehlo_pad_shape, "one low, high and non-negative interior padding "
                                                                  "per axis; a scalar padding value"))
def stablehlo_pad(g: Graph, op: Operator) -> None:
    o, name, shape = op.options, g.name(op), list(g.shape(op.inputs[0]))
    low, high = [int(v) for v in o["edge_padding_low"]], [int(v) for v in o["edge_padding_high"]]
    value, fill = _spread(g, op, [int(v) + 1 for v in o["interior_padding"]], shape)
    pads = [max(v, 0) for v in low] + [max(v, 0) for v in high]
    padded = g.fresh(f"{name}/edges")
    g.node("Pad", [value, g.ints(f"{name}/pads", pads), fill], [padded], padded)
    sizes = [d + max(lo, 0) + max(hi, 0) for d, lo, hi in zip(shape, low, high)]
    starts = [max(-lo, 0) for lo in low]
    ends = [s - max(-hi, 0) for s, hi in zip(sizes, high)]
    g.emit(op, "Slice", [padded, g.ints(f"{name}/starts", starts), g.ints(f"{name}/ends", ends),
                         g.ints(f"{name}/axes", range(len(shape)))])


def _broadcast_to_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape = g.const(op.inputs[1])
    want = g.shape(op.outputs[0]) if shape is None else tuple(int(d) for d in shape.reshape(-1))
    try:
        return tuple(np.broadcast_shapes(g.shape(op.inputs[0]), want))
    except ValueError:
        return f"input {list(g.shape(op.inputs[0]))} does not broadcast to {list(want)}"


@register("BROADCAST_TO", "Expand to the output's static shape", input_count(2),
          _output_shape_is(_broadcast_to_shape, "the input broadcasts to the (constant) shape; output shape matches"))
def broadcast_to(g: Graph, op: Operator) -> None:
    g.emit(op, "Expand", [g.value(op.inputs[0]), g.ints(f"{g.name(op)}/shape", g.shape(op.outputs[0]))])
