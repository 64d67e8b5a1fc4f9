"""Lossless clean-ups: name every node, drop nodes that pass their input through unchanged, drop what no
output needs."""

from __future__ import annotations

import onnx

from accelbuild.util import onnx_graph as g


def name_nodes(model: onnx.ModelProto) -> list[str]:
    """Give unnamed (or duplicate-named) nodes the name of their first output tensor.

    Bits tables and crop points name layers; exporters often leave node names empty.
    """
    notes = []
    taken: set[str] = set()
    keep: set[int] = set()  # indices: protobuf hands out fresh wrapper objects, so id() is not stable
    for index, node in enumerate(model.graph.node):  # explicit names win over generated ones
        if node.name and node.name not in taken:
            taken.add(node.name)
            keep.add(index)
    for index, node in enumerate(model.graph.node):
        if index in keep:
            continue
        base = node.output[0] if node.output and node.output[0] else node.op_type
        name, k = base, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        notes.append(f"{node.op_type} named {name}")
        node.name = name
        taken.add(name)
    return notes


def remove_identities(model: onnx.ModelProto) -> list[str]:
    """Drop every node that passes its input through unchanged (``_is_wire``).

    Converters leave many: float->float and int64->int64 Casts, Reshapes to the shape the tensor has.
    Each is a node a partitioner must place somewhere; on an NPU that runs none of them, every one
    splits the graph and costs two crossings. Shapes and types are those ``fold_constants`` inferred.
    """
    graph = model.graph
    notes = []
    for node in list(graph.node):
        if not _is_wire(model, node):
            continue
        source, result = node.input[0], node.output[0]
        outputs = g.graph_output_names(graph)
        if result not in outputs:
            g.replace_uses(graph, result, source)
        elif _can_rename_producer(graph, source):
            g.producers(graph)[source].output[list(g.producers(graph)[source].output).index(source)] = result
            g.replace_uses(graph, source, result)
        else:
            continue
        graph.node.remove(node)
        notes.append(f"{node.op_type} {node.name}")
    return notes


# ops that only relabel a tensor's shape (the data's order stays): a wire when the shape stays too
_SHAPE_ONLY = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}
# ops that repeat a tensor: a wire when nothing is repeated (the output has the input's shape)
_REPEATING = {"Expand", "Tile"}


def _is_wire(model: onnx.ModelProto, node: onnx.NodeProto) -> bool:
    """Whether ``node`` outputs its first input unchanged: Identity, Dropout in inference mode (its mask
    unused), a Cast to the type the tensor has, a Transpose that keeps the axes' order, a reshape or
    repeat whose output has the input's shape."""
    graph = model.graph
    if node.domain not in ("", "ai.onnx") or not node.input or not node.input[0]:
        return False
    if node.op_type == "Identity":
        return True
    if node.op_type == "Dropout":
        training = node.input[2] if len(node.input) > 2 else ""
        mask_used = len(node.output) > 1 and node.output[1] and (
            node.output[1] in g.consumers(graph) or node.output[1] in g.graph_output_names(graph))
        return not training and not mask_used
    if len(node.output) != 1:
        return False
    if node.op_type in ("Cast", "CastLike"):
        source = g.elem_type(model, node.input[0])
        wanted = (g.attribute(node, "to") if node.op_type == "Cast"
                  else g.elem_type(model, node.input[1]) if len(node.input) > 1 else None)
        return source is not None and source == wanted
    if node.op_type == "Transpose":
        perm = g.attribute(node, "perm")
        return perm is not None and list(perm) == list(range(len(perm)))
    if node.op_type in _SHAPE_ONLY | _REPEATING:
        shape = g.static_shape(model, node.input[0])
        return shape is not None and shape == g.static_shape(model, node.output[0]) and (
            g.elem_type(model, node.input[0]) == g.elem_type(model, node.output[0]))
    return False


def _can_rename_producer(graph: onnx.GraphProto, source: str) -> bool:
    """An Identity feeding a graph output can vanish if its input is a plain node output."""
    producer = g.producers(graph).get(source)
    if producer is None or source in g.graph_output_names(graph):
        return False
    return len(g.consumers(graph).get(source, [])) == 1


def prune_unused(model: onnx.ModelProto) -> list[str]:
    removed = g.prune(model.graph)
    return [f"{removed} unused node(s)/initializer(s)"] if removed else []
