"""Small helpers over an ONNX graph that the passes share: who produces and consumes a tensor,
constants, renaming, ordering and pruning.

Control-flow nodes (If, Loop, Scan, SequenceMap) carry subgraphs that may read values of the enclosing
graph by name without listing them as inputs. Every helper here counts such a read as a use of the
value (``node_reads``), so a pass built on them never drops, reorders or renames a value a body needs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

# the default domain's operators with graph attributes; any other operator of that domain has no body
_DEFAULT_DOMAIN_BODIES = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs held in a node's attributes (If branches, Loop/Scan bodies, ...)."""
    if node.domain in ("", "ai.onnx") and node.op_type not in _DEFAULT_DOMAIN_BODIES:
        return []  # the common case, without walking the attributes
    found: list[onnx.GraphProto] = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            found.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            found.extend(attr.graphs)
    return found


def defined_names(graph: onnx.GraphProto) -> set[str]:
    """Names a graph defines itself: its inputs, initializers and node outputs."""
    names = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    names |= {t.values.name for t in graph.sparse_initializer}
    names |= {out for node in graph.node for out in node.output if out}
    return names


def outer_reads(graph: onnx.GraphProto) -> set[str]:
    """Names a (sub)graph reads from the scopes around it, through any depth of nesting."""
    used = {v.name for v in graph.output}
    for node in graph.node:
        used.update(name for name in node.input if name)
        for sub in subgraphs(node):
            used |= outer_reads(sub)
    return used - defined_names(graph)


def node_reads(node: onnx.NodeProto) -> list[str]:
    """Every value a node reads: its inputs, then what its subgraphs read from the enclosing graph."""
    names = [name for name in node.input if name]
    bodies = subgraphs(node)
    if bodies:
        implicit = set().union(*(outer_reads(sub) for sub in bodies))
        names.extend(sorted(implicit - set(names)))
    return names


def producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    return {out: node for node in graph.node for out in node.output if out}


def consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    found: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in dict.fromkeys(node_reads(node)):
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


def set_initializers(graph: onnx.GraphProto, values: dict[str, np.ndarray]) -> None:
    """``set_initializer`` for each of ``values`` in order, looking the graph's initializers up once."""
    at = {t.name: i for i, t in enumerate(graph.initializer)}
    for name, value in values.items():
        tensor = numpy_helper.from_array(np.array(value, order="C"), name)
        if name in at:
            graph.initializer[at[name]].CopyFrom(tensor)
        else:
            at[name] = len(graph.initializer)
            graph.initializer.append(tensor)


