"""Data-movement ops: concatenation, packing, reshapes, padding, slicing, splitting, transposes, gathers,
reductions (MEAN, SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD) and SHAPE.

They act on the channel-last TFLite tensors directly, so axes, paddings and permutations are used as
TFLite gives them (negative axes normalised). Shape-like inputs must be constant; the static shapes
in the file then give every ONNX shape constant.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from onnx import TensorProto, numpy_helper

from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import (
    OK,
    Check,
    Result,
    activation,
    const_inputs,
    fail,
    input_count,
    register,
)
from accelbuild.frontends.tflite.reader import Operator
from accelbuild.frontends.tflite.tensors import numel, onnx_type

INT64_MIN = -(2 ** 63)


def _ints(g: Graph, index: int) -> list[int]:
    return [int(v) for v in g.const_value(index).reshape(-1)]


def _output_shape_is(expected: Callable[[Graph, Operator], tuple[int, ...] | str], doc: str) -> Check:
    """The output tensor's shape equals what the op computes from its inputs and options."""
    def predicate(g: Graph, op: Operator) -> Result:
        want = expected(g, op)
        if isinstance(want, str):
            return fail(want)
        have = g.shape(op.outputs[0])
        return OK if tuple(want) == have else fail(f"output shape {list(have)} should be {list(want)}")
    return Check(doc, predicate)


def _axis(axis: int, rank: int) -> int | None:
    return axis + rank if -rank <= axis < 0 else (axis if 0 <= axis < rank else None)


# --------------------------------------------------------------------------- CONCATENATION


def _concat_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shapes = [g.shape(i) for i in op.inputs]
    axis = _axis(op.options.get("axis", 0), len(shapes[0]))
    if axis is None or any(len(s) != len(shapes[0]) for s in shapes):
        return "inputs of different ranks or an axis out of range"
    if any(s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:] for s in shapes):
        return "inputs differ outside the concatenation axis"
    return shapes[0][:axis] + (sum(s[axis] for s in shapes),) + shapes[0][axis + 1:]


@register("CONCATENATION", "Concat + fused activation", input_count(1, 1 << 16),
          _output_shape_is(_concat_shape, "inputs agree outside the axis; output shape matches"))
def concatenation(g: Graph, op: Operator) -> None:
    axis = _axis(op.options.get("axis", 0), len(g.shape(op.outputs[0])))
    g.emit(op, "Concat", [g.value(i) for i in op.inputs], act=activation(op), axis=axis)


# --------------------------------------------------------------------------- RESHAPE, SQUEEZE


def _same_size(g: Graph, op: Operator) -> Result:
    have, want = numel(g.shape(op.inputs[0])), numel(g.shape(op.outputs[0]))
    return OK if have == want else fail(f"input has {have} elements, output {want}")


SAME_SIZE = Check("input and output have the same number of elements", _same_size)


@register("RESHAPE", "Reshape to the output tensor's static shape", input_count(1, 2), SAME_SIZE)
def reshape(g: Graph, op: Operator) -> None:
    """The shape comes from the output tensor (static in the file), not from the shape input."""
    g.emit(op, "Reshape", [g.value(op.inputs[0]), g.ints(f"{g.name(op)}/shape", g.shape(op.outputs[0]))])


def _squeeze_axes(g: Graph, op: Operator) -> list[int]:
    shape = g.shape(op.inputs[0])
    dims = op.options.get("squeeze_dims", ())
    if not dims:
        return [i for i, d in enumerate(shape) if d == 1]
    return sorted({_axis(d, len(shape)) for d in dims if _axis(d, len(shape)) is not None})


def _squeeze_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape, axes = g.shape(op.inputs[0]), _squeeze_axes(g, op)
    if any(shape[a] != 1 for a in axes) or len(axes) < len(set(op.options.get("squeeze_dims", ()))):
        return f"squeeze_dims {list(op.options.get('squeeze_dims', ()))} do not name size-1 dimensions"
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@register("SQUEEZE", "Squeeze", input_count(1),
          _output_shape_is(_squeeze_shape, "squeeze_dims name size-1 dimensions; output shape matches"))
def squeeze(g: Graph, op: Operator) -> None:
    axes = _squeeze_axes(g, op)
    if not axes:
        g.emit(op, "Identity", [g.value(op.inputs[0])])
        return
    g.emit(op, "Squeeze", [g.value(op.inputs[0]), g.ints(f"{g.name(op)}/axes", axes)])


# --------------------------------------------------------------------------- PAD, PADV2


def _pad_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape, pads = g.shape(op.inputs[0]), g.const_value(op.inputs[1])
    if pads.shape != (len(shape), 2) or np.any(pads < 0):
        return f"paddings {pads.tolist()} are not non-negative [rank, 2]"
    return tuple(int(d + b + e) for d, (b, e) in zip(shape, pads))


