"""Data-movement ops: concatenation, reshapes, padding, slicing, splitting, transposes, gathers, MEAN.

They act on the channel-last TFLite tensors directly, so axes, paddings and permutations are used as
TFLite gives them (negative axes normalised). Shape-like inputs must be constant; the static shapes
in the file then give every ONNX shape constant.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from onnx import TensorProto

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
    return [int(v) for v in g.const(index).reshape(-1)]


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
    shape, pads = g.shape(op.inputs[0]), g.const(op.inputs[1])
    if pads.shape != (len(shape), 2) or np.any(pads < 0):
        return f"paddings {pads.tolist()} are not non-negative [rank, 2]"
    return tuple(int(d + b + e) for d, (b, e) in zip(shape, pads))


def _pad(g: Graph, op: Operator, value: float | int) -> None:
    pads = g.const(op.inputs[1])
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
    _pad(g, op, g.const(op.inputs[2]).reshape(-1)[0].item())


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


@register("MEAN", "ReduceMean", input_count(2), const_inputs(1, what="axis"),
          _output_shape_is(_mean_shape, "axes are valid; output shape matches keep_dims"))
def mean(g: Graph, op: Operator) -> None:
    axes = g.ints(f"{g.name(op)}/axes", _mean_axes(g, op))
    g.emit(op, "ReduceMean", [g.value(op.inputs[0]), axes], keepdims=int(bool(op.options.get("keep_dims"))))


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
