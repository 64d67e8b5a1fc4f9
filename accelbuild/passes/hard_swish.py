"""Hard-swish spelled out by exporters, rewritten as one ``HardSwish`` node.

Paddle (PP-OCR, PP-Structure) and some TensorFlow exports write hard-swish as ``x * Clip(x + 3, 0, 6) / 6``
and its variants. As four nodes it is four quantized tensors and four operators; TFLite's converter and the
NPUs' toolchains recognise it as one activation (a 256-entry table on Ethos-U, fused into the layer before
it). Measured on PP-OCRv4 det with Vela (Ethos-U55-128): 3.56 FPS spelled out, 7.35 FPS through
TFLiteConverter, which fuses it.

Recognised forms, for one tensor ``x`` (operands of Add and Mul in either order):

- ``Mul(x, Clip(Add(x, 3), 0, 6)) / 6`` (``Div`` by 6 or ``Mul`` by 1/6)
- ``Mul(x, Clip(Add(x, 3), 0, 6) / 6)``

``Mul(x, HardSigmoid(x, alpha=1/6, beta=0.5))`` (PyTorch's export below opset 14) is left as it is: it is two
operators already, every family runs HardSigmoid, and phase-1 builds (the tinycls example) hold it.

The rewrite is exact in real arithmetic (``HardSwish(x) = x * max(0, min(1, x / 6 + 1 / 2))``); the
intermediate tensors must have no other reader. Import verifies the result in onnxruntime like every pass.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from accelbuild.passes.opset import default_opset
from accelbuild.util import onnx_graph as g

MIN_OPSET = 14  # HardSwish


def fuse_hard_swish(model: onnx.ModelProto) -> list[str]:
    if default_opset(model) < MIN_OPSET:
        return []
    graph = model.graph
    producers = g.producers(graph)
    uses = g.ReaderIndex(graph)  # the graph changes only after the search
    replaced: dict[int, onnx.NodeProto] = {}  # id of a chain's last node -> its HardSwish
    removed: set[int] = set()
    notes = []
    for node in graph.node:
        if node.op_type not in ("Mul", "Div") or len(node.input) != 2:
            continue
        match = _hard_swish_of(graph, producers, uses, node)
        if match is None or not _broadcasts_into(model, *match):
            continue
        x, chain = match
        replaced[id(node)] = helper.make_node("HardSwish", [x], list(node.output), name=node.name)
        removed.update(id(n) for n in chain[1:])
        notes.append(f"hard-swish {node.name} of {x}: {' + '.join(n.op_type for n in reversed(chain))} -> HardSwish")
    if notes:  # each HardSwish takes its chain's last node's place: x and the chain precede it
        ordered = [replaced.get(id(n), n) for n in graph.node if id(n) not in removed]
        del graph.node[:]
        graph.node.extend(ordered)
    return notes


def _broadcasts_into(model: onnx.ModelProto, x: str, chain: list[onnx.NodeProto]) -> bool:
    """No constant of the chain can broadcast the result larger than ``x``: none has more dimensions than ``x``
    (a one-value constant of rank 0 or 1 never has, short of a scalar ``x``, which no activation is)."""
    ranks = [len(c.shape) for n in chain for name in n.input if (c := g.constant(model.graph, name)) is not None]
    if max(ranks, default=0) <= 1:
        return True
    shape = g.static_shape(model, x)
    return shape is not None and max(ranks) <= len(shape)


def _hard_swish_of(graph: onnx.GraphProto, producers: dict[str, onnx.NodeProto], uses: g.ReaderIndex,
                   node: onnx.NodeProto) -> tuple[str, list[onnx.NodeProto]] | None:
    """``(x, the nodes computing hard-swish of x, last first)`` when ``node`` ends one of the forms above."""
    divided = _scaled_by_sixth(graph, node)
    if divided is not None:  # (x * relu6(x + 3)) / 6
        product = producers.get(divided)
        if product is not None and product.op_type == "Mul" and _private(graph, uses, product, node):
            for x, gate in _operand_orders(product):
                gate_chain = _relu6_of_x_plus_3(graph, producers, uses, gate, x)
                if gate_chain is not None and _private(graph, uses, gate_chain[0], product):
                    return x, [node, product, *gate_chain]
        return None
    if node.op_type != "Mul":
        return None
    for x, gate in _operand_orders(node):  # x * (relu6(x + 3) / 6)
        gate_node = producers.get(gate)
        if gate_node is None or not _private(graph, uses, gate_node, node):
            continue
        scaled = _scaled_by_sixth(graph, gate_node)
        if scaled is not None:
            gate_chain = _relu6_of_x_plus_3(graph, producers, uses, scaled, x)
            if gate_chain is not None and _private(graph, uses, gate_chain[0], gate_node):
                return x, [node, gate_node, *gate_chain]
    return None


def _operand_orders(node: onnx.NodeProto) -> tuple[tuple[str, str], tuple[str, str]]:
    return (node.input[0], node.input[1]), (node.input[1], node.input[0])


def _scaled_by_sixth(graph: onnx.GraphProto, node: onnx.NodeProto) -> str | None:
    """The tensor ``node`` divides by 6 (``Div(t, 6)``, ``Mul(t, 1/6)`` either order), or None."""
    if node.op_type == "Div" and _is_scalar(graph, node.input[1], 6.0):
        return node.input[0]
    if node.op_type == "Mul":
        for t, other in _operand_orders(node):
            if _is_scalar(graph, other, 1.0 / 6.0) and g.constant(graph, t) is None:
                return t
    return None


def _relu6_of_x_plus_3(graph: onnx.GraphProto, producers: dict[str, onnx.NodeProto], uses: g.ReaderIndex,
                       tensor: str, x: str) -> list[onnx.NodeProto] | None:
    """``[Clip, Add]`` when ``tensor`` is ``Clip(Add(x, 3), 0, 6)`` and the Add's output feeds only the Clip."""
    clip = producers.get(tensor)
    if clip is None or clip.op_type != "Clip" or len(clip.input) != 3:
        return None
    if not (_is_scalar(graph, clip.input[1], 0.0) and _is_scalar(graph, clip.input[2], 6.0)):
        return None
    add = producers.get(clip.input[0])
    if add is None or add.op_type != "Add" or not _private(graph, uses, add, clip):
        return None
    if any(t == x and _is_scalar(graph, other, 3.0) for t, other in _operand_orders(add)):
        return [clip, add]
    return None


def _private(graph: onnx.GraphProto, uses: g.ReaderIndex, node: onnx.NodeProto, reader: onnx.NodeProto) -> bool:
    """``node``'s one output is read by ``reader`` alone and is not a graph output."""
    out = node.output[0]
    return (len(node.output) == 1 and uses.sole_consumer(graph, out) is reader
            and out not in g.graph_output_names(graph))


def _is_scalar(graph: onnx.GraphProto, name: str, value: float) -> bool:
    """``name`` is a float constant holding one value (any shape of ones) equal to ``value``."""
    array = g.constant(graph, name)
    if array is None or array.size != 1 or array.dtype.kind != "f":
        return False
    return bool(np.isclose(float(array.reshape(-1)[0]), value, rtol=1e-6, atol=1e-7))

