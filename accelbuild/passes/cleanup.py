"""Lossless clean-ups: name every node, drop Identity/Dropout, drop what no output needs."""

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
    """Identity, and Dropout in inference mode (its mask unused), are wires."""
    graph = model.graph
    notes = []
    for node in list(graph.node):
        if not _is_wire(graph, node):
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


def _is_wire(graph: onnx.GraphProto, node: onnx.NodeProto) -> bool:
    if node.domain not in ("", "ai.onnx") or not node.input or not node.input[0]:
        return False
    if node.op_type == "Identity":
        return True
    if node.op_type != "Dropout":
        return False
    training = node.input[2] if len(node.input) > 2 else ""
    mask_used = len(node.output) > 1 and node.output[1] and (
        node.output[1] in g.consumers(graph) or node.output[1] in g.graph_output_names(graph))
    return not training and not mask_used


def _can_rename_producer(graph: onnx.GraphProto, source: str) -> bool:
    """An Identity feeding a graph output can vanish if its input is a plain node output."""
    producer = g.producers(graph).get(source)
    if producer is None or source in g.graph_output_names(graph):
        return False
    return len(g.consumers(graph).get(source, [])) == 1


def prune_unused(model: onnx.ModelProto) -> list[str]:
    removed = g.prune(model.graph)
    return [f"{removed} unused node(s)/initializer(s)"] if removed else []
