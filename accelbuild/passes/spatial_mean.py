"""``spatial_mean``: a mean over the spatial axes of an NCHW tensor, kept as 4-D, is GlobalAveragePool.

Exporters write the squeeze-and-excitation pooling of EfficientNet, MobileNetV3 and RegNetY as
``ReduceMean(axes=[2, 3], keepdims=1)`` (timm, torch.mean). Accelerators and their compilers run it as a
global average pool; a profile that lists GlobalAveragePool but not the general ReduceMean would otherwise
leave every SE block to the host, splitting the model into one NPU subgraph per block (EfficientNet-B0:
17 on mlsoc, over its limit of 16). Both compute the same mean, so the rewrite is exact.
"""

from __future__ import annotations

import onnx
from onnx import helper

from accelbuild.util import onnx_graph as g


def spatial_mean_to_global_pool(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    notes = []
    for index, node in enumerate(list(graph.node)):
        if node.op_type != "ReduceMean" or not node.input:
            continue
        rank = _rank(model, node.input[0])
        axes = _axes(graph, node)
        if rank != 4 or axes is None or sorted(a % 4 for a in axes) != [2, 3] or not g.attribute(node, "keepdims", 1):
            continue
        pool = helper.make_node("GlobalAveragePool", [node.input[0]], list(node.output), name=node.name)
        graph.node.remove(node)
        graph.node.insert(index, pool)
        notes.append(f"ReduceMean {node.name} over H and W -> GlobalAveragePool")
    return notes


def _rank(model: onnx.ModelProto, name: str) -> int | None:
    graph = model.graph
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.name == name and value.type.tensor_type.HasField("shape"):
            return len(value.type.tensor_type.shape.dim)
    return None


def _axes(graph: onnx.GraphProto, node: onnx.NodeProto) -> list[int] | None:
    """The reduced axes: the attribute (opset < 18) or the constant second input; None when not known or
    when the node reduces nothing (``noop_with_empty_axes``)."""
    if len(node.input) > 1 and node.input[1]:
        value = g.constant(graph, node.input[1])
        return None if value is None else [int(a) for a in value.reshape(-1)]
    axes = g.attribute(node, "axes", None)
    return [int(a) for a in axes] if axes else None  # type: ignore[union-attr]
