"""Fold BatchNormalization into the Conv, ConvTranspose or Gemm before it (exact up to float rounding), and
(``fold_scale_shift``) a constant Mul or Add after a Conv or ConvTranspose into its weights and bias.

PP-OCRv4's backbone (PP-LCNetV3) follows each convolution with a learnable scalar scale and shift, exported as
``Mul(conv, s)`` and ``Add(_, b)``: two elementwise operators per layer on an accelerator (PP-OCRv4 det on
Ethos-U55-128: 56 of its 129 Add and Mul operators, a third of its cycles), none once folded, as TensorFlow's
converter folds them.
"""

from __future__ import annotations

import numpy as np
import onnx

from accelbuild.util import onnx_graph as g


def fold_batchnorm(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    notes = []
    for bn in [n for n in graph.node if n.op_type == "BatchNormalization" and len(n.output) == 1]:
        producer = g.producers(graph).get(bn.input[0])
        if producer is None or g.sole_consumer(graph, bn.input[0]) is not bn:
            continue
        params = [g.constant(graph, name) for name in bn.input[1:5]]
        if any(p is None for p in params):
            continue
        scale, bias, mean, var = (p.astype(np.float64) for p in params)  # type: ignore[union-attr]
        factor = scale / np.sqrt(var + float(g.attribute(bn, "epsilon", 1e-5)))
        shift = bias - mean * factor
        if _fold_into(graph, producer, factor, shift):
            producer.output[0] = bn.output[0]
            graph.node.remove(bn)
            notes.append(f"{bn.name} into {producer.name}")
    return notes


def fold_scale_shift(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    notes: list[str] = []
    folded = True
    while folded:  # Conv -> Mul -> Add: the Add reads the Conv once the Mul is folded
        folded = False
        producers = g.producers(graph)
        for node in graph.node:
            if node.op_type not in ("Mul", "Add") or len(node.input) != 2:
                continue
            match = _affine_operand(model, producers, node)
            if match is None:
                continue
            producer, channel_values = match
            factor = channel_values if node.op_type == "Mul" else np.ones_like(channel_values)
            shift = channel_values if node.op_type == "Add" else np.zeros_like(channel_values)
            if _fold_into(graph, producer, factor, shift):
                producer.output[0] = node.output[0]
                graph.node.remove(node)
                notes.append(f"{node.op_type} {node.name} into {producer.name}")
                folded = True
                break
    return notes


def _affine_operand(model: onnx.ModelProto, producers: dict[str, onnx.NodeProto],
                    node: onnx.NodeProto) -> tuple[onnx.NodeProto, np.ndarray] | None:
    """``(the Conv, one value per output channel)`` when ``node`` multiplies or offsets the sole output of a
    Conv / ConvTranspose by a float constant that is one value or one per output channel (shape ``[C, 1, 1]``)."""
    graph = model.graph
    for data, other in ((node.input[0], node.input[1]), (node.input[1], node.input[0])):
        producer = producers.get(data)
        value = g.constant(graph, other)
        if producer is None or producer.op_type not in ("Conv", "ConvTranspose") or value is None:
            continue
        if value.dtype != np.float32 or g.sole_consumer(graph, data) is not node \
                or data in g.graph_output_names(graph):
            return None
        weight = g.constant(graph, producer.input[1])
        if weight is None:
            return None
        channels = weight.shape[1] * int(g.attribute(producer, "group", 1)) if producer.op_type == "ConvTranspose" \
            else weight.shape[0]
        rank = weight.ndim
        if value.ndim > rank:
            return None
        shape = (1,) * (rank - value.ndim) + value.shape
        if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, channels):
            return None
        return producer, np.broadcast_to(value.reshape(-1).astype(np.float64), (channels,)).copy()
    return None


def _fold_into(graph: onnx.GraphProto, node: onnx.NodeProto, factor: np.ndarray, shift: np.ndarray) -> bool:
    """Scale the producer's weights per output channel and fold the shift into its bias."""
    if node.op_type == "Conv":
        axis, channels_at = 0, 0
    elif node.op_type == "ConvTranspose" and int(g.attribute(node, "group", 1)) == 1:
        axis, channels_at = 1, 1  # weights [in, out, kh, kw]: output channels on axis 1 (DBNet's upsampling head)
    elif node.op_type == "Gemm" and float(g.attribute(node, "alpha", 1.0)) == 1.0:
        axis = 0 if int(g.attribute(node, "transB", 0)) else 1
        channels_at = axis
    else:
        return False
    weight = g.constant(graph, node.input[1])
    if weight is None or weight.shape[channels_at] != factor.size or weight.dtype != np.float32:
        return False
    bias_name = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    bias = g.constant(graph, bias_name) if bias_name else np.zeros(factor.size, np.float32)
    if bias is None or bias.shape != (factor.size,):
        return False
    if node.op_type == "Gemm":
        bias = bias * float(g.attribute(node, "beta", 1.0))
        _set_attr(node, "beta", 1.0)
    shape = [1] * weight.ndim
    shape[axis] = factor.size
    new_weight = (weight.astype(np.float64) * factor.reshape(shape)).astype(np.float32)
    new_bias = (bias.astype(np.float64) * factor + shift).astype(np.float32)
    weight_name = _private_name(graph, node.input[1], node)
    g.set_initializer(graph, weight_name, new_weight)
    node.input[1] = weight_name
    new_bias_name = _private_name(graph, bias_name or f"{node.name}.bias", node)
    g.set_initializer(graph, new_bias_name, new_bias)
    if len(node.input) > 2:
        node.input[2] = new_bias_name
    else:
        node.input.append(new_bias_name)
    return True


def _private_name(graph: onnx.GraphProto, name: str, owner: onnx.NodeProto) -> str:
    """Reuse ``name`` if only ``owner`` reads it, else a fresh name (shared weights stay intact)."""
    readers = g.readers(graph, name)  # a subgraph reading the weight keeps its own copy
    if readers == [owner] or not readers:
        return name
    fresh, k = f"{name}.{owner.name}", 1
    existing = {t.name for t in graph.initializer}
    while fresh in existing:
        fresh, k = f"{name}.{owner.name}.{k}", k + 1
    return fresh


def _set_attr(node: onnx.NodeProto, name: str, value: float) -> None:
    for attr in node.attribute:
        if attr.name == name:
            node.attribute.remove(attr)
            break
    node.attribute.append(onnx.helper.make_attribute(name, value))
