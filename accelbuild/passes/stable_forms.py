"""Rewrite float patterns that exporters spell awkwardly into the forms accelerators compute well.

- ``fuse_leaky_relu``: ``Max(x, a * x)`` with a constant ``0 <= a < 1`` is LeakyReLU as some converters
  export it; as two nodes it splits NPU subgraphs and quantizes worse, as ``LeakyRelu(alpha=a)`` it is one
  fused activation.
- ``clip_from_bound``: ``Max(x, c)`` / ``Min(x, c)`` with one constant ``c`` is a one-sided Clip (openWakeWord
  writes ``Max(LeakyRelu(x), -0.4)``); as Max it is a binary op with a constant that NPUs leave to the host
  (19 subgraphs on tda4vm), as ``Clip`` it is an activation they run.
- ``stable_variance``: variance written ``E[x^2] - E[x]^2`` (decomposed LayerNorm, GroupNorm) subtracts
  two nearly equal numbers; in bfloat16 or 8-bit arithmetic the difference cancels to noise (a model lost
  its accuracy on mx3, cosine 0.4-0.5). ``E[(x - E[x])^2]`` is the same mathematics without cancellation.

Both are exact rewrites in real arithmetic; import verifies the result in onnxruntime like every pass.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from accelbuild.util import onnx_graph as g


def fuse_leaky_relu(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    producers = g.producers(graph)
    notes = []
    for node in list(graph.node):
        if node.op_type != "Max" or len(node.input) != 2:
            continue
        match = _leaky_operands(graph, producers, node)
        if match is None:
            continue
        x, alpha, mul = match
        leaky = helper.make_node("LeakyRelu", [x], list(node.output), name=node.name, alpha=alpha)
        index = list(graph.node).index(node)
        graph.node.remove(node)
        graph.node.insert(index, leaky)
        if not g.readers(graph, mul.output[0]) and mul.output[0] not in g.graph_output_names(graph):
            graph.node.remove(mul)
        notes.append(f"Max {node.name} of {x} and {alpha:g} * {x} -> LeakyRelu")
    return notes


def _leaky_operands(graph: onnx.GraphProto, producers: dict[str, onnx.NodeProto],
                    node: onnx.NodeProto) -> tuple[str, float, onnx.NodeProto] | None:
    """``(x, a, the Mul)`` when ``node`` is ``Max(x, a * x)`` (either order) with one constant ``0 <= a < 1``."""
    for x, scaled in (node.input, reversed(node.input)):
        mul = producers.get(scaled)
        if mul is None or mul.op_type != "Mul" or x not in mul.input:
            continue
        other = mul.input[1] if mul.input[0] == x else mul.input[0]
        value = g.constant(graph, other)
        if value is None or value.size == 0 or not np.all(value == value.reshape(-1)[0]):
            continue
        if any(d != 1 for d in value.shape):  # several equal values could still broadcast x larger
            continue
        alpha = float(value.reshape(-1)[0])
        if 0.0 <= alpha < 1.0:
            return x, alpha, mul
    return None


def clip_from_bound(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    notes = []
    for node in list(graph.node):
        if node.op_type not in ("Max", "Min") or len(node.input) != 2:
            continue
        bound = _scalar_operand(graph, node)
        if bound is None:
            continue
        x, value = bound
        name = f"{node.name}/bound"
        graph.initializer.append(numpy_helper.from_array(np.array(value, np.float32), name))
        inputs = [x, name] if node.op_type == "Max" else [x, "", name]
        clip = helper.make_node("Clip", inputs, list(node.output), name=node.name)
        index = list(graph.node).index(node)
        graph.node.remove(node)
        graph.node.insert(index, clip)
        notes.append(f"{node.op_type} {node.name} of {x} and {value:g} -> Clip")
    if notes:
        g.prune(graph)
    return notes


def _scalar_operand(graph: onnx.GraphProto, node: onnx.NodeProto) -> tuple[str, float] | None:
    """``(x, c)`` when one input of ``node`` is a float constant of equal values that cannot broadcast ``x``."""
    for x, other in (node.input, reversed(node.input)):
        value = g.constant(graph, other)
        if value is None or g.constant(graph, x) is not None or value.dtype.kind != "f" or value.size == 0:
            continue
        if any(d != 1 for d in value.shape) or not np.all(value == value.reshape(-1)[0]):
            continue
        if not np.isfinite(value.reshape(-1)[0]):
            continue
        return x, float(value.reshape(-1)[0])
    return None


def stable_variance(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    producers = g.producers(graph)
    notes = []
    for node in list(graph.node):
        if node.op_type != "Sub":
            continue
        match = _variance_operands(model, producers, node)
        if match is None:
            continue
        x, mean, reduction, mean_keeps_axes = match
        base = node.name
        centred, squared = f"{base}/centred", f"{base}/centred_sq"
        keepdims = bool(g.attribute(reduction, "keepdims", 1))
        replacement = []
        if not mean_keeps_axes:
            kept = f"{base}/mean_kept"  # a mean without its reduced axes: put them back to broadcast against x
            replacement.append(helper.make_node("Unsqueeze", [mean, reduction.input[1]], [kept], name=kept))
            mean = kept
        replacement += [
            helper.make_node("Sub", [x, mean], [centred], name=f"{base}/centre"),
            helper.make_node("Mul", [centred, centred], [squared], name=f"{base}/square"),
            helper.make_node("ReduceMean", [squared, *reduction.input[1:]], list(node.output), name=base,
                             keepdims=int(keepdims)),
        ]
        index = list(graph.node).index(node)
        graph.node.remove(node)
        for offset, new in enumerate(replacement):
            graph.node.insert(index + offset, new)
        notes.append(f"variance {base}: E[x^2] - E[x]^2 -> E[(x - E[x])^2]")
    if notes:
        g.prune(graph)
    return notes


def _variance_operands(model: onnx.ModelProto, producers: dict[str, onnx.NodeProto],
                       node: onnx.NodeProto) -> tuple[str, str, onnx.NodeProto, bool] | None:
    """``(x, the tensor holding E[x], the reduction computing E[x^2], whether E[x] kept its axes)`` when ``node`` is ``E[x^2] - E[x]^2``
    with both means over the same axes. A mean is a ReduceMean, or a ReduceSum times 1/N (JAX and TF
    export it so: Magika's LayerNorm)."""
    graph = model.graph
    mean_of_squares = _mean_of(model, producers, producers.get(node.input[0]))
    mean_name = _square_of(graph, producers.get(node.input[1]))
    mean = _mean_of(model, producers, producers.get(mean_name)) if mean_name else None
    if mean_of_squares is None or mean is None:
        return None
    squared_x = _square_of(graph, producers.get(mean_of_squares[0]))
    if squared_x is None or mean[0] != squared_x:
        return None
    (_, axes_sq, _, reduction), (_, axes, keep, _) = mean_of_squares, mean
    if axes is None or axes != axes_sq or len(reduction.input) < 2:
        return None
    return squared_x, mean_name, reduction, keep  # type: ignore[return-value]


def _mean_of(model: onnx.ModelProto, producers: dict[str, onnx.NodeProto],
             node: onnx.NodeProto | None) -> tuple[str, tuple[int, ...] | None, bool, onnx.NodeProto] | None:
    """``(x, axes, keepdims, the reduce node)`` when ``node`` computes the mean of ``x``: ``ReduceMean(x)``,
    or ``ReduceSum(x) * c`` / ``ReduceSum(x) / n`` where ``c`` is 1 / the number of values reduced."""
    if node is None:
        return None
    if node.op_type == "ReduceMean":
        axes, keep = g.reduction(model.graph, node)
        return node.input[0], axes, keep, node
    if node.op_type not in ("Mul", "Div") or len(node.input) != 2:
        return None
    for summed, other in ((node.input[0], node.input[1]), (node.input[1], node.input[0])):
        reduce = producers.get(summed)
        factor = g.constant(model.graph, other)
        if reduce is None or reduce.op_type != "ReduceSum" or factor is None or factor.size != 1:
            continue
        if node.op_type == "Div" and summed != node.input[0]:
            continue
        axes, keep = g.reduction(model.graph, reduce)
        shape = g.static_shape(model, reduce.input[0])
        if axes is None or shape is None:
            return None
        count = int(np.prod([shape[a] for a in axes]))
        value = float(factor.reshape(-1)[0])
        scale = 1.0 / value if node.op_type == "Div" else value
        if count and abs(scale * count - 1.0) < 1e-6:
            return reduce.input[0], axes, keep, reduce
        return None
    return None


def _square_of(graph: onnx.GraphProto, node: onnx.NodeProto | None) -> str | None:
    """The tensor ``node`` squares (``Mul(t, t)`` or ``Pow(t, 2)``), or None."""
    if node is None:
        return None
    if node.op_type == "Mul" and len(node.input) == 2 and node.input[0] == node.input[1]:
        return node.input[0]
    if node.op_type == "Pow":
        exponent = g.constant(graph, node.input[1])
        if exponent is not None and exponent.size == 1 and float(exponent.reshape(-1)[0]) == 2.0:
            return node.input[0]
    return None