def attribute(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    """The value of ``node``'s attribute ``name`` (int, float, bytes, tensor, graph or a list of them, as the
    attribute's type says: ``Any`` like ``onnx.helper.get_attribute_value``), or ``default``."""
    for attr in node.attribute:
        if attr.name == name:
            return onnx.helper.get_attribute_value(attr)
    return default


def reduction(graph: onnx.GraphProto, node: onnx.NodeProto) -> tuple[tuple[int, ...] | None, bool]:
    """A Reduce* node's axes (the attribute before opset 18, else the constant second input; None: all axes,
    or a second input that is not constant) and whether it keeps dimensions."""
    axes = attribute(node, "axes")
    if len(node.input) > 1 and node.input[1]:
        value = constant(graph, node.input[1])
        axes = None if value is None else [int(a) for a in value.reshape(-1)]
    return (tuple(axes) if axes is not None else None), bool(attribute(node, "keepdims", 1))


def rank(graph: onnx.GraphProto, name: str) -> int | None:
    """The rank of a graph input, output or inferred tensor, when its shape is known."""
    value = next((v for v in [*graph.input, *graph.value_info, *graph.output] if v.name == name), None)
    return len(value.type.tensor_type.shape.dim) if value and value.type.tensor_type.HasField("shape") else None


def sole_consumer(graph: onnx.GraphProto, tensor: str) -> onnx.NodeProto | None:
    """The only node reading ``tensor``, if exactly one does and it is not a graph output."""
    if tensor in graph_output_names(graph):
        return None
    found = readers(graph, tensor)
    return found[0] if len(found) == 1 else None


def readers(graph: onnx.GraphProto, tensor: str) -> list[onnx.NodeProto]:
    """Nodes that read ``tensor``, as an input or from inside a subgraph (``node_reads``, which walks a node's
    bodies only when it has some: most nodes are answered by their input list)."""
    return [n for n in graph.node if (tensor and tensor in n.input) or (subgraphs(n) and tensor in node_reads(n))]


class ReaderIndex:
    """``readers`` of every value at once: one walk of the graph instead of one per question (a pass asking
    about each of a large graph's layers). A pass that changes what a node reads says so (``update``,
    ``forget``); the answers are then those ``readers`` would give, in no particular order."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self._readers = consumers(graph)

    def of(self, tensor: str) -> list[onnx.NodeProto]:
        return list(self._readers.get(tensor, ())) if tensor else []

    def sole_consumer(self, graph: onnx.GraphProto, tensor: str) -> onnx.NodeProto | None:
        """``sole_consumer(graph, tensor)`` from the index."""
        if tensor in graph_output_names(graph):
            return None
        found = self.of(tensor)
        return found[0] if len(found) == 1 else None

    def forget(self, node: onnx.NodeProto, reads: Iterable[str]) -> None:
        """``node`` no longer reads ``reads`` (what it read before an edit, or at all once removed)."""
        for name in dict.fromkeys(reads):
            kept = [n for n in self._readers.get(name, ()) if n is not node]
            if kept:
                self._readers[name] = kept
            else:
                self._readers.pop(name, None)

    def update(self, node: onnx.NodeProto, before: Iterable[str]) -> None:
        """``node`` read ``before`` and now reads what ``node_reads`` says."""
        self.forget(node, before)
        for name in dict.fromkeys(node_reads(node)):
            self._readers.setdefault(name, []).append(node)


def replace_uses(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Make every node that reads ``old`` read ``new`` instead, inside subgraphs too."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for sub in subgraphs(node):
            _rename_outer(sub, old, new)


def _rename_outer(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Rename reads of the outer value ``old`` in a subgraph, unless the subgraph defines its own ``old``."""
    if old in defined_names(graph):
        return
    replace_uses(graph, old, new)
    for value in graph.output:
        if value.name == old:
            value.name = new


def remove_nodes(graph: onnx.GraphProto, doomed: Iterable[onnx.NodeProto]) -> None:
    ids = {id(n) for n in doomed}
    keep = [n for n in graph.node if id(n) not in ids]
    del graph.node[:]
    graph.node.extend(keep)


def topological_order(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Nodes in an order where every value is produced before it is read (stable for ties).

    A value a subgraph reads from this graph counts; a name this graph does not define at all is taken
    to come from an enclosing graph (``graph`` may itself be a subgraph).
    """
    reads = [node_reads(n) for n in graph.node]
    defined = defined_names(graph)
    available = {v.name for v in graph.input} | {t.name for t in graph.initializer} | {""}
    available |= {name for names in reads for name in names if name not in defined}
    # in waves: wave k+1 is every node (in graph order) whose reads the waves up to k provide
    missing = [{name for name in names if name not in available} for names in reads]
    waiting: dict[str, list[int]] = defaultdict(list)
    for index, names in enumerate(missing):
        for name in names:
            waiting[name].append(index)
    wave = [index for index, names in enumerate(missing) if not names]
    ordered: list[onnx.NodeProto] = []
    while wave:
        ready: list[int] = []
        for index in wave:
            ordered.append(graph.node[index])
            for name in graph.node[index].output:
                if name in available:
                    continue
                available.add(name)
                for reader in waiting.pop(name, ()):
                    missing[reader].discard(name)
                    if not missing[reader]:
                        ready.append(reader)
        wave = sorted(ready)
    if len(ordered) < len(graph.node):
        placed = {id(n) for n in ordered}
        near = ", ".join([n.name or n.op_type for n in graph.node if id(n) not in placed][:5])
        raise ValueError(f"graph has a cycle near: {near}")
    return ordered


def prune(graph: onnx.GraphProto) -> int:
    """Drop nodes and initializers that no graph output depends on; returns how many went.

    Values read inside a kept node's subgraphs are needed like its inputs.
    """
    needed = set(graph_output_names(graph))
    live: list[onnx.NodeProto] = []
    for node in reversed(topological_order(graph)):
        if any(out in needed for out in node.output):
            live.append(node)
            needed.update(node_reads(node))
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


def static_shapes(model: onnx.ModelProto) -> dict[str, list[int] | None]:
    """``static_shape`` of every tensor the graph describes, in one pass (a name it does not describe: absent,
    which ``.get`` reads as None like ``static_shape``)."""
    graph = model.graph
    shapes: dict[str, list[int] | None] = {}
    for tensor in graph.initializer:
        shapes.setdefault(tensor.name, list(tensor.dims))
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.name not in shapes and value.type.tensor_type.HasField("shape"):
            dims = value.type.tensor_type.shape.dim
            shapes[value.name] = [d.dim_value for d in dims] if all(d.HasField("dim_value") for d in dims) else None
    return shapes


def elem_type(model: onnx.ModelProto, name: str) -> int | None:
    graph = model.graph
    for tensor in graph.initializer:
        if tensor.name == name:
            return tensor.data_type
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.name == name and value.type.tensor_type.elem_type:
            return value.type.tensor_type.elem_type
    return None
