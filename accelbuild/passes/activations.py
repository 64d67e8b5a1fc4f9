"""Mark ReLU-family activations as fused into the layer before them.

On the target, ReLU-family activations run inside the producing layer's core for free, while sigmoid,
swish and tanh are separate ALU work. The graph stays a valid, runnable ONNX graph: the decision is
recorded in the model's metadata (``accelbuild.fused_activations``: activation node -> producer node)
for the mapper and the reports.
"""

from __future__ import annotations

import json

import onnx

from accelbuild.util import onnx_graph as g

FUSED_KEY = "accelbuild.fused_activations"
RELU_FAMILY = {"Relu", "LeakyRelu", "Clip", "PRelu"}
FUSING_PRODUCERS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "BatchNormalization"}


def mark_fused_activations(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    fused = read_fused(model)
    producers = g.producers(graph)
    for node in graph.node:
        if node.op_type not in RELU_FAMILY or node.name in fused:
            continue
        if node.op_type == "Clip" and not _is_relu_clip(graph, node):
            continue
        producer = producers.get(node.input[0])
        if producer is None or producer.op_type not in FUSING_PRODUCERS:
            continue
        if g.sole_consumer(graph, node.input[0]) is node:
            fused[node.name] = producer.name
    _write_fused(model, fused)
    return [f"{act} into {prod}" for act, prod in sorted(fused.items())]


def _is_relu_clip(graph: onnx.GraphProto, node: onnx.NodeProto) -> bool:
    """Clip with a constant lower bound of 0 (ReLU6 and friends)."""
    low = g.constant(graph, node.input[1]) if len(node.input) > 1 and node.input[1] else None
    return low is not None and low.size == 1 and float(low.reshape(-1)[0]) == 0.0


def read_fused(model: onnx.ModelProto) -> dict[str, str]:
    for entry in model.metadata_props:
        if entry.key == FUSED_KEY:
            return dict(json.loads(entry.value))
    return {}


def _write_fused(model: onnx.ModelProto, fused: dict[str, str]) -> None:
    for entry in list(model.metadata_props):
        if entry.key == FUSED_KEY:
            model.metadata_props.remove(entry)
    if fused:
        onnx.helper.set_model_props(model, {**{e.key: e.value for e in model.metadata_props},
                                            FUSED_KEY: json.dumps(fused, sort_keys=True)})
