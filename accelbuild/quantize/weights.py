"""Which layers carry weights, along which axis their output channels lie, and the integer math.

Symmetric per-output-channel quantization: scale_c = max|w_c| / qmax with qmax = 2^(bits-1) - 1, so
q = round(w / scale) lies in [-qmax, qmax] (the most negative code is never used, which keeps the
grid symmetric around zero). All-zero channels get scale 1 and stay exactly zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from accelbuild.passes import graph as g

BITS = (4, 8, 16)


@dataclass(frozen=True)
class WeightedLayer:
    """A node whose weight input is a float constant we quantize."""

    name: str
    op: str
    weight: str       # initializer name
    input_index: int  # where the weight enters the node
    axis: int         # output-channel axis of the weight tensor
    shape: tuple[int, ...]

    @property
    def count(self) -> int:
        return int(np.prod(self.shape))


def weighted_layers(model: onnx.ModelProto) -> list[WeightedLayer]:
    """Conv (incl. depthwise/grouped), ConvTranspose, Gemm and MatMul with a constant float weight."""
    graph = model.graph
    inits = g.initializers(graph)
    layers = []
    for node in graph.node:
        if node.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul") or len(node.input) < 2:
            continue
        tensor = inits.get(node.input[1])
        if tensor is None or tensor.data_type != onnx.TensorProto.FLOAT or len(tensor.dims) < 2:
            continue
        layers.append(WeightedLayer(node.name, node.op_type, tensor.name, 1,
                                    _channel_axis(node, len(tensor.dims)), tuple(tensor.dims)))
    return layers


def _channel_axis(node: onnx.NodeProto, rank: int) -> int:
    if node.op_type == "Conv":
        return 0                       # [M, C/group, kh, kw]
    if node.op_type == "ConvTranspose":
        return 1                       # [C, M/group, kh, kw]
    if node.op_type == "Gemm":
        return 0 if int(g.attribute(node, "transB", 0)) else 1
    return rank - 1                    # MatMul: [..., K, N]


def qmax(bits: int) -> int:
    return (1 << (bits - 1)) - 1


def quantize(weight: np.ndarray, bits: int, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes (int8 for 4/8 bits, int16 for 16) and float32 scales, one per channel on ``axis``."""
    if bits not in BITS:
        raise ValueError(f"unsupported weight precision {bits}")
    moved = np.moveaxis(weight.astype(np.float64), axis, 0)
    peak = np.max(np.abs(moved.reshape(moved.shape[0], -1)), axis=1)
    scales = np.where(peak > 0, peak / qmax(bits), 1.0).astype(np.float32)
    shape = [1] * weight.ndim
    shape[axis] = -1
    codes = np.clip(np.rint(weight / scales.reshape(shape).astype(np.float64)), -qmax(bits), qmax(bits))
    return codes.astype(np.int16 if bits == 16 else np.int8), scales


def dequantize(codes: np.ndarray, scales: np.ndarray, axis: int) -> np.ndarray:
    shape = [1] * codes.ndim
    shape[axis] = -1
    return (codes.astype(np.float32) * scales.reshape(shape)).astype(np.float32)


def sqnr_db(reference: np.ndarray, approx: np.ndarray, cap: float = 200.0) -> float:
    """Signal-to-quantization-noise ratio in dB, capped (an exact copy has no noise)."""
    signal = float(np.sum(np.square(reference, dtype=np.float64)))
    noise = float(np.sum(np.square(reference.astype(np.float64) - approx, dtype=np.float64)))
    if noise == 0.0:
        return cap
    if signal == 0.0:
        return -cap
    return float(min(cap, 10.0 * np.log10(signal / noise)))


def weight_bytes(count: int, bits: int) -> int:
    """Bytes of packed weights (4-bit weights pack two to a byte); scales are not counted."""
    return (count * bits + 7) // 8
