"""Small helpers over an ONNX graph that the passes share: who produces and consumes a tensor,
constants, renaming, ordering and pruning."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

import numpy as np
import onnx
from onnx import numpy_helper


def producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    return {out: node for node in graph.node for out in node.output if out}


def consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    found: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            if name:
                found[name].append(node)
    return found


def graph_output_names(graph: onnx.GraphProto) -> set[str]:
    return {v.name for v in graph.output}


def real_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are fed at run time (old IR versions also list initializers as inputs)."""
    constants = {t.name for t in graph.initializer}
    return [v for v in graph.input if v.name not in constants]


def initializers(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    return {t.name: t for t in graph.initializer}


def constant(graph: onnx.GraphProto, name: str) -> np.ndarray | None:
    """The value of an initializer, or None if ``name`` is not a constant."""
    for tensor in graph.initializer:
        if tensor.name == name:
            return numpy_helper.to_array(tensor)
    return None


def set_initializer(graph: onnx.GraphProto, name: str, value: np.ndarray) -> None:
    """Add or replace the initializer ``name``."""
    tensor = numpy_helper.from_array(np.array(value, order="C"), name)  # ascontiguousarray would make a scalar 1-D
    for i, existing in enumerate(graph.initializer):
        if existing.name == name:
            graph.initializer[i].CopyFrom(tensor)
            return
    graph.initializer.append(tensor)


def attribute(node: onnx.NodeProto, name: str, default: object = None) -> object:
    for attr in node.attribute:
        if attr.name == name:
            return onnx.helper.get_attribute_value(attr)
    return default


def sole_consumer(graph: onnx.GraphProto, tensor: str) -> onnx.NodeProto | None:
    """The only node reading ``tensor``, if exactly one does and it is not a graph output."""
    if tensor in graph_output_names(graph):
        return None
    readers = [n for n in graph.node if tensor in n.input]
    return readers[0] if len(readers) == 1 else None


def replace_uses(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Make every node that reads ``old`` read ``new`` instead."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new


def remove_nodes(graph: onnx.GraphProto, doomed: Iterable[onnx.NodeProto]) -> None:
    ids = {id(n) for n in doomed}
    keep = [n for n in graph.node if id(n) not in ids]
    del graph.node[:]
    graph.node.extend(keep)


def topological_order(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Nodes in an order where every input is produced before it is read (stable for ties)."""
    available = {v.name for v in graph.input} | {t.name for t in graph.initializer} | {""}
    pending = list(graph.node)
    ordered: list[onnx.NodeProto] = []
    while pending:
        ready = [n for n in pending if all(i in available for i in n.input)]
        if not ready:
            names = ", ".join(n.name or n.op_type for n in pending[:5])
            raise ValueError(f"graph has a cycle or reads undefined tensors near: {names}")
        ready_ids = {id(n) for n in ready}
        pending = [n for n in pending if id(n) not in ready_ids]
        for node in ready:
            ordered.append(node)
            available.update(node.output)
    return ordered


def prune(graph: onnx.GraphProto) -> int:
    """Drop nodes and initializers that no graph output depends on; returns how many went."""
    needed = set(graph_output_names(graph))
    live: list[onnx.NodeProto] = []
    for node in reversed(topological_order(graph)):
        if any(out in needed for out in node.output):
            live.append(node)
            needed.update(i for i in node.input if i)
    removed = len(graph.node) - len(live)
    live.reverse()
    del graph.node[:]
    graph.node.extend(live)
    unused = [t for t in graph.initializer if t.name not in needed]
    for tensor in unused:
        graph.initializer.remove(tensor)
    graph_inputs = {v.name for v in graph.input}
    stale = [v for v in graph.value_info if v.name not in needed and v.name not in graph_inputs]
    for value in stale:
        graph.value_info.remove(value)
    return removed + len(unused)


def static_shape(model: onnx.ModelProto, name: str) -> list[int] | None:
    """The fully known shape of a tensor from inputs, initializers or inferred value_info."""
    graph = model.graph
    for tensor in graph.initializer:
        if tensor.name == name:
            return list(tensor.dims)
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.name == name and value.type.tensor_type.HasField("shape"):
            dims = value.type.tensor_type.shape.dim
            if all(d.HasField("dim_value") for d in dims):
                return [d.dim_value for d in dims]
            return None
    return None


def elem_type(model: onnx.ModelProto, name: str) -> int | None:
    graph = model.graph
    for tensor in graph.initializer:
        if tensor.name == name:
            return tensor.data_type
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.name == name and value.type.tensor_type.elem_type:
            return value.type.tensor_type.elem_type
    return None