def _pad(g: Graph, op: Operator, value: float | int) -> None:
    pads = g.const_value(op.inputs[1])
    float_out = g.tensor(op.outputs[0]).dtype not in ("INT32", "INT64")
    dtype = np.float32 if float_out else {"INT32": np.int32, "INT64": np.int64}[g.tensor(op.outputs[0]).dtype]
    g.emit(op, "Pad", [g.value(op.inputs[0]), g.ints(f"{g.name(op)}/pads", [*pads[:, 0], *pads[:, 1]]),
                       g.scalar(dtype(value).item(), dtype)], mode="constant")


_PAD_SHAPE = _output_shape_is(_pad_shape, "paddings are non-negative [rank, 2]; output shape matches")


@register("PAD", "Pad (constant 0; the zero point of a quantized tensor is real 0)",
          input_count(2), const_inputs(1, what="paddings"), _PAD_SHAPE)
def pad(g: Graph, op: Operator) -> None:
    _pad(g, op, 0)


@register("PADV2", "Pad (constant from the third input)", input_count(3),
          const_inputs(1, 2, what="paddings and constant value"), _PAD_SHAPE)
def padv2(g: Graph, op: Operator) -> None:
    _pad(g, op, g.const_value(op.inputs[2]).reshape(-1)[0].item())


# --------------------------------------------------------------------------- MEAN, TRANSPOSE


def _mean_axes(g: Graph, op: Operator) -> list[int] | None:
    rank = len(g.shape(op.inputs[0]))
    axes = [_axis(a, rank) for a in _ints(g, op.inputs[1])]
    return None if not axes or None in axes else sorted(set(axes))


def _mean_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    axes, shape = _mean_axes(g, op), g.shape(op.inputs[0])
    if axes is None:
        return "axis input is empty or out of range"
    keep = op.options.get("keep_dims", False)
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)


def _reduction(name: str, onnx_op: str) -> None:
    def convert(g: Graph, op: Operator) -> None:
        axes = g.ints(f"{g.name(op)}/axes", _mean_axes(g, op))
        g.emit(op, onnx_op, [g.value(op.inputs[0]), axes], keepdims=int(bool(op.options.get("keep_dims"))))
    convert.__doc__ = f"{name} -> {onnx_op} over the constant axes."
    register(name, onnx_op, input_count(2), const_inputs(1, what="axis"),
             _output_shape_is(_mean_shape, "axes are valid; output shape matches keep_dims"))(convert)


_reduction("MEAN", "ReduceMean")
_reduction("SUM", "ReduceSum")
_reduction("REDUCE_MAX", "ReduceMax")
_reduction("REDUCE_MIN", "ReduceMin")
_reduction("REDUCE_PROD", "ReduceProd")


def _transpose_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape, perm = g.shape(op.inputs[0]), _ints(g, op.inputs[1])
    if sorted(perm) != list(range(len(shape))):
        return f"perm {perm} is not a permutation of {len(shape)} axes"
    return tuple(shape[p] for p in perm)


@register("TRANSPOSE", "Transpose", input_count(2), const_inputs(1, what="perm"),
          _output_shape_is(_transpose_shape, "perm is a permutation; output shape matches"))
def transpose(g: Graph, op: Operator) -> None:
    g.emit(op, "Transpose", [g.value(op.inputs[0])], perm=_ints(g, op.inputs[1]))


# --------------------------------------------------------------------------- GATHER


def _gather_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    params, indices = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    if onnx_type(g.tensor(op.inputs[1])) not in (TensorProto.INT32, TensorProto.INT64):
        return f"indices are {g.tensor(op.inputs[1]).dtype}, not int32 or int64"
    axis = _axis(op.options.get("axis", 0), len(params))
    if axis is None or op.options.get("batch_dims", 0) != 0:
        return "axis out of range or batch_dims != 0"
    values = g.const(op.inputs[1])
    if values is not None and values.size and (values.min() < 0 or values.max() >= params[axis]):
        return f"constant indices outside [0, {params[axis]})"
    return params[:axis] + indices + params[axis + 1:]


@register("GATHER", "Gather", input_count(2),
          _output_shape_is(_gather_shape, "int32/int64 indices; batch_dims = 0; constant indices in range; "
                                          "output shape matches"))
def gather(g: Graph, op: Operator) -> None:
    axis = _axis(op.options.get("axis", 0), len(g.shape(op.inputs[0])))
    g.emit(op, "Gather", [g.value(op.inputs[0]), g.value(op.inputs[1])], axis=axis)


# --------------------------------------------------------------------------- EXPAND_DIMS, PACK, SHAPE


def _expand_axis(g: Graph, op: Operator) -> int | None:
    values = g.const(op.inputs[1])
    if values is None or values.size != 1:
        return None
    return _axis(int(values.reshape(-1)[0]), len(g.shape(op.inputs[0])) + 1)


def _expand_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    axis, shape = _expand_axis(g, op), g.shape(op.inputs[0])
    if axis is None:
        return "axis is not one integer in [-rank-1, rank]"
    return shape[:axis] + (1,) + shape[axis:]


@register("EXPAND_DIMS", "Unsqueeze", input_count(2), const_inputs(1, what="axis"),
          _output_shape_is(_expand_shape, "axis is one integer in [-rank-1, rank]; output shape matches"))
