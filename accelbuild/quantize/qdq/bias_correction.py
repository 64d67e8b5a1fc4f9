"""Bias correction: remove the mean output shift that weight quantization causes.

Quantizing weights W to W_q shifts a layer's mean output by (W_q - W) . E[x]; with the per-channel mean
E[x] of the layer's input measured during calibration, that shift is subtracted from the bias (Nagel
et al., "Data-Free Quantization Through Weight Equalization and Bias Correction", 2019). Border
padding is ignored (it would make the shift depend on the position).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from accelbuild.quantize.weights import WeightedLayer
from accelbuild.util import onnx_graph as g

Shift = Callable[[np.ndarray], np.ndarray]


class ChannelMean:
    """Running mean of a tensor per channel (along ``axis``) over frames."""

    def __init__(self, axis: int) -> None:
        self.axis, self.count = axis, 0
        self.total: np.ndarray | None = None

    def add(self, values: np.ndarray) -> None:
        moved = np.moveaxis(np.asarray(values, dtype=np.float64), self.axis, -1)
        flat = moved.reshape(-1, moved.shape[-1])
        self.total = flat.sum(axis=0) if self.total is None else self.total + flat.sum(axis=0)
        self.count += flat.shape[0]

    @property
    def mean(self) -> np.ndarray:
        if self.total is None:
            raise ValueError("a channel mean needs at least one frame")
        return self.total / self.count


def input_axis(node: onnx.NodeProto) -> int | None:
    """The channel axis of a layer's activation input that its weights contract, if supported."""
    if node.op_type == "Conv":
        return 1
    if node.op_type == "Gemm":
        return 0 if int(g.attribute(node, "transA", 0)) else 1
    if node.op_type == "MatMul":
        return -1
    return None  # ConvTranspose scatters its input: no per-channel shift without the geometry


def output_shift(node: onnx.NodeProto, layer: WeightedLayer, mean: np.ndarray) -> Shift | None:
    """A function from the weight error (W_q - W) to the mean output shift per output channel."""
    if node.op_type == "Conv":
        groups = int(g.attribute(node, "group", 1))
        outputs, per_group = layer.shape[0], layer.shape[1]
        if mean.size != groups * per_group:
            return None
        inputs = mean.reshape(groups, per_group)[np.arange(outputs) // (outputs // groups)]  # [M, C/g]

        def conv(delta: np.ndarray) -> np.ndarray:
            summed = delta.astype(np.float64).reshape(outputs, per_group, -1).sum(axis=2)  # over the kernel
            return np.einsum("mc,mc->m", summed, inputs)
        return conv
    if node.op_type in ("Gemm", "MatMul") and len(layer.shape) == 2:
        k_axis = 1 - layer.axis  # the weight axis contracted with the input
        if mean.size != layer.shape[k_axis]:
            return None
        return lambda delta: np.tensordot(delta.astype(np.float64), mean, axes=([k_axis], [0]))
    return None
