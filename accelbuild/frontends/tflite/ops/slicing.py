"""STRIDED_SLICE, SLICE, SPLIT and SPLIT_V as ONNX Slice and Split (SLICE's begin and size may be computed).

STRIDED_SLICE follows TFLite's ``strided_slice_logic.h`` (masks, negative indices, clamping, shrink
axes) on the static input shape, and emits a Slice with fully resolved starts/ends/steps followed by a
Reshape when shrink_axis_mask removes dimensions.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import OK, Check, Result, const_inputs, fail, input_count, register
from accelbuild.frontends.tflite.ops.shape import INT64_MIN, _axis, _ints, _output_shape_is
from accelbuild.frontends.tflite.reader import Operator

_LOW, _HIGH = -(2 ** 31), 2 ** 31 - 1
INT64_MAX = 2 ** 63 - 1


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


def _axis_range(size: int, begin: int, end: int, stride: int, bit: int, o: dict) -> range:
    """TFLite's StartForAxis / StopForAxis for one axis."""
    if o.get("offset"):
        end += begin
    start = (_LOW if stride > 0 else _HIGH) if o.get("begin_mask", 0) & bit else begin
    start = start + size if start < 0 else start
    start = _clamp(start, 0, size) if stride > 0 else _clamp(start, -1, size - 1)
    if o.get("shrink_axis_mask", 0) & bit:
        return range(start, start + 1)
    stop = (_HIGH if stride > 0 else _LOW) if o.get("end_mask", 0) & bit else end
    stop = stop + size if stop < 0 else stop
    stop = _clamp(stop, 0, size) if stride > 0 else _clamp(stop, -1, size - 1)
    return range(start, stop, stride)


def _strided_ranges(g: Graph, op: Operator) -> list[range] | str:
    shape = g.shape(op.inputs[0])
    begin, end, strides = (_ints(g, op.inputs[k]) for k in (1, 2, 3))
    if not len(begin) == len(end) == len(strides) == len(shape):
        return f"begin/end/strides of lengths {len(begin)}/{len(end)}/{len(strides)} for rank {len(shape)}"
    if 0 in strides or op.options.get("ellipsis_mask", 0) or op.options.get("new_axis_mask", 0):
        return "a zero stride, ellipsis_mask or new_axis_mask"
    return [_axis_range(size, b, e, s, 1 << i, op.options)
            for i, (size, b, e, s) in enumerate(zip(shape, begin, end, strides))]


def _strided_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    ranges = _strided_ranges(g, op)
    if isinstance(ranges, str):
        return ranges
    shrink = op.options.get("shrink_axis_mask", 0)
    return tuple(len(r) for i, r in enumerate(ranges) if not shrink & (1 << i))


def _slice_inputs(g: Graph, op: Operator, ranges: list[range]) -> list[str]:
    """data, starts, ends, axes, steps with ``ends`` past the last selected index."""
    name = g.name(op)
    ends = [r[-1] + r.step if r[-1] + r.step >= 0 else INT64_MIN for r in ranges]
    return [g.value(op.inputs[0]), g.ints(f"{name}/starts", [r[0] for r in ranges]),
            g.ints(f"{name}/ends", ends), g.ints(f"{name}/axes", range(len(ranges))),
            g.ints(f"{name}/steps", [r.step for r in ranges])]


@register("STRIDED_SLICE", "Slice (+ Reshape for shrink_axis_mask)", input_count(4),
          const_inputs(1, 2, 3, what="begin, end and strides"),
          _output_shape_is(_strided_shape, "ellipsis_mask = new_axis_mask = 0; non-zero strides; "
                                           "output shape matches"))
def strided_slice(g: Graph, op: Operator) -> None:
    ranges = _strided_ranges(g, op)
    sliced = tuple(len(r) for r in ranges)
    out_shape = g.shape(op.outputs[0])
    tail = None if sliced == out_shape else ("reshape", (out_shape, "slice"))
    g.emit(op, "Slice", _slice_inputs(g, op, ranges), tail=tail)


def _slice_ranges(g: Graph, op: Operator) -> list[range] | str:
    shape, begin, size = g.shape(op.inputs[0]), _ints(g, op.inputs[1]), _ints(g, op.inputs[2])
    if not len(begin) == len(size) == len(shape):
        return f"begin/size of lengths {len(begin)}/{len(size)} for rank {len(shape)}"
    ends = [d if s == -1 else b + s for d, b, s in zip(shape, begin, size)]
    if any(not 0 <= b < e <= d for b, e, d in zip(begin, ends, shape)):
        return f"begin {begin} and size {size} leave the input {list(shape)}"
    return [range(b, e) for b, e in zip(begin, ends)]


