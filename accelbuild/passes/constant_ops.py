"""The constant nodes constant folding meets most (an exporter's shape arithmetic and the tensors it builds
from it), evaluated with the numpy calls of onnx's reference implementation of each operator.

Loading ``onnx.reference`` imports every one of its ~200 operator modules, which costs a small command
(``validate``, ``tensors``, ``init``) more than a tenth of its start-up; the shape arithmetic of a detection
head needs a dozen operators. Each function here is the reference's ``_run`` for the operator at the opsets
listed, the same numpy calls on the same arrays, so a folded value has the same bytes either way
(tests/passes/test_constant_ops.py runs both). A node outside this table, an opset it does not list, or an
input the reference would refuse, returns None: the caller runs onnx's reference evaluator instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from accelbuild.util import onnx_graph as g

# element types Cast writes with a plain astype in the reference (float 8 and strings have their own rules)
_PLAIN_CASTS = frozenset({
    TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BOOL,
    TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
    TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64,
})
# Range's element types the reference runs through a plain arange (float 16 ones go through a stash type)
_RANGE_TYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int16, np.int32, np.int64))

Op = Callable[[onnx.NodeProto, list[Any]], Any]


def evaluate(nodes: list[onnx.NodeProto], values: dict[str, np.ndarray], opset: int) -> dict[str, np.ndarray] | None:
    """The outputs of ``nodes`` (in topological order) from the constant ``values`` they read; None when one of
    them is not in the table at ``opset`` or its inputs are not what the table's numpy code takes."""
    if any(n.domain not in ("", "ai.onnx") or len(n.output) != 1 or not _supported(n, opset) for n in nodes):
        return None
    known = dict(values)
    produced: dict[str, np.ndarray] = {}
    for node in nodes:
        inputs = [known[name] if name else None for name in node.input]
        if any(name and name not in known for name in node.input):
            return None
        try:
            result = _OPS[node.op_type][1](node, inputs)
        except (TypeError, ValueError, IndexError, KeyError, AttributeError):
            return None  # the reference evaluator says what is wrong, in its words
        if result is None:
            return None
        known[node.output[0]] = produced[node.output[0]] = np.asarray(result)
    return produced


def _supported(node: onnx.NodeProto, opset: int) -> bool:
    entry = _OPS.get(node.op_type)
    return entry is not None and opset >= entry[0]


def _same_dtype(inputs: list[Any]) -> bool:
    return all(isinstance(x, np.ndarray) for x in inputs) and len({x.dtype for x in inputs}) == 1


def _binary(function: Callable[[Any, Any], Any]) -> Op:
    """Add, Sub, Mul: ``OpRunBinaryNumpy``, inputs and result of one element type."""

    def run(node: onnx.NodeProto, inputs: list[Any]) -> Any:
        if len(inputs) != 2 or not _same_dtype(inputs) or inputs[0].dtype == np.bool_:
            return None
        result = np.asarray(function(inputs[0], inputs[1]))
        return result if result.dtype == inputs[0].dtype else None

    return run


def _identity(node: onnx.NodeProto, inputs: list[Any]) -> Any:
    return inputs[0].copy()


def _gather(node: onnx.NodeProto, inputs: list[Any]) -> Any:
    x, indices = (a if a.flags["C_CONTIGUOUS"] else np.ascontiguousarray(a) for a in inputs)  # keeps rank 0
    return np.take(x, indices, axis=g.attribute(node, "axis", 0))


def _unsqueeze(node: onnx.NodeProto, inputs: list[Any]) -> Any:  # Unsqueeze_13
    data, axes = inputs
    if axes is None:
        return None
    if hasattr(axes, "__iter__") and len(axes.shape) > 0:
        return np.expand_dims(data, axis=tuple(axes))
    return np.expand_dims(data, axis=axes)


def _squeeze(node: onnx.NodeProto, inputs: list[Any]) -> Any:  # Squeeze_13
    data, axes = inputs[0], (inputs[1] if len(inputs) > 1 else None)
    if axes is None:
        return np.squeeze(data)
    return np.squeeze(data, axis=tuple(axes) if hasattr(axes, "__iter__") else axes)


def _range(node: onnx.NodeProto, inputs: list[Any]) -> Any:
    starts, ends, steps = inputs
    if starts.dtype not in _RANGE_TYPES:
        return None
    return np.arange(starts.item(), ends.item(), steps.item()).astype(starts.dtype)


def _concat(node: onnx.NodeProto, inputs: list[Any]) -> Any:
    axis = g.attribute(node, "axis")
    if axis is None or any(len(a.shape) == 0 or not -len(a.shape) <= axis < len(a.shape) for a in inputs):
        return None
    return np.concatenate(tuple(inputs), axis)


def _cast(node: onnx.NodeProto, inputs: list[Any]) -> Any:
    to = g.attribute(node, "to")
    if to not in _PLAIN_CASTS or g.attribute(node, "round_mode") is not None:
        return None
    return inputs[0].astype(helper.tensor_dtype_to_np_dtype(to))


def _expand(node: onnx.NodeProto, inputs: list[Any]) -> Any:
    data, shape = inputs
    return data * np.ones(shape, dtype=data.dtype)


def _reshape(node: onnx.NodeProto, inputs: list[Any]) -> Any:  # Reshape_5 and Reshape_14
    data, shape = inputs
    new_shape = np.copy(shape)
    if g.attribute(node, "allowzero", 0) != 1:
        zeros = np.where(shape == 0)
        new_shape[zeros] = np.array(data.shape)[zeros]
    return np.reshape(data, new_shape)


def _slice(node: onnx.NodeProto, inputs: list[Any]) -> Any:  # Slice_10 and later
    data, starts, ends = inputs[:3]
    axes = inputs[3] if len(inputs) > 3 else None
    steps = inputs[4] if len(inputs) > 4 else None
    starts = np.array([starts]) if len(starts.shape) == 0 else starts
    ends = np.array([ends]) if len(ends.shape) == 0 else ends
    if axes is None:
        if steps is None:
            slices = [slice(s, e) for s, e in zip(starts, ends, strict=False)]
        else:
            slices = [slice(s, e, d) for s, e, d in zip(starts, ends, steps, strict=False)]
    else:
        slices = [slice(0, a) for a in data.shape]
        if steps is None:
            for s, e, a in zip(starts, ends, axes, strict=False):
                slices[a] = slice(s, e)
        else:
            for s, e, a, d in zip(starts, ends, axes, steps, strict=False):
                slices[a] = slice(s, e, d)
    return data[tuple(slices)]


def _transpose(node: onnx.NodeProto, inputs: list[Any]) -> Any:
    perm = g.attribute(node, "perm")
    if not perm:
        return np.transpose(inputs[0])
    if len(perm) != len(inputs[0].shape):
        return None
    return np.transpose(inputs[0], axes=perm)


# op type -> (the first opset whose form the function is, the function)
_OPS: dict[str, tuple[int, Op]] = {
    "Add": (14, _binary(np.add)),
    "Sub": (14, _binary(np.subtract)),
    "Mul": (14, _binary(np.multiply)),
    "Identity": (1, _identity),
    "Gather": (1, _gather),
    "Unsqueeze": (13, _unsqueeze),
    "Squeeze": (13, _squeeze),
    "Range": (11, _range),
    "Concat": (1, _concat),
    "Cast": (1, _cast),
    "Expand": (8, _expand),
    "Reshape": (5, _reshape),
    "Slice": (10, _slice),
    "Transpose": (1, _transpose),
}
