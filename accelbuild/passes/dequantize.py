"""Undo dynamic quantization at import, so that the target's own quantizer decides precision.

onnxruntime's ``quantize_dynamic`` (and exporters that use it) write a layer as

    DynamicQuantizeLinear(x) -> ConvInteger / MatMulInteger(x_q, W_q, x_zp, W_zp) -> Cast -> Mul(x_scale * W_scale)

and an LSTM as ``com.microsoft.DynamicQuantizeLSTM`` with int8 weights. No accelerator runs those
operators, and their activation quantization is decided per frame on the host. Each such layer becomes
its float form with the dequantized weights ``(W_q - W_zp) * W_scale`` (exactly the values the integer
weights stand for): ``Conv`` / ``MatMul`` reading the float activation, ``LSTM`` with ONNX's weight layout.
What changes is only that the activations are no longer rounded per frame, so outputs move by the
dynamic quantization's own error; import measures and records that difference.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from accelbuild.util import onnx_graph as g

INTEGER_LAYERS = {"ConvInteger": "Conv", "MatMulInteger": "MatMul"}


def dequantize_dynamic(model: onnx.ModelProto) -> list[str]:
    """Rewrite every dynamically quantized layer that matches the patterns above; returns notes."""
    graph = model.graph
    notes = []
    for node in list(graph.node):
        if node.op_type in INTEGER_LAYERS and node.domain in ("", "ai.onnx"):
            note = _integer_layer(graph, node)
        elif node.op_type == "DynamicQuantizeLSTM" and node.domain == "com.microsoft":
            note = _lstm(graph, node)
        else:
            continue
        if note:
            notes.append(note)
    if notes:
        g.prune(graph)
        _drop_unused_domain(model, "com.microsoft")
    return notes


def remaining(model: onnx.ModelProto) -> list[str]:
    """Dynamically quantized nodes the rewrite could not match (their op types, sorted)."""
    names = {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger", "DynamicQuantizeLSTM", "DynamicQuantizeMatMul"}
    return sorted({n.op_type for n in model.graph.node if n.op_type in names})


def _integer_layer(graph: onnx.GraphProto, node: onnx.NodeProto) -> str | None:
    producers, consumers = g.producers(graph), g.consumers(graph)
    quantize = producers.get(node.input[0])
    if quantize is None or quantize.op_type != "DynamicQuantizeLinear":
        return None
    x, x_scale, x_zero = quantize.input[0], quantize.output[1], quantize.output[2]
    if len(node.input) > 2 and node.input[2] and node.input[2] != x_zero:
        return None
    weights = g.constant(graph, node.input[1])
    w_zero = g.constant(graph, node.input[3]) if len(node.input) > 3 and node.input[3] else np.zeros(1)
    cast = _sole_reader(consumers, node.output[0], "Cast")
    scale_mul = _sole_reader(consumers, cast.output[0], "Mul") if cast is not None else None
    if weights is None or w_zero is None or cast is None or scale_mul is None:
        return None
    scales = scale_mul.input[1] if scale_mul.input[0] == cast.output[0] else scale_mul.input[0]
    w_scale = _weight_scale(graph, producers.get(scales), x_scale)
    if w_scale is None:
        return None
    axis = 0 if node.op_type == "ConvInteger" else 1  # Conv: per output channel; MatMul: per output column
    w_float = _dequantized(weights, w_zero, w_scale, axis)
    if w_float is None:
        return None
    name = g_fresh(graph, f"{node.input[1]}_dequantized")
    graph.initializer.append(numpy_helper.from_array(w_float, name))
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    float_layer = helper.make_node(INTEGER_LAYERS[node.op_type], [x, name], list(scale_mul.output), name=node.name,
                                   **attrs)
    index = list(graph.node).index(scale_mul)
    graph.node.insert(index, float_layer)
    for dead in (scale_mul, cast, node):
        graph.node.remove(dead)
    return f"{node.op_type} {node.name} -> {float_layer.op_type} with dequantized {node.input[1]}"


def _sole_reader(consumers: dict[str, list[onnx.NodeProto]], tensor: str, op_type: str) -> onnx.NodeProto | None:
    readers = consumers.get(tensor, [])
    return readers[0] if len(readers) == 1 and readers[0].op_type == op_type else None


def _weight_scale(graph: onnx.GraphProto, product: onnx.NodeProto | None, x_scale: str) -> np.ndarray | None:
    """``W_scale`` from the ``Mul(x_scale, W_scale)`` that scales the integer result."""
    if product is None or product.op_type != "Mul" or x_scale not in product.input:
        return None
    other = product.input[1] if product.input[0] == x_scale else product.input[0]
    return g.constant(graph, other)


def _dequantized(weights: np.ndarray, zero: np.ndarray, scale: np.ndarray, axis: int) -> np.ndarray | None:
    """``(W - zero) * scale`` with per-tensor or per-``axis`` parameters (None for any other layout)."""
    values = weights.astype(np.float64)
    if scale.size == 1 and zero.size == 1:
        return ((values - float(zero.reshape(-1)[0])) * float(scale.reshape(-1)[0])).astype(np.float32)
    if scale.ndim != 1 or scale.size != weights.shape[axis] or zero.size not in (1, scale.size):
        return None
    shape = [1] * weights.ndim
    shape[axis] = scale.size
    zeros = zero.reshape(shape) if zero.size > 1 else zero.reshape([1] * weights.ndim)
    return ((values - zeros) * scale.reshape(shape)).astype(np.float32)


def _lstm(graph: onnx.GraphProto, node: onnx.NodeProto) -> str | None:
    """com.microsoft.DynamicQuantizeLSTM -> LSTM. Its W is [D, input, 4H] and R [D, H, 4H] (ONNX's LSTM
    takes them transposed), each with a scale and zero point per direction or per direction and column."""
    inputs = list(node.input) + [""] * (12 - len(node.input))
    w, r = g.constant(graph, inputs[1]), g.constant(graph, inputs[2])
    w_scale, w_zero, r_scale, r_zero = (g.constant(graph, name) if name else None for name in inputs[8:12])
    if w is None or r is None or w_scale is None or w_zero is None or r_scale is None or r_zero is None:
        return None
    w_float, r_float = _per_direction(w, w_zero, w_scale), _per_direction(r, r_zero, r_scale)
    if w_float is None or r_float is None:
        return None
    w_name = g_fresh(graph, f"{inputs[1]}_dequantized")
    r_name = g_fresh(graph, f"{inputs[2]}_dequantized")
    graph.initializer.extend([numpy_helper.from_array(np.ascontiguousarray(w_float.transpose(0, 2, 1)), w_name),
                              numpy_helper.from_array(np.ascontiguousarray(r_float.transpose(0, 2, 1)), r_name)])
    lstm_inputs = [inputs[0], w_name, r_name, *inputs[3:8]]
    while lstm_inputs and not lstm_inputs[-1]:
        lstm_inputs.pop()
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    lstm = helper.make_node("LSTM", lstm_inputs, list(node.output), name=node.name, **attrs)
    index = list(graph.node).index(node)
    graph.node.insert(index, lstm)
    graph.node.remove(node)
    return f"DynamicQuantizeLSTM {node.name} -> LSTM with dequantized {inputs[1]}, {inputs[2]}"


def _per_direction(q: np.ndarray, zero: np.ndarray, scale: np.ndarray) -> np.ndarray | None:
    """Dequantize [D, rows, cols] with scale/zero of shape [D] (per direction) or [D, cols] (per column)."""
    values = q.astype(np.float64)
    if scale.shape == (q.shape[0],) and zero.shape == (q.shape[0],):
        return ((values - zero[:, None, None]) * scale[:, None, None]).astype(np.float32)
    if scale.shape == (q.shape[0], q.shape[2]) and zero.shape == scale.shape:
        return ((values - zero[:, None, :]) * scale[:, None, :]).astype(np.float32)
    return None


def g_fresh(graph: onnx.GraphProto, name: str) -> str:
    """``name``, or ``name_<k>``, unused by any tensor of the graph."""
    taken = g.defined_names(graph) | {i for n in graph.node for i in n.input}
    candidate, k = name, 0
    while candidate in taken:
        k += 1
        candidate = f"{name}_{k}"
    return candidate


def _drop_unused_domain(model: onnx.ModelProto, domain: str) -> None:
    if any(n.domain == domain for n in model.graph.node):
        return
    kept = [o for o in model.opset_import if o.domain != domain]
    del model.opset_import[:]
    model.opset_import.extend(kept)
