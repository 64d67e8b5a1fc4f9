"""Which layers carry weights, along which axis their output channels lie, and the integer math.

Symmetric per-output-channel quantization on the grid [-qmax, qmax], qmax = 2^(bits-1) - 1 (the most
negative code is never used, which keeps the grid symmetric around zero). Each channel's scale is
``ratio * max|w_c| / qmax`` with the clipping ratio in [0.5, 1] that gives the smallest squared error of
that channel's weights: ratio 1 is plain max-abs scaling; at 4 bits, clipping a few outliers usually
buys a finer step for all the other weights. Channels with fewer than 64 weights (depthwise kernels) keep
max-abs scaling: there each weight matters and clipping the largest costs more than it saves (measured
with bench/quantize.py). All-zero channels get scale 1 and stay exactly zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from accelbuild.quantize.precision import BITS, packed_size
from accelbuild.util import onnx_graph as g


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


CLIP_RATIOS = np.linspace(0.5, 1.0, 26)
MIN_CLIP_SEARCH = 64  # with fewer weights per channel (depthwise 3x3) the largest one matters most


def quantize(weight: np.ndarray, bits: int, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes (int8 for 4/8 bits, int16 for 16) and float32 scales, one per channel on ``axis``."""
    if bits not in BITS:
        raise ValueError(f"unsupported weight precision {bits}")
    rows = np.moveaxis(weight, axis, 0).reshape(weight.shape[axis], -1).astype(np.float64)
    scales = _best_scales(rows, qmax(bits))
    codes = np.clip(np.rint(rows / scales[:, None].astype(np.float64)), -qmax(bits), qmax(bits))
    moved_shape = np.moveaxis(weight, axis, 0).shape
    codes = np.moveaxis(codes.reshape(moved_shape), 0, axis)
    return codes.astype(np.int16 if bits == 16 else np.int8), scales


def _best_scales(rows: np.ndarray, top: int) -> np.ndarray:
    """Per row, the float32 scale among the clipping ratios with the least squared error."""
    peak = np.max(np.abs(rows), axis=1)
    best = np.where(peak > 0, peak / top, 1.0).astype(np.float32)
    best_error = np.full(rows.shape[0], np.inf)
    if rows.shape[1] < MIN_CLIP_SEARCH:
        return best
    for ratio in CLIP_RATIOS[::-1]:  # ratio 1 first: ties keep plain max-abs scaling
        scale = np.where(peak > 0, ratio * peak / top, 1.0).astype(np.float32)
        step = scale.astype(np.float64)[:, None]
        error = np.sum(np.square(rows - np.clip(np.rint(rows / step), -top, top) * step), axis=1)
        better = error < best_error
        best = np.where(better, scale, best)
        best_error = np.where(better, error, best_error)
    return best


def dequantize(codes: np.ndarray, scales: np.ndarray, axis: int) -> np.ndarray:
    shape = [1] * codes.ndim
    shape[axis] = -1
    return (codes.astype(np.float32) * scales.reshape(shape)).astype(np.float32)


def sqnr_db(reference: np.ndarray, approx: np.ndarray, cap: float = 200.0) -> float:
    """Signal-to-quantization-noise ratio in dB, capped (an exact copy has no noise); ``-cap`` when a NaN or
    infinity of one is not matched by the other (``comparable``)."""
    pair = comparable(reference, approx)
    if pair is None:
        return -cap
    reference, approx = pair
    signal = float(np.sum(np.square(reference, dtype=np.float64)))
    noise = float(np.sum(np.square(reference.astype(np.float64) - approx, dtype=np.float64)))
    if noise == 0.0:
        return cap
    if signal == 0.0:
        return -cap
    return float(min(cap, 10.0 * np.log10(signal / noise)))


def comparable(reference: np.ndarray, approx: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The two flat vectors with the positions where both hold the same NaN or infinity left out (they agree
    there), or None when a NaN or infinity remains in either: no finite figure compares them. All finite:
    the vectors as they are."""
    reference, approx = np.asarray(reference), np.asarray(approx)
    finite_ref, finite_approx = np.isfinite(reference), np.isfinite(approx)
    if finite_ref.all() and finite_approx.all():
        return reference, approx
    same = ~finite_ref & ~finite_approx & ((np.isnan(reference) & np.isnan(approx)) | (reference == approx))
    reference, approx = reference[~same], approx[~same]
    if not (np.isfinite(reference).all() and np.isfinite(approx).all()):
        return None
    return reference, approx


def cosine_similarity(reference: np.ndarray, approx: np.ndarray) -> float:
    """Cosine of two flat vectors; two zero vectors agree (1.0), a zero against a non-zero does not (0.0);
    -1.0, the worst a cosine can be, when a NaN or infinity of one is not matched by the other (``comparable``)."""
    pair = comparable(reference, approx)
    if pair is None:
        return -1.0
    reference, approx = pair
    norm = float(np.linalg.norm(reference) * np.linalg.norm(approx))
    return float(np.dot(reference, approx) / norm) if norm else (1.0 if np.array_equal(reference, approx) else 0.0)


def max_abs_err(reference: np.ndarray, approx: np.ndarray) -> float:
    """The largest absolute difference over the positions where it is finite (0.0 when there are none)."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: NaN, left out below
        diff = np.abs(np.asarray(reference, dtype=np.float64) - approx)
    finite = diff[np.isfinite(diff)]
    return float(np.max(finite)) if finite.size else 0.0


def weight_bytes(count: int, bits: int) -> int:
    """Bytes of packed weights (4-bit weights pack two to a byte); scales are not counted."""
    return packed_size(count, bits)
