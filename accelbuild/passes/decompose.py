"""Rewrite operators the accelerator lacks into ones it has, with the same mathematics.

n-ary elementwise ops become chains of binary ones (dataflow cores take two operands), and a
BatchNormalization left standing (no Conv/Gemm before it to fold into) becomes a per-channel Mul and Add, or,
on a 4-D tensor, a 1x1 depthwise convolution with that scale as weights and that shift as bias (one layer, as
TensorFlow's converter writes it: on Ethos-U55 PP-OCRv4 det's standalone BatchNormalization cost 29.5 M
cycles as MUL and ADD, a third of the network, against 0.7 M as a depthwise convolution).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from accelbuild.util import onnx_graph as g

_BINARY_FOR = {"Sum": "Add", "Max": "Max", "Min": "Min"}


def decompose(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    notes = []
    ordered: list[onnx.NodeProto] = []
    for node in list(graph.node):
        replacement = _rewrite(model, node)
        if replacement is None:
            ordered.append(node)
        else:
            ordered.extend(replacement)
            notes.append(f"{node.op_type} {node.name} -> {' + '.join(n.op_type for n in replacement)}")
    del graph.node[:]
    graph.node.extend(ordered)
    return notes


def _rewrite(model: onnx.ModelProto, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    if node.op_type in _BINARY_FOR and len(node.input) > 2:
        return _binary_chain(node, _BINARY_FOR[node.op_type])
    if node.op_type == "BatchNormalization" and len(node.output) == 1:
        return _batchnorm_as_mul_add(model, node)
    return None


def _binary_chain(node: onnx.NodeProto, op: str) -> list[onnx.NodeProto]:
    nodes = []
    acc = node.input[0]
    for i, operand in enumerate(node.input[1:], start=1):
        last = i == len(node.input) - 1
        out = node.output[0] if last else f"{node.output[0]}/{op.lower()}{i}"
        name = node.name if last else f"{node.name}/{op.lower()}{i}"
        nodes.append(helper.make_node(op, [acc, operand], [out], name=name))
        acc = out
    return nodes


def _batchnorm_as_mul_add(model: onnx.ModelProto, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    graph = model.graph
    params = [g.constant(graph, name) for name in node.input[1:5]]
    rank = len(g.static_shape(model, node.input[0]) or [])
    if any(p is None for p in params) or rank < 2:
        return None
    scale, bias, mean, var = (p.astype(np.float64) for p in params)  # type: ignore[union-attr]
    factor = scale / np.sqrt(var + float(g.attribute(node, "epsilon", 1e-5)))
    if rank == 4:
        return [_depthwise_affine(graph, node, factor, bias - mean * factor)]
    shape = [-1] + [1] * (rank - 2)
    mul_name, add_name = f"{node.name}/scale", f"{node.name}/shift"
    g.set_initializer(graph, mul_name, factor.astype(np.float32).reshape(shape))
    g.set_initializer(graph, add_name, (bias - mean * factor).astype(np.float32).reshape(shape))
    scaled = f"{node.output[0]}/scaled"
    return [
        helper.make_node("Mul", [node.input[0], mul_name], [scaled], name=f"{node.name}/mul"),
        helper.make_node("Add", [scaled, add_name], [node.output[0]], name=node.name),
    ]


def _depthwise_affine(graph: onnx.GraphProto, node: onnx.NodeProto, factor: np.ndarray,
                      shift: np.ndarray) -> onnx.NodeProto:
    weight_name, bias_name = f"{node.name}/scale", f"{node.name}/shift"
    g.set_initializer(graph, weight_name, factor.astype(np.float32).reshape(-1, 1, 1, 1))
    g.set_initializer(graph, bias_name, shift.astype(np.float32).reshape(-1))
    return helper.make_node("Conv", [node.input[0], weight_name, bias_name], [node.output[0]], name=node.name,
                            group=int(factor.size), kernel_shape=[1, 1])
