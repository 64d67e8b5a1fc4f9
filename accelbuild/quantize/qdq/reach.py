"""Ranges of graph outputs that a Conv writes, widened to what the Conv can reach from its inputs' channels.

A tensor inside the network is clipped to its calibrated range on purpose: the rounding of its readers is
what matters there. A graph output has no reader in the network, so a wider range costs only its own step,
while a frame that drives it past the calibration frames' extremes saturates exactly the values the model
is most certain of (a detector's strongest "no face here" logits). With every input channel k of the Conv
within [lo_k, hi_k] (its minimum and maximum on the calibration frames, cut to the input's quantized range,
widened to include the zero of padding), output channel o lies within

    b_o + sum over k and taps of (max(w, 0) * lo_k + min(w, 0) * hi_k)  ..  (the same with lo and hi swapped)

so the output's range is widened to cover that interval: it saturates only when an input channel leaves what
calibration saw of it. A Relu or constant-bound Clip fused with the Conv cuts the interval as it cuts the
values; an output that a node of the network reads as well keeps its calibrated range. Measured on MediaPipe's short-range face detector (int8, TFLite conventions): crops of its
calibration photographs whose score logits reach -473 where the calibration frames reached -167 saturate
(cosine 0.946 against float); covered, 0.998. Applied with TFLite conventions (``QdqConfig(conventions=
"tflite")``); the widened range is recorded as the tensor's ``reachable_from_inputs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx

from accelbuild.quantize.calibration import QuantParams
from accelbuild.quantize.qdq import rules
from accelbuild.quantize.qdq.plan import Plan
from accelbuild.quantize.qdq.saturation import Requantize
from accelbuild.util import onnx_graph as g

INPUT_AXIS = 1  # a Conv's channels


@dataclass(frozen=True)
class Head:
    """A Conv whose output (or its fused activation's) is a source of a group holding a graph output."""

    group: int
    conv: str        # node name
    input: str       # the Conv's quantized input tensor
    activation: str  # the fused activation node's name, or ""


def heads(graph: onnx.GraphProto, plan: Plan) -> list[Head]:
    """The Convs behind the sources of every group that holds a graph output and that no node outside the
    group reads (a tensor the network reads on keeps its range for its readers)."""
    outputs = g.graph_output_names(graph)
    producers, consumers = g.producers(graph), g.consumers(graph)
    found = []
    for gid, group in plan.groups.items():
        members = set(group.members)
        if group.fixed is not None or not members & outputs or any(
                not set(reader.output) <= members for m in members for reader in consumers.get(m, [])):
            continue
        for source in group.sources:
            node, activation = producers.get(source), ""
            if node is not None and rules.fusible_activation(graph, node) and node.input[0] in plan.fused:
                activation = node.name
                node = producers.get(node.input[0])
            if node is not None and _constant_conv(graph, node) and node.input[0] in plan.group_of:
                found.append(Head(gid, node.name, node.input[0], activation))
    return found


def _constant_conv(graph: onnx.GraphProto, node: onnx.NodeProto) -> bool:
    if node.op_type != "Conv" or len(node.input) < 2:
        return False
    weight = g.constant(graph, node.input[1])
    bias = g.constant(graph, node.input[2]) if len(node.input) > 2 and node.input[2] else np.zeros(1)
    return weight is not None and weight.ndim >= 3 and bias is not None


def widen(graph: onnx.GraphProto, plan: Plan, groups: Mapping[int, QuantParams], found: list[Head],
          channel_ranges: Mapping[str, tuple[np.ndarray, np.ndarray]],
          requantize: Requantize) -> tuple[dict[int, QuantParams], dict[int, tuple[float, float]]]:
    """``groups`` with each head's group covering its reachable interval, and the intervals per widened group."""
    nodes = {n.name: n for n in graph.node}
    reached: dict[int, tuple[float, float]] = {}
    for head in found:
        if head.input not in channel_ranges:
            continue
        source = groups[plan.group_of[head.input]]
        lo, hi = channel_ranges[head.input]
        lo = np.minimum(np.maximum(lo, source.low), 0.0)  # the Conv sees its input's quantized range, and padding
        hi = np.maximum(np.minimum(hi, source.high), 0.0)
        low, high = reachable(nodes[head.conv], graph, lo, hi)
        if head.activation:
            low, high = _activated(graph, nodes[head.activation], low, high)
        before = reached.get(head.group, (low, high))
        reached[head.group] = (min(before[0], low), max(before[1], high))
    widened, applied = dict(groups), {}
    for gid, (low, high) in reached.items():
        params = groups[gid]
        if low < params.low or high > params.high:
            widened[gid] = requantize(min(params.low, low), max(params.high, high), params.bits)
            applied[gid] = (low, high)
    return widened, applied


def reachable(node: onnx.NodeProto, graph: onnx.GraphProto, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float]:
    """The interval a Conv's outputs lie in when input channel k lies in [lo[k], hi[k]] (see the module)."""
    weight = np.asarray(g.constant(graph, node.input[1]), dtype=np.float64)
    outputs, per_group = weight.shape[0], weight.shape[1]
    groups = int(g.attribute(node, "group", 1))
    bias = g.constant(graph, node.input[2]) if len(node.input) > 2 and node.input[2] else None
    b = np.zeros(outputs) if bias is None else np.asarray(bias, dtype=np.float64).reshape(-1)
    channel = (np.arange(outputs) // (outputs // groups))[:, None] * per_group + np.arange(per_group)[None, :]
    low_in, high_in = lo[channel], hi[channel]  # [outputs, per_group]: each output's input channels
    positive, negative = np.maximum(weight, 0).reshape(outputs, per_group, -1).sum(axis=2), \
        np.minimum(weight, 0).reshape(outputs, per_group, -1).sum(axis=2)
    low = b + (positive * low_in + negative * high_in).sum(axis=1)
    high = b + (positive * high_in + negative * low_in).sum(axis=1)
    return float(low.min()), float(high.max())


def _activated(graph: onnx.GraphProto, node: onnx.NodeProto, low: float, high: float) -> tuple[float, float]:
    """The interval after a fused Relu or constant-bound Clip."""
    if node.op_type == "Relu":
        return max(low, 0.0), max(high, 0.0)
    bounds = [g.constant(graph, name) if name else None for name in list(node.input[1:3]) + [""] * 2][:2]
    floor = float(bounds[0].reshape(-1)[0]) if bounds[0] is not None else -np.inf
    ceiling = float(bounds[1].reshape(-1)[0]) if bounds[1] is not None else np.inf
    return float(np.clip(low, floor, ceiling)), float(np.clip(high, floor, ceiling))


class ChannelRange:
    """Running minimum and maximum of a tensor per channel (along ``axis``) over frames."""

    def __init__(self, axis: int = INPUT_AXIS) -> None:
        self.axis = axis
        self.low: np.ndarray | None = None
        self.high: np.ndarray | None = None

    def add(self, values: np.ndarray) -> None:
        moved = np.moveaxis(np.asarray(values, dtype=np.float64), self.axis, -1)
        flat = moved.reshape(-1, moved.shape[-1])
        finite = np.isfinite(flat)
        low, high = np.where(finite, flat, np.inf).min(axis=0), np.where(finite, flat, -np.inf).max(axis=0)
        self.low = low if self.low is None else np.minimum(self.low, low)
        self.high = high if self.high is None else np.maximum(self.high, high)

    @property
    def range(self) -> tuple[np.ndarray, np.ndarray]:
        if self.low is None or self.high is None:
            raise ValueError("a channel range needs at least one frame")
        return np.where(np.isfinite(self.low), self.low, 0.0), np.where(np.isfinite(self.high), self.high, 0.0)

