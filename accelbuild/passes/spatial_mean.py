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
        axes, keepdims = g.reduction(graph, node)
        if g.rank(graph, node.input[0]) != 4 or axes is None or sorted(a % 4 for a in axes) != [2, 3] or not keepdims:
            continue
        pool = helper.make_node("GlobalAveragePool", [node.input[0]], list(node.output), name=node.name)
        graph.node.remove(node)
        graph.node.insert(index, pool)
        notes.append(f"ReduceMean {node.name} over H and W -> GlobalAveragePool")
    return notes
