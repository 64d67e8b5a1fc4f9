"""The units the mapper places: one per compute node of each model's quantized AI section.

A ReLU-family activation right after its producer is fused into it (no core of its own); reshapes
that only relabel dimensions cost nothing; weight DequantizeLinear nodes are part of their layer.
Each layer carries what the cost model needs: MACs or element operations per frame, weight bytes at
its precision, the bytes it hands on, and its shape facts for the efficiency rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import onnx

from accelbuild.targets.mx3.hardware import HardwareProfile
from accelbuild.util import onnx_graph as g
from accelbuild.util.shape_inference import infer_shapes

FREE_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}  # relabel, no data moves
# ALU operations per output element, for the ops that need more than one
ALU_COST = {"Sigmoid": 4, "Tanh": 4, "Exp": 4, "Softmax": 6, "HardSwish": 2, "HardSigmoid": 2, "Softplus": 4,
            "Elu": 4, "Selu": 4, "Div": 2, "Sqrt": 4, "Reciprocal": 2, "Resize": 4, "Erf": 6, "Pow": 4}


@dataclass
class Layer:
    """One placeable unit of one model."""

    model: str
    name: str
    op: str
    kind: str                    # "mac" or "alu"
    work: float                  # MACs (mac) or element operations (alu) per frame
    weights: int = 0
    weight_bytes: int = 0
    bits: int = 0
    out_bytes: int = 0           # activations (bfloat16) it produces per frame
    buffer_bytes: int = 0        # feature-map memory it holds while streaming
    inputs: list[str] = field(default_factory=list)   # producing layers (same model)
    fused: list[str] = field(default_factory=list)    # activations folded into it
    factor: float = 1.0          # efficiency penalty (misaligned channels, grouped conv, layout op)
    rows: int = 1                # output rows: a layer can start after kernel rows of its input
    kernel_rows: int = 1
    supported: bool = True

    @property
    def key(self) -> str:
        return f"{self.model}/{self.name}"


def extract_layers(model_name: str, model: onnx.ModelProto, bits: dict[str, int],
                   hw: HardwareProfile) -> list[Layer]:
    """The layers of one quantized AI section, in topological order."""
    model = infer_shapes(model)
    graph = model.graph
    shapes = _shapes(model)
    weight_nodes = {n.output[0] for n in graph.node if n.op_type == "DequantizeLinear"}
    constants = set(g.initializers(graph))
    layers: dict[str, Layer] = {}
    alias: dict[str, str] = {}  # tensor -> the layer that (finally) produces it
    order: list[str] = []
    for node in g.topological_order(graph):
        if node.op_type == "DequantizeLinear" and node.output[0] in weight_nodes:
            continue
        sources = [alias[t] for t in node.input if t in alias]
        if _fuses(node, hw, sources, layers):
            host = layers[sources[0]]
            host.fused.append(node.name)
            alias.update({out: host.name for out in node.output})
            continue
        if node.op_type in FREE_OPS and sources:
            alias.update({out: sources[0] for out in node.output})
            continue
        layer = _layer(model_name, node, model, shapes, bits, hw)
        constant_weight = len(node.input) > 1 and (node.input[1] in weight_nodes or node.input[1] in constants)
        if layer.kind == "mac" and not constant_weight:  # activation x activation: no weight memory
            layer.weights = layer.weight_bytes = 0
        layer.inputs = sorted(set(sources))
        layers[layer.name] = layer
        order.append(layer.name)
        alias.update({out: layer.name for out in node.output})
    return [layers[name] for name in order]


def _fuses(node: onnx.NodeProto, hw: HardwareProfile, sources: list[str], layers: dict[str, Layer]) -> bool:
    if node.op_type not in hw.ops.fused or len(set(sources)) != 1 or sources[0] not in layers:
        return False
    host = layers[sources[0]]
    return host.kind == "mac" or host.op in ("Add", "BatchNormalization")


def _shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    found = {}
    for value in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        found[value.name] = [d.dim_value if d.HasField("dim_value") else 1 for d in dims]
    for tensor in model.graph.initializer:
        found[tensor.name] = list(tensor.dims)
    return found


def _layer(model_name: str, node: onnx.NodeProto, model: onnx.ModelProto, shapes: dict[str, list[int]],
           bits: dict[str, int], hw: HardwareProfile) -> Layer:
    out_shape = shapes.get(node.output[0], [1])
    out_elems = math.prod(out_shape) if out_shape else 1
    kind = hw.ops.kind(node.op_type)
    layer = Layer(model_name, node.name, node.op_type, "mac" if kind == "mac" else "alu", 0.0,
                  out_bytes=2 * sum(math.prod(shapes.get(o, [1]) or [1]) for o in node.output if o),
                  supported=kind is not None)
    if len(out_shape) == 4:
        layer.rows = max(1, out_shape[2])
    if kind == "mac":
        _mac_layer(layer, node, model, shapes, out_shape, bits, hw)
    else:
        layer.work = float(out_elems * ALU_COST.get(node.op_type, 1))
        if node.op_type in ("MaxPool", "AveragePool"):
            kernel = g.attribute(node, "kernel_shape", [1, 1])
            layer.work = float(out_elems * math.prod(kernel))
            layer.kernel_rows = int(kernel[0])
        elif node.op_type.startswith("Global") or node.op_type.startswith("Reduce"):
            in_shape = shapes.get(node.input[0], out_shape)
            layer.work = float(math.prod(in_shape))
            layer.kernel_rows = layer.rows = max(1, in_shape[2] if len(in_shape) == 4 else 1)
        if kind == "layout" or kind is None:
            layer.factor = hw.efficiency.layout_op_factor
    in_shape = shapes.get(node.input[0], out_shape) if node.input else out_shape
    row_bytes = 2 * (math.prod(in_shape) // max(1, in_shape[2] if len(in_shape) == 4 else 1))
    layer.buffer_bytes = row_bytes * (layer.kernel_rows + 1)
    return layer


def _mac_layer(layer: Layer, node: onnx.NodeProto, model: onnx.ModelProto, shapes: dict[str, list[int]],
               out_shape: list[int], bits: dict[str, int], hw: HardwareProfile) -> None:
    weight_shape = shapes.get(node.input[1], [1, 1]) if len(node.input) > 1 else [1, 1]
    weights = math.prod(weight_shape)
    out_elems = math.prod(out_shape) if out_shape else 1
    eff = hw.efficiency
    if node.op_type in ("Conv", "ConvTranspose"):
        group = int(g.attribute(node, "group", 1))
        per_output = weights // max(1, weight_shape[0]) if node.op_type == "Conv" else weights // max(1, weight_shape[1] * group)
        layer.work = float(out_elems * per_output)
        cin = (weight_shape[1] * group) if node.op_type == "Conv" else weight_shape[0]
        cout = out_shape[1] if len(out_shape) > 1 else 1
        layer.kernel_rows = int(weight_shape[2]) if len(weight_shape) == 4 else 1
        if group > 1:
            layer.factor *= eff.grouped_conv_factor
    else:  # Gemm / MatMul: out = M x N, K inner
        inner = weight_shape[0] if node.op_type == "MatMul" or not int(g.attribute(node, "transB", 0)) \
            else weight_shape[1]
        layer.work = float(out_elems * inner)
        cin, cout = inner, out_shape[-1] if out_shape else 1
        layer.kernel_rows = layer.rows  # a fully connected layer needs its whole input
    if cin % eff.channel_multiple:
        layer.factor *= eff.misaligned_factor
    if cout % eff.filter_multiple:
        layer.factor *= eff.misaligned_factor
    layer.bits = bits.get(node.name, 8)
    layer.weights = weights
    layer.weight_bytes = (weights * layer.bits + 7) // 8
