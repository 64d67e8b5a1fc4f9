"""Integer weights and biases of one weighted layer, the way integer engines store them.

Weights: per output channel, symmetric, on [-qmax, qmax] (``accelbuild.quantize.weights.quantize``,
with its per-channel clipping search). Bias: int32 with scale ``input_scale * weight_scale`` per
channel, zero point 0, so the engine adds it to the integer accumulator. When a bias would not fit in
int32 (tiny weight scales under 16-bit activations, a large shift folded into a layer with a tiny input
scale), that channel's weight scale is raised until it fits, as onnxruntime's quantizer does, and the
channel's weights are requantized. "Fits" leaves the accumulator room for the products: an engine adds
the bias to an int32 sum of up to ``fan_in * 255 * qmax`` (TFLite's reference kernels wrap around
beyond; PP-OCRv4 det's folded affine blocks hit it: 30 steps off at one convolution).

A convolution kernel with a spatial extent keeps its sums: per output and input channel, the codes add up
to the float kernel's sum in steps, rounded (``keep_kernel_sums``). Rounding each weight to nearest leaves
that sum off by up to a few steps, and a flat patch of the input (an image's sky, a dark background) sees
only the sum: MediaPipe's face detector, with only its first convolution's weights quantized, moved its score
logits to cosine 0.979 on one calibration photograph through that sum alone (1.000 with the same error
less its per-kernel mean, 0.9999 with the sums kept).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from accelbuild.quantize.weights import dequantize, qmax, quantize, sqnr_db

log = logging.getLogger(__name__)

INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class IntegerWeights:
    codes: np.ndarray                 # int8 (8 bits) or int16 (16 bits)
    scales: np.ndarray                # float32, one per output channel
    bias_codes: np.ndarray | None     # int32
    bias_scales: np.ndarray | None    # float32: input scale * weight scale
    sqnr_db: float                    # of the weights
    raised_for_bias: int = 0          # channels whose weight scale was raised so the int32 bias fits


def integer_weights(weight: np.ndarray, axis: int, bits: int, input_scale: float, bias: np.ndarray | None,
                    name: str = "", shift: Callable[[np.ndarray], np.ndarray] | None = None) -> IntegerWeights:
    """``shift`` (bias correction) maps the weight error to the mean output shift it causes; that shift
    is taken off the bias (a missing bias counts as zeros)."""
    codes, scales = quantize(weight, bits, axis)
    codes = keep_kernel_sums(codes, weight, scales, bits, axis)
    if shift is not None:
        error = dequantize(codes, scales, axis) - weight
        base = np.zeros(weight.shape[axis]) if bias is None else bias.astype(np.float64)
        bias = (base - shift(error)).astype(np.float32)
    bias_codes = bias_scales = None
    raised = 0
    if bias is not None:
        room = _bias_room(weight, axis, bits)
        needed = (np.abs(bias.astype(np.float64)) / (np.float64(input_scale) * room)).astype(np.float32)
        low = scales < needed
        if np.any(low):  # reported once per built model (layer records), not per precision-search trial
            raised = int(low.sum())
            log.debug("%s: raised the weight scale of %d channel(s) so the int32 bias fits", name, raised)
            scales = np.where(low, np.nextafter(needed, np.float32(np.inf)), scales).astype(np.float32)
            codes = keep_kernel_sums(_codes(weight, scales, bits, axis), weight, scales, bits, axis)
        bias_scales = (np.float32(input_scale) * scales).astype(np.float32)
        bias_codes = np.clip(np.rint(bias.astype(np.float64) / bias_scales), -room, room).astype(np.int32)
    return IntegerWeights(codes, scales, bias_codes, bias_scales,
                          sqnr_db(weight, dequantize(codes, scales, axis)), raised)


def _bias_room(weight: np.ndarray, axis: int, bits: int) -> int:
    """The largest bias code that an int32 accumulator holds with every product summed onto it (8-bit
    activations, offset by a zero point: at most 255 in magnitude), never below half of int32."""
    fan_in = weight.size // max(weight.shape[axis], 1)
    return max(INT32_MAX - fan_in * 255 * qmax(bits), INT32_MAX // 2)


def _codes(weight: np.ndarray, scales: np.ndarray, bits: int, axis: int) -> np.ndarray:
    shape = [1] * weight.ndim
    shape[axis] = -1
    top = qmax(bits)
    codes = np.clip(np.rint(weight.astype(np.float64) / scales.reshape(shape)), -top, top)
    return codes.astype(np.int16 if bits == 16 else np.int8)


def keep_kernel_sums(codes: np.ndarray, weight: np.ndarray, scales: np.ndarray, bits: int,
                     axis: int) -> np.ndarray:
    """A Conv's codes ([M, C, k...], output channels on axis 0, more than one tap) with each kernel's sum
    brought to its float sum in steps, rounded: the weights whose exact value lies nearest the other side
    of a half step round the other way, one step each, never beyond +-qmax. Other weights unchanged."""
    if axis != 0 or weight.ndim < 3 or int(np.prod(weight.shape[2:])) < 2:
        return codes
    taps = int(np.prod(weight.shape[2:]))
    exact = (weight.astype(np.float64) / scales.astype(np.float64).reshape(-1, *[1] * (weight.ndim - 1)))
    exact = exact.reshape(-1, taps)
    kept = codes.astype(np.int64).reshape(-1, taps)
    top = qmax(bits)
    missing = np.rint(np.clip(exact, -top, top).sum(axis=1)).astype(np.int64) - kept.sum(axis=1)
    step = np.sign(missing)[:, None]
    allowed = np.abs(kept + step) <= top
    toward = np.where(allowed, (exact - kept) * step, -np.inf)  # how far each exact value lies toward the step
    order = np.argsort(-toward, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(taps), order.shape), axis=1)
    kept += ((rank < np.abs(missing)[:, None]) & allowed) * step
    return kept.reshape(codes.shape).astype(codes.dtype)
