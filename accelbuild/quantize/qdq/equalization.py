"""Depthwise-pointwise equalization: a depthwise convolution's output channels brought to one range before
per-tensor activation quantization (cross-layer equalization, Nagel et al., "Data-Free Quantization Through
Weight Equalization and Bias Correction", 2019, with the activations' measured ranges).

A per-tensor activation gives every channel the step of the widest. In a depthwise-separable block one
depthwise channel can be a hundred times wider than the others (MediaPipe's BlazeFace, its last block: 304
against a median of 3), which leaves the other channels a few codes each, and the network's outputs move
with every small change of any layer before it. When only a group-1 1x1 Conv reads the depthwise Conv's
output, dividing depthwise channel c (weights and bias) by s_c and multiplying the 1x1 weights' input column c
by s_c computes the same function. With r1_c the channel's largest |value| over the calibration frames and
r2_c the largest |weight| of column c, s_c = sqrt(r1_c / r2_c) leaves both at sqrt(r1_c * r2_c).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import onnx

from accelbuild.util import onnx_graph as g

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pair:
    """A depthwise Conv and the 1x1 Conv that alone reads its output."""

    depthwise: str   # node names
    pointwise: str
    output: str      # the depthwise Conv's output tensor


def pairs(model: onnx.ModelProto, float_nodes: Collection[str] = ()) -> list[Pair]:
    """The depthwise -> 1x1 pairs of ``model`` that equalization may rescale: float32 weights (and bias) as
    initializers no other node reads, one output channel per input channel, nothing between the two."""
    graph = model.graph
    inits = g.initializers(graph)
    readers = g.consumers(graph)
    outputs = g.graph_output_names(graph)

    def own_float(name: str, node: onnx.NodeProto) -> bool:
        tensor = inits.get(name)
        return (tensor is not None and tensor.data_type == onnx.TensorProto.FLOAT
                and all(r is node for r in readers.get(name, [])))

    found = []
    for node in graph.node:
        if node.op_type != "Conv" or node.name in float_nodes or len(node.input) < 2 or \
                not own_float(node.input[1], node) or (len(node.input) > 2 and node.input[2] and
                                                       not own_float(node.input[2], node)):
            continue
        dims = tuple(inits[node.input[1]].dims)
        if len(dims) != 4 or dims[1] != 1 or int(g.attribute(node, "group", 1)) != dims[0] or dims[0] < 2:
            continue
        after = readers.get(node.output[0], [])
        if node.output[0] in outputs or len(after) != 1:
            continue
        point = after[0]
        if point.op_type != "Conv" or point.name in float_nodes or point.input[0] != node.output[0] or \
                int(g.attribute(point, "group", 1)) != 1 or not own_float(point.input[1], point):
            continue
        pdims = tuple(inits[point.input[1]].dims)
        if len(pdims) == 4 and pdims[1] == dims[0] and pdims[2:] == (1, 1):
            found.append(Pair(node.name, point.name, node.output[0]))
    return found


def scales(peaks: np.ndarray, pointwise: np.ndarray) -> np.ndarray:
    """s_c = sqrt(r1_c / r2_c) per channel (1 where either range is zero or not finite)."""
    r1 = np.asarray(peaks, dtype=np.float64)
    r2 = np.abs(pointwise.astype(np.float64)).max(axis=(0, 2, 3))
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.sqrt(r1 / r2)
    return np.where(np.isfinite(s) & (s > 0), s, 1.0)


def equalize(model: onnx.ModelProto, found: list[Pair], peaks: dict[str, np.ndarray]) -> list[str]:
    """Rescale each pair in place with the depthwise outputs' per-channel ``peaks`` (max |x|); the names of
    the layers whose weights changed (both of each pair)."""
    graph = model.graph
    nodes = {n.name: n for n in graph.node}
    changed = []
    for pair in found:
        dw, pw = nodes[pair.depthwise], nodes[pair.pointwise]
        point = g.constant(graph, pw.input[1])
        s = scales(peaks[pair.output], point)
        if np.allclose(s, 1.0):
            continue
        g.set_initializer(graph, dw.input[1], (g.constant(graph, dw.input[1]) / s[:, None, None, None])
                          .astype(np.float32))
        if len(dw.input) > 2 and dw.input[2]:
            g.set_initializer(graph, dw.input[2], (g.constant(graph, dw.input[2]) / s).astype(np.float32))
        g.set_initializer(graph, pw.input[1], (point * s[None, :, None, None]).astype(np.float32))
        log.debug("%s -> %s: channel ranges %.3g..%.3g equalized", dw.name, pw.name,
                  float(peaks[pair.output].min()), float(peaks[pair.output].max()))
        changed += [dw.name, pw.name]
    return changed
