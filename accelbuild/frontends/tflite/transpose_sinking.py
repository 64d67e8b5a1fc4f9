"""Move layout Transposes below the ops that do not care about layout, so that they meet and cancel.

The converter keeps every TFLite tensor channel-last and wraps each channel-first ONNX op in
``Transpose(0,3,1,2) -> op -> Transpose(0,2,3,1)`` (:mod:`.layout`). Between two convolutions TFLite
models often run channel-last ops that ONNX can run in any layout: a residual ``Add``, a ``Pad`` of the
channels (BlazeFace blocks), a ``PRelu``, a ``Concat``. There the two Transposes do not meet, and
:func:`.layout.collapse_transposes` cannot remove them: MediaPipe's face detector came out of the import
with 102 Transposes beside 91 convolutions, each of which a target compiles as a layer of its own.

:func:`sink_transposes` rewrites such an op to read the values before the Transposes that feed it and
puts one Transpose after it instead (the tf2onnx and onnxruntime transpose optimisers do the same):

- elementwise ops (``ELEMENTWISE``), when every input that is not a constant comes from a Transpose of
  the same permutation; constants are permuted to match (broadcast from the right, as ONNX does);
- ``Pad`` (its pads permuted), ``Concat``, ``Split`` and ``Softmax`` (their axis), ``Slice`` and the
  reductions (their axes), when their data input comes from a Transpose. A reduction that drops its
  axes needs no Transpose after it when the axes it keeps stay in order (a global mean over H and W
  of NHWC is a mean over axes 2 and 3 of NCHW: ``[N, C]`` either way).

The op keeps its node name (so the layer ``T`` is still the node ``T``); its channel-first result is
``<output>/nchw`` and the Transpose after it, named ``<output>/nhwc``, produces the output's own name,
so a graph output or a value a crop point names means what it meant. Nodes must be in topological
order; the result is, too. :func:`fewest_transposes` is what the converter calls: it keeps the graph
without the moves in the rare case where they leave more Transposes than they remove.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from accelbuild.frontends.tflite import layout

ELEMENTWISE = {"Relu", "Clip", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "LeakyRelu", "Elu", "Exp", "Log",
               "Abs", "Neg", "Sqrt", "Floor", "Ceil", "Round", "Erf", "Softplus", "Reciprocal", "Sign", "Cast",
               "Identity", "Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu", "Equal", "Less", "Greater",
               "Where"}
AXIS_OPS = {"Concat", "Softmax", "Split"}
REDUCTIONS = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}


def fewest_transposes(nodes: list[onnx.NodeProto], initializers: dict[str, onnx.TensorProto],
                      fresh: Callable[[str], str], keep: set[str]) -> list[onnx.NodeProto]:
    """``nodes`` with the Transposes that undo each other collapsed (:func:`.layout.collapse_transposes`),
    after :func:`sink_transposes` unless that leaves more Transposes than collapsing alone (a Split whose
    parts are each read channel-last needs a Transpose per part where one stood before it)."""
    plain = layout.collapse_transposes([_copy(node) for node in nodes], keep)
    moved = layout.collapse_transposes(sink_transposes(nodes, initializers, fresh), keep)
    return moved if _count(moved) <= _count(plain) else plain


def sink_transposes(nodes: list[onnx.NodeProto], initializers: dict[str, onnx.TensorProto],
                    fresh: Callable[[str], str]) -> list[onnx.NodeProto]:
    """``nodes`` with every Transpose that feeds a layout-agnostic op moved below it (see the module).

    ``initializers`` gains the permuted constants; ``fresh`` makes unused names. Transposes left
    without readers stay in the list (:func:`.layout.remove_dead_nodes` drops them).
    """
    producer: dict[str, onnx.NodeProto] = {}
    result: list[onnx.NodeProto] = []
    for node in nodes:
        perm = _common_perm(node, producer, initializers)
        rewritten = _rewrite(node, perm, producer, initializers, fresh) if perm else None
        for out in rewritten or [node]:
            result.append(out)
            producer.update({name: out for name in out.output})
    return result


def _common_perm(node: onnx.NodeProto, producer: dict[str, onnx.NodeProto],
                 initializers: dict[str, onnx.TensorProto]) -> tuple[int, ...] | None:
    """The permutation of the Transposes feeding every data input of ``node``, if they share one."""
    if node.op_type in ELEMENTWISE:
        data = [name for name in node.input if name and name not in initializers]
    elif node.op_type in AXIS_OPS or node.op_type in REDUCTIONS or node.op_type in ("Pad", "Slice"):
        data = list(node.input) if node.op_type == "Concat" else node.input[:1]
    else:
        return None
    sources = [producer.get(name) for name in data]
    if not sources or any(s is None or s.op_type != "Transpose" for s in sources):
        return None
    perms = {layout.perm_of(s) for s in sources}
    return perms.pop() if len(perms) == 1 and perms != {()} else None


def _rewrite(node: onnx.NodeProto, perm: tuple[int, ...], producer: dict[str, onnx.NodeProto],
             initializers: dict[str, onnx.TensorProto], fresh: Callable[[str], str]) -> list[onnx.NodeProto] | None:
    """``[node in the layout before the Transposes, Transposes back]``, or None when it cannot move."""
    rank = len(perm)
    inputs = list(node.input)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type in ELEMENTWISE:
        for k, name in enumerate(inputs):
            if name in initializers:
                moved = _permuted_constant(name, perm, initializers, fresh)
                if moved is None:
                    return None
                inputs[k] = moved
    elif node.op_type == "Pad":
        pads = _constant(inputs[1], initializers) if len(inputs) > 1 else None
        if pads is None or len(inputs) > 3 or pads.shape != (2 * rank,):
            return None
        moved = np.empty_like(pads)
        for axis in range(rank):  # output axis a is axis perm[a] before the Transpose
            moved[perm[axis]], moved[rank + perm[axis]] = pads[axis], pads[rank + axis]
        inputs[1] = _add(initializers, fresh(f"{inputs[1]}/perm"), moved)
    elif node.op_type in AXIS_OPS:
        attrs["axis"] = perm[int(attrs.get("axis", -1 if node.op_type == "Softmax" else 0)) % rank]
    elif node.op_type == "Slice":
        starts = _constant(inputs[1], initializers)
        axes = _constant(inputs[3], initializers) if len(inputs) > 3 and inputs[3] else \
            None if starts is None else np.arange(len(starts), dtype=np.int64)
        if axes is None or any(name and name not in initializers for name in inputs[1:]):
            return None
        inputs[3:4] = [_add(initializers, fresh(f"{inputs[3] if len(inputs) > 3 and inputs[3] else node.name}/axes_perm"),
                            np.array([perm[int(a) % rank] for a in axes], dtype=axes.dtype))]
    else:  # reductions
        axes = _constant(inputs[1], initializers) if len(inputs) > 1 and inputs[1] else None
        if axes is None or int(attrs.get("noop_with_empty_axes", 0)):
            return None
        axes = sorted({int(a) % rank for a in axes})
        inputs[1] = _add(initializers, fresh(f"{inputs[1]}/perm"),
                         np.array(sorted(perm[a] for a in axes), dtype=np.int64))
        if int(attrs.get("keepdims", 1)) == 0:
            kept = [a for a in range(rank) if a not in axes]
            perm = tuple(int(i) for i in np.argsort(np.argsort([perm[a] for a in kept])))  # output axis -> new
    for k, name in enumerate(inputs):
        source = producer.get(name)
        if source is not None and source.op_type == "Transpose" and name not in initializers:
            inputs[k] = source.input[0]
    if perm == tuple(range(len(perm))):  # the result is in the output's own layout already
        return [helper.make_node(node.op_type, inputs, list(node.output), name=node.name, domain=node.domain or None,
                                 **attrs)]
    outputs = [fresh(f"{out}{layout.CHANNEL_FIRST_SUFFIX}") for out in node.output]
    moved_node = helper.make_node(node.op_type, inputs, outputs, name=node.name, domain=node.domain or None, **attrs)
    back = [layout.transpose_node(fresh(f"{out}/nhwc"), inner, out, perm) for out, inner in zip(node.output, outputs)]
    return [moved_node, *back]


def _permuted_constant(name: str, perm: tuple[int, ...], initializers: dict[str, onnx.TensorProto],
                       fresh: Callable[[str], str]) -> str | None:
    """A constant operand in the layout before the Transpose (None if it has more dimensions)."""
    value = _constant(name, initializers)
    if value is None or value.ndim > len(perm):
        return None
    if value.size == 1 and value.ndim <= 1:
        return name  # a scalar broadcasts the same in every layout
    full = value.reshape((1,) * (len(perm) - value.ndim) + value.shape)
    return _add(initializers, fresh(f"{name}/perm"), np.ascontiguousarray(full.transpose(np.argsort(perm))))


def _constant(name: str, initializers: dict[str, onnx.TensorProto]) -> np.ndarray | None:
    return numpy_helper.to_array(initializers[name]) if name in initializers else None


def _add(initializers: dict[str, onnx.TensorProto], name: str, value: np.ndarray) -> str:
    initializers[name] = numpy_helper.from_array(value, name)
    return name


def _copy(node: onnx.NodeProto) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    return copy


def _count(nodes: list[onnx.NodeProto]) -> int:
    return sum(node.op_type == "Transpose" for node in nodes)