def _computed(g: Graph, op: Operator) -> bool:
    return g.const(op.inputs[1]) is None or g.const(op.inputs[2]) is None


def _slice_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    if _computed(g, op):  # only the rank is known before it runs; the file's output shape is trusted
        rank = len(g.shape(op.inputs[0]))
        if g.shape(op.inputs[1]) != (rank,) or g.shape(op.inputs[2]) != (rank,):
            return f"begin/size of shapes {list(g.shape(op.inputs[1]))}/{list(g.shape(op.inputs[2]))} for rank {rank}"
        return g.shape(op.outputs[0]) if len(g.shape(op.outputs[0])) == rank else f"output rank differs from {rank}"
    ranges = _slice_ranges(g, op)
    return ranges if isinstance(ranges, str) else tuple(len(r) for r in ranges)


@register("SLICE", "Slice (computed begin/size: ends = begin + size, or the end where size is -1)", input_count(3),
          _output_shape_is(_slice_shape, "begin/size inside the input (size -1 = to the end); output shape matches"))
def slice_(g: Graph, op: Operator) -> None:
    if not _computed(g, op):
        g.emit(op, "Slice", _slice_inputs(g, op, _slice_ranges(g, op)))
        return
    name, rank = g.name(op), len(g.shape(op.inputs[0]))
    starts, sizes, ends, whole, stops = (g.fresh(f"{name}/{role}") for role in
                                         ("starts", "sizes", "ends", "to_end", "stops"))
    g.node("Cast", [g.value(op.inputs[1])], [starts], starts, to=TensorProto.INT64)
    g.node("Cast", [g.value(op.inputs[2])], [sizes], sizes, to=TensorProto.INT64)
    g.node("Add", [starts, sizes], [ends], ends)
    g.node("Equal", [sizes, g.scalar(-1, np.int64)], [whole], whole)
    g.node("Where", [whole, g.scalar(INT64_MAX, np.int64), ends], [stops], stops)
    g.emit(op, "Slice", [g.value(op.inputs[0]), starts, stops, g.ints(f"{name}/axes", range(rank))])


def _split_outputs(g: Graph, op: Operator, data: int, axis_input: int) -> Result:
    rank = len(g.shape(op.inputs[data]))
    axis = _axis(_ints(g, op.inputs[axis_input])[0], rank) if g.const_value(op.inputs[axis_input]).size == 1 else None
    if axis is None:
        return fail("axis is not one valid dimension")
    shape = g.shape(op.inputs[data])
    outs = [g.shape(i) for i in op.outputs]
    if any(len(o) != rank or o[:axis] + o[axis + 1:] != shape[:axis] + shape[axis + 1:] for o in outs) \
            or sum(o[axis] for o in outs) != shape[axis]:
        return fail(f"output shapes {[list(o) for o in outs]} do not split {list(shape)} along axis {axis}")
    if op.name == "SPLIT" and len({o[axis] for o in outs}) != 1:
        return fail("SPLIT outputs are not equal parts")
    return OK


def _split(g: Graph, op: Operator, data: int, axis_input: int) -> None:
    """One Split node named after the first output; every output keeps its TFLite name."""
    axis = _axis(_ints(g, op.inputs[axis_input])[0], len(g.shape(op.inputs[data])))
    sizes = g.ints(f"{g.name(op)}/split", [g.shape(i)[axis] for i in op.outputs])
    g.node("Split", [g.value(op.inputs[data]), sizes], [g.values[i] for i in op.outputs], g.name(op), axis=axis)


@register("SPLIT", "Split into equal parts", input_count(2), const_inputs(0, what="axis"),
          Check("output shapes split the input evenly along the axis", lambda g, op: _split_outputs(g, op, 1, 0)))
def split(g: Graph, op: Operator) -> None:
    _split(g, op, data=1, axis_input=0)


@register("SPLIT_V", "Split with the given sizes", input_count(3), const_inputs(1, 2, what="size_splits and axis"),
          Check("output shapes split the input along the axis", lambda g, op: _split_outputs(g, op, 0, 2)))
def split_v(g: Graph, op: Operator) -> None:
    _split(g, op, data=0, axis_input=2)