def expand_dims(g: Graph, op: Operator) -> None:
    g.emit(op, "Unsqueeze", [g.value(op.inputs[0]), g.ints(f"{g.name(op)}/axes", [_expand_axis(g, op)])])


def _pack_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shapes = {g.shape(i) for i in op.inputs}
    if len(shapes) != 1:
        return f"inputs of different shapes {sorted(list(s) for s in shapes)}"
    shape = shapes.pop()
    axis = _axis(op.options.get("axis", 0), len(shape) + 1)
    if axis is None:
        return f"axis {op.options.get('axis', 0)} out of range"
    return shape[:axis] + (len(op.inputs),) + shape[axis:]


@register("PACK", "Unsqueeze each input, then Concat", input_count(1, 1 << 16),
          _output_shape_is(_pack_shape, "inputs have one shape; axis in range; output shape matches"))
def pack(g: Graph, op: Operator) -> None:
    axis = _axis(op.options.get("axis", 0), len(g.shape(op.inputs[0])) + 1)
    axes = g.ints(f"{g.name(op)}/axes", [axis])
    parts = []
    for k, index in enumerate(op.inputs):
        part = g.fresh(f"{g.name(op)}/in{k}")
        g.node("Unsqueeze", [g.value(index), axes], [part], part)
        parts.append(part)
    g.emit(op, "Concat", parts, axis=axis)


_SHAPE_TYPES = {"INT32": np.int32, "INT64": np.int64}


@register("SHAPE", "a constant: the input's static shape", input_count(1),
          Check("output is int32 or int64", lambda g, op: OK if g.tensor(op.outputs[0]).dtype in _SHAPE_TYPES
                else fail(f"output type {g.tensor(op.outputs[0]).dtype}")))
def shape(g: Graph, op: Operator) -> None:
    """Shapes are static after import, so the shape is a constant (later passes fold what reads it)."""
    value = np.asarray(g.shape(op.inputs[0]), _SHAPE_TYPES[g.tensor(op.outputs[0]).dtype])
    g.emit(op, "Constant", [], value=numpy_helper.from_array(value, g.fresh(f"{g.name(op)}/value")))


# --------------------------------------------------------------------------- MIRROR_PAD

REFLECT, SYMMETRIC = 0, 1


def _mirror_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape, pads = g.shape(op.inputs[0]), g.const_value(op.inputs[1])
    if pads.shape != (len(shape), 2) or np.any(pads < 0):
        return f"paddings {pads.tolist()} are not non-negative [rank, 2]"
    mode = op.options.get("mode", REFLECT)
    if mode not in (REFLECT, SYMMETRIC):
        return f"unknown mode {mode}"
    limit = (lambda d: d - 1) if mode == REFLECT else (lambda d: d)
    if any(b > limit(d) or e > limit(d) for d, (b, e) in zip(shape, pads)):
        return f"paddings {pads.tolist()} exceed what {'REFLECT' if mode == REFLECT else 'SYMMETRIC'} allows"
    return tuple(int(d + b + e) for d, (b, e) in zip(shape, pads))


@register("MIRROR_PAD", "Pad mode=reflect (REFLECT); Slice + Concat per axis (SYMMETRIC)", input_count(2),
          const_inputs(1, what="paddings"),
          _output_shape_is(_mirror_shape, "paddings within the mirrored size; output shape matches"))
def mirror_pad(g: Graph, op: Operator) -> None:
    pads = g.const_value(op.inputs[1]).astype(np.int64)
    if op.options.get("mode", REFLECT) == REFLECT:
        g.emit(op, "Pad", [g.value(op.inputs[0]), g.ints(f"{g.name(op)}/pads", [*pads[:, 0], *pads[:, 1]])],
               mode="reflect")
        return
    # SYMMETRIC repeats the edge: x[b-1::-1] ++ x ++ x[:n-e-1:-1] along each padded axis
    value, shape, base = g.value(op.inputs[0]), g.shape(op.inputs[0]), g.name(op)
    padded = [(axis, int(b), int(e)) for axis, (b, e) in enumerate(pads) if b or e]
    if not padded:
        g.emit(op, "Identity", [value])
        return
    for k, (axis, before, after) in enumerate(padded):
        n = shape[axis]
        parts = []
        if before:
            parts.append(_reversed_slice(g, f"{base}/ax{axis}_before", value, axis, before - 1, INT64_MIN))
        parts.append(value)
        if after:
            parts.append(_reversed_slice(g, f"{base}/ax{axis}_after", value, axis, n - 1,
                                         n - after - 1 if after < n else INT64_MIN))
        if k == len(padded) - 1:
            g.emit(op, "Concat", parts, axis=axis)
        else:
            value = g.fresh(f"{base}/ax{axis}")
            g.node("Concat", parts, [value], value, axis=axis)


def _reversed_slice(g: Graph, name: str, value: str, axis: int, start: int, end: int) -> str:
    out = g.fresh(name)
    g.node("Slice", [value, g.ints(f"{out}/starts", [start]), g.ints(f"{out}/ends", [end]),
                     g.ints(f"{out}/axes", [axis]), g.ints(f"{out}/steps", [-1])], [out], out)
    return out
