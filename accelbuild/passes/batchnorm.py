"""Fold BatchNormalization into the Conv, ConvTranspose or Gemm before it (exact up to float rounding),
(``fold_scale_shift``) a constant Mul or Add after a Conv or ConvTranspose into its weights and bias, and
(``fold_input_scale``) a constant Mul that only convolutions read into their weights, after (``fold_pad``) a
zero Pad that only convolutions read into their ``pads``.

PP-OCRv4's backbone (PP-LCNetV3) follows each convolution with a learnable scalar scale and shift, exported as
``Mul(conv, s)`` and ``Add(_, b)``: two elementwise operators per layer on an accelerator (PP-OCRv4 det on
Ethos-U55-128: 56 of its 129 Add and Mul operators, a third of its cycles), none once folded, as TensorFlow's
converter folds them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from accelbuild.util import onnx_graph as g


def fold_batchnorm(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    notes = []
    producers = g.producers(graph)  # both indexes kept current by each fold: the graph is walked once
    uses = g.ReaderIndex(graph)
    for bn in [n for n in graph.node if n.op_type == "BatchNormalization" and len(n.output) == 1]:
        producer = producers.get(bn.input[0])
        if producer is None or uses.sole_consumer(graph, bn.input[0]) is not bn:
            continue
        params = [g.constant(graph, name) for name in bn.input[1:5]]
        if any(p is None for p in params):
            continue
        scale, bias, mean, var = (p.astype(np.float64) for p in params)  # type: ignore[union-attr]
        factor = scale / np.sqrt(var + float(g.attribute(bn, "epsilon", 1e-5)))
        shift = bias - mean * factor
        if _fold_into(graph, producer, factor, shift, uses):
            del producers[bn.input[0]]
            producers[bn.output[0]] = producer
            producer.output[0] = bn.output[0]
            uses.forget(bn, g.node_reads(bn))
            graph.node.remove(bn)
            notes.append(f"{bn.name} into {producer.name}")
    return notes


def fold_scale_shift(model: onnx.ModelProto) -> list[str]:
    graph = model.graph

    def fold(node: onnx.NodeProto, producers: dict[str, onnx.NodeProto], uses: g.ReaderIndex) -> str | None:
        if node.op_type not in ("Mul", "Add") or len(node.input) != 2:
            return None
        match = _affine_operand(model, producers, uses, node)
        if match is None:
            return None
        producer, channel_values = match
        factor = channel_values if node.op_type == "Mul" else np.ones_like(channel_values)
        shift = channel_values if node.op_type == "Add" else np.zeros_like(channel_values)
        if not _fold_into(graph, producer, factor, shift):
            return None
        producer.output[0] = node.output[0]
        graph.node.remove(node)
        return f"{node.op_type} {node.name} into {producer.name}"
    return _until_nothing_folds(graph, fold)  # Conv -> Mul -> Add: the Add reads the Conv once the Mul is folded


def fold_input_scale(model: onnx.ModelProto) -> list[str]:
    """``Conv(x * s)`` as ``Conv'(x)``: a float constant ``s`` (one value, or one per channel for ungrouped
    convolutions) scales the weights' input channels. NFNet exports two such scalars per block (the
    activation's gain and the block's input scale), each a full pass of a vector unit when left; zero padding
    commutes with the scale, so the fold is exact up to float rounding."""
    graph = model.graph

    def fold(node: onnx.NodeProto, producers: dict[str, onnx.NodeProto], uses: g.ReaderIndex) -> str | None:
        scale = _input_scale(model, producers, uses, node)
        if scale is None:
            return None
        data, value = scale
        convs = g.readers(graph, node.output[0])
        for conv in convs:
            _scale_inputs(graph, conv, value)
            conv.input[0] = data
        graph.node.remove(node)
        return f"Mul {node.name} into {', '.join(c.name for c in convs)}"
    return _until_nothing_folds(graph, fold)  # Mul -> Mul -> Conv: the first feeds the Conv once the second folds


def _until_nothing_folds(graph: onnx.GraphProto,
                         fold: Callable[[onnx.NodeProto, dict[str, onnx.NodeProto], g.ReaderIndex], str | None]
                         ) -> list[str]:
    """``fold`` (which changes the graph and says how, or returns None) on the first node it takes, from the
    top again after each, until it takes none: one fold can make the next possible. ``fold`` gets the round's
    producers and readers (current until it changes the graph, which ends the round)."""
    notes: list[str] = []
    while True:
        producers, uses = g.producers(graph), g.ReaderIndex(graph)
        note = next((n for n in (fold(node, producers, uses) for node in list(graph.node)) if n is not None), None)
        if note is None:
            return notes
        notes.append(note)


def fold_pad(model: onnx.ModelProto) -> list[str]:
    """A zero Pad of the spatial axes that only convolutions read, as their ``pads``: TensorFlow's and timm's
    "same" padding of strided convolutions exports as an asymmetric Pad before them, an elementwise pass of the
    whole feature map on an accelerator when left, where every convolution pads as it reads."""
    graph = model.graph
    notes: list[str] = []
    for pad in [n for n in graph.node if n.op_type == "Pad"]:
        amounts = _spatial_zero_pads(model, pad)
        convs = g.readers(graph, pad.output[0])
        if amounts is None or not convs or pad.output[0] in g.graph_output_names(graph) or \
                any(c.op_type != "Conv" or list(c.input).index(pad.output[0]) != 0 or
                    g.attribute(c, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET") for c in convs):
            continue
        for conv in convs:
            spatial = len(amounts) // 2
            old = list(g.attribute(conv, "pads", [0] * 2 * spatial))
            _set_attr(conv, "pads", [a + b for a, b in zip(old, amounts)])
            conv.input[0] = pad.input[0]
        graph.node.remove(pad)
        notes.append(f"{pad.name} into {', '.join(c.name for c in convs)}")
    return notes


def _spatial_zero_pads(model: onnx.ModelProto, pad: onnx.NodeProto) -> list[int] | None:
    """The Pad's spatial amounts in a Conv's ``pads`` order (begins, then ends) when it pads only the axes
    after N and C, by non-negative amounts, with zeros; else None."""
    graph = model.graph
    mode = g.attribute(pad, "mode", b"constant")
    if mode not in (b"constant", "constant") or len(pad.input) < 2:
        return None
    amounts = g.constant(graph, pad.input[1])
    fill = g.constant(graph, pad.input[2]) if len(pad.input) > 2 and pad.input[2] else None
    shape = g.static_shape(model, pad.input[0])
    axes_given = len(pad.input) > 3 and pad.input[3]
    if amounts is None or axes_given or shape is None or len(shape) < 3 or amounts.size != 2 * len(shape) or \
            (fill is not None and np.any(fill != 0)):
        return None
    begins, ends = [int(v) for v in amounts[:len(shape)]], [int(v) for v in amounts[len(shape):]]
    if begins[:2] != [0, 0] or ends[:2] != [0, 0] or min(begins + ends) < 0:
        return None
    return begins[2:] + ends[2:]


def _input_scale(model: onnx.ModelProto, producers: dict[str, onnx.NodeProto], uses: g.ReaderIndex,
                 node: onnx.NodeProto) -> tuple[str, np.ndarray] | None:
    """``(x, s)`` when ``node`` is ``x * s`` with ``s`` a float constant that every reader of its output, all of
    them convolutions with constant float weights, can take into its weights."""
    graph = model.graph
    if node.op_type != "Mul" or len(node.input) != 2 or node.output[0] in g.graph_output_names(graph):
        return None
    convs = uses.of(node.output[0])
    if not convs or any(c.op_type != "Conv" or list(c.input).index(node.output[0]) != 0 for c in convs):
        return None
    for data, other in ((node.input[0], node.input[1]), (node.input[1], node.input[0])):
        value = g.constant(graph, other)
        if value is None or g.constant(graph, data) is not None:
            continue
        if value.dtype != np.float32 or _ends_erf_gelu(producers, data) or \
                any(not _takes_scale(graph, conv, value) for conv in convs):
            return None
        return data, value
    return None


def _ends_erf_gelu(producers: dict[str, onnx.NodeProto], data: str) -> bool:
    """``data`` is x * (1 + erf(...)): the Mul by 0.5 after it completes the erf-form GELU, which accelerators
    run as one activation (npu fusion chains name it); folding the 0.5 away would leave four elementwise ops."""
    chain = [producers.get(data)]
    for op in ("Mul", "Add", "Erf"):
        node = chain[-1]
        if node is None or node.op_type != op:
            return False
        chain.append(next((producers[i] for i in node.input if i in producers and
                           producers[i].op_type == {"Mul": "Add", "Add": "Erf", "Erf": "Div"}[op]), None))
    return chain[-1] is not None


def _takes_scale(graph: onnx.GraphProto, conv: onnx.NodeProto, value: np.ndarray) -> bool:
    weight = g.constant(graph, conv.input[1])
    if weight is None or weight.dtype != np.float32 or value.ndim > weight.ndim:
        return False
    if value.size == 1:
        return True
    shape = (1,) * (weight.ndim - value.ndim) + value.shape
    return int(g.attribute(conv, "group", 1)) == 1 and shape[1] == weight.shape[1] and \
        all(d == 1 for i, d in enumerate(shape) if i != 1)


def _scale_inputs(graph: onnx.GraphProto, conv: onnx.NodeProto, value: np.ndarray) -> None:
    weight = g.constant(graph, conv.input[1])
    assert weight is not None
    shape = [1] * weight.ndim
    shape[1] = 1 if value.size == 1 else weight.shape[1]
    scaled = (weight.astype(np.float64) * value.astype(np.float64).reshape(shape)).astype(np.float32)
    name = _private_name(graph, conv.input[1], conv)
    g.set_initializer(graph, name, scaled)
    conv.input[1] = name


def _affine_operand(model: onnx.ModelProto, producers: dict[str, onnx.NodeProto], uses: g.ReaderIndex,
                    node: onnx.NodeProto) -> tuple[onnx.NodeProto, np.ndarray] | None:
    """``(the Conv, one value per output channel)`` when ``node`` multiplies or offsets the sole output of a
    Conv / ConvTranspose by a float constant that is one value or one per output channel (shape ``[C, 1, 1]``)."""
    graph = model.graph
    for data, other in ((node.input[0], node.input[1]), (node.input[1], node.input[0])):
        producer = producers.get(data)
        value = g.constant(graph, other)
        if producer is None or producer.op_type not in ("Conv", "ConvTranspose") or value is None:
            continue
        if value.dtype != np.float32 or uses.sole_consumer(graph, data) is not node \
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


def _fold_into(graph: onnx.GraphProto, node: onnx.NodeProto, factor: np.ndarray, shift: np.ndarray,
               uses: g.ReaderIndex | None = None) -> bool:
    """Scale the producer's weights per output channel and fold the shift into its bias (``uses``: the
    caller's index of readers, kept current)."""
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
    before = g.node_reads(node) if uses is not None else []
    weight_name = _private_name(graph, node.input[1], node, uses)
    g.set_initializer(graph, weight_name, new_weight)
    node.input[1] = weight_name
    if uses is not None:
        uses.update(node, before)
        before = g.node_reads(node)
    new_bias_name = _private_name(graph, bias_name or f"{node.name}.bias", node, uses)
    g.set_initializer(graph, new_bias_name, new_bias)
    if len(node.input) > 2:
        node.input[2] = new_bias_name
    else:
        node.input.append(new_bias_name)
    if uses is not None:
        uses.update(node, before)
    return True


def _private_name(graph: onnx.GraphProto, name: str, owner: onnx.NodeProto,
                  uses: g.ReaderIndex | None = None) -> str:
    """Reuse ``name`` if only ``owner`` reads it, else a fresh name (shared weights stay intact)."""
    readers = g.readers(graph, name) if uses is None else uses.of(name)  # a subgraph's read keeps its own copy
    if readers == [owner] or not readers:
        return name
    fresh, k = f"{name}.{owner.name}", 1
    existing = {t.name for t in graph.initializer}
    while fresh in existing:
        fresh, k = f"{name}.{owner.name}.{k}", k + 1
    return fresh


def _set_attr(node: onnx.NodeProto, name: str, value: float | list[int]) -> None:
    for attr in node.attribute:
        if attr.name == name:
            node.attribute.remove(attr)
            break
    node.attribute.append(onnx.helper.make_attribute(name, value))
