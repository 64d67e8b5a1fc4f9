"""Activation range calibration: stream frames into bounded per-tensor statistics, then choose a range.

Statistics (``TensorStats``): exact min, max and element count, and a histogram of fixed size (``2 *
bins`` counters) symmetric around zero whose bin width is a power of two. A frame with a larger
magnitude doubles the width, merging neighbouring bins pairwise; because every edge of the coarser grid
is an edge of the finer one, this re-binning (and merging statistics of several tensors) is exact, so
results do not depend on the order frames arrive in beyond that re-binning, and memory does not grow
with the number of frames. The used part of the histogram always spans at least ``bins / 2`` bins.

Methods (``choose_range``), every range includes zero and lies within [min, max]:

- ``minmax``: [min, max].
- ``percentile``: [-t, t] clamped to [min, max], t the ``percentile`` of |x| (as TensorRT and
  onnxruntime define it); the quantile interpolates inside a bin.
- ``entropy``: TensorRT's KL-divergence calibration on the |x| histogram without exact zeros: the
  threshold whose clipped and requantized distribution (``2^(bits-1)`` levels, ``2^bits`` for tensors
  quantized one-sided) is closest to the reference; up to ``MAX_CANDIDATES`` evenly spaced thresholds
  are tried, none clipping more than ``MAX_ENTROPY_CLIPPED`` (0.01 %, the default percentile's tail)
  of the values. KL against the clipped reference does not see how far clipped values move: unbounded,
  it cuts into the bulk of distributions far from zero (a detector's all-negative class logits) and
  clips SiLU and hard-swish networks hard enough to lose several dB at their outputs (bench/ptq.py).
- At 16 bits, ``percentile`` and ``entropy`` take [min, max]: 65,536 levels resolve the whole range finer
  than 256 resolve a clipped one, so clipping only adds error (a raised layer whose outliers carry the
  signal, e.g. a detector's rare positive logits, would otherwise stay clipped however many bits it gets).
- ``mse``: the clip range with the least expected squared error (uniform rounding noise ``step^2/12``
  inside the range, squared distance outside it) over ``MSE_RATIOS`` candidate shrink factors of the
  largest magnitude; asymmetric ranges refine each end in turn.

Quantization parameters (``quant_params``) follow ONNX QuantizeLinear: symmetric ranges use zero point
0 on the signed grid (scale = t / (2^(bits-1) - 1)), or, when the tensor is never negative and
``unsigned_nonnegative`` is set, the unsigned grid 0..2^bits-1 (TIDL's choice for ReLU outputs);
asymmetric ranges use the signed grid with a zero point (TFLite's int8 convention).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Method = Literal["minmax", "percentile", "entropy", "mse"]
METHODS: tuple[str, ...] = ("minmax", "percentile", "entropy", "mse")
ACTIVATION_BITS = (8, 16)
DEFAULT_BINS = 2048
MAX_CANDIDATES = 128
MAX_ENTROPY_CLIPPED = 1e-4  # fraction of the (non-zero) values an entropy threshold may clip
MIN_EXPONENT = -100  # narrowest bin 2^-100: float32 scaling by its inverse cannot overflow
MSE_RATIOS = 2.0 ** (-np.arange(0, 161) / 16.0)  # 1 down to 2^-10, 16 steps per octave


class TensorStats:
    """Bounded running statistics of one tensor over frames (see the module docstring)."""

    def __init__(self, bins: int = DEFAULT_BINS, histogram: bool = True) -> None:
        if bins < 2 or bins % 2:
            raise ValueError("bins must be an even number >= 2")
        self.bins = bins
        self.min = math.inf
        self.max = -math.inf
        self.count = 0
        self.zeros = 0  # values exactly 0: every grid represents them without error
        self.frames = 0
        self.non_finite = 0  # values +-inf or NaN: left out of the range
        self.exponent: int | None = None  # bin width is 2**exponent; None until a non-zero value
        self.counts = np.zeros(2 * bins, dtype=np.int64) if histogram else None

    @property
    def width(self) -> float:
        return math.ldexp(1.0, self.exponent) if self.exponent is not None else 0.0

    def add(self, values: np.ndarray) -> None:
        """One frame's values of the tensor (any shape, float)."""
        flat = np.asarray(values, dtype=np.float32).ravel()
        self.frames += 1
        finite = np.isfinite(flat)
        if not finite.all():  # a -inf mask before a Softmax: no grid holds it; quantized, it saturates
            self.non_finite += int(flat.size - np.count_nonzero(finite))
            flat = flat[finite]
        if flat.size == 0:
            return
        low, high = float(flat.min()), float(flat.max())
        self.min, self.max, self.count = min(self.min, low), max(self.max, high), self.count + flat.size
        if self.counts is None:
            return
        self.zeros += flat.size - int(np.count_nonzero(flat))
        peak = max(-low, high)
        if peak > 0:
            self._cover(peak)
        if self.exponent is None:
            self.counts[self.bins] += flat.size  # all zero so far: bin [0, w) whatever w becomes
            return
        # scaling by a power of two and flooring are exact, so re-binning by pairwise merges is too
        index = np.floor(flat * np.float32(math.ldexp(1.0, -self.exponent))).astype(np.int64)
        index += self.bins
        np.clip(index, 0, 2 * self.bins - 1, out=index)
        self.counts += np.bincount(index, minlength=2 * self.bins)

    def _cover(self, peak: float) -> None:
        """Grow the bin width (by exact pairwise merges) until ``bins * width > peak``."""
        _, exponent = math.frexp(peak / self.bins)  # 2**(exponent-1) <= peak/bins < 2**exponent
        exponent = max(exponent, MIN_EXPONENT)
        if self.exponent is None:
            self.exponent = exponent
            return
        while self.exponent < exponent:
            self._coarsen()

    def _coarsen(self) -> None:
        assert self.counts is not None and self.exponent is not None
        half = self.bins // 2
        merged = np.zeros_like(self.counts)
        merged[half:half + self.bins] = self.counts.reshape(self.bins, 2).sum(axis=1)
        self.counts, self.exponent = merged, self.exponent + 1

    @classmethod
    def merged(cls, parts: Sequence[TensorStats]) -> TensorStats:
        """One statistics of all values of ``parts`` (tensors sharing one quantization)."""
        if not parts:
            raise ValueError("nothing to merge")
        result = cls(parts[0].bins, histogram=all(p.counts is not None for p in parts))
        for part in parts:
            if part.bins != result.bins:
                raise ValueError("cannot merge statistics with different bin counts")
            result.min, result.max = min(result.min, part.min), max(result.max, part.max)
            result.count += part.count
            result.zeros += part.zeros
            result.frames = max(result.frames, part.frames)
            if result.counts is None or part.counts is None:
                continue
            counts, exponent = part.counts.copy(), part.exponent
            if exponent is not None and result.exponent is None:
                result.exponent = exponent
            if exponent is not None:
                while result.exponent < exponent:
                    result._coarsen()
                aligned = TensorStats(part.bins)
                aligned.counts, aligned.exponent = counts, exponent
                while aligned.exponent < result.exponent:
                    aligned._coarsen()
                counts = aligned.counts
            result.counts += counts
        return result

    def abs_histogram(self) -> np.ndarray:
        """Counts of |x| per bin [k w, (k+1) w), k = 0 .. bins-1."""
        assert self.counts is not None
        return self.counts[self.bins:] + self.counts[:self.bins][::-1]

    def nonzero_counts(self) -> np.ndarray:
        """The histogram without the exact zeros (which no clip range or step size affects)."""
        assert self.counts is not None
        counts = self.counts.copy()
        counts[self.bins] -= self.zeros
        return counts


@dataclass(frozen=True)
class QuantParams:
    """One tensor's quantization: the calibrated range and its QuantizeLinear parameters."""

    low: float
    high: float
    scale: float
    zero_point: int
    bits: int
    signed: bool

    @property
    def qmin(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def qmax(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(f"{'int' if self.signed else 'uint'}{self.bits}")

    def quantize(self, values: np.ndarray) -> np.ndarray:
        """ONNX QuantizeLinear: round half to even, add the zero point, saturate."""
        scaled = np.rint(np.asarray(values, dtype=np.float32) / np.float32(self.scale))
        return np.clip(scaled + self.zero_point, self.qmin, self.qmax).astype(self.dtype)

    def dequantize(self, codes: np.ndarray) -> np.ndarray:
        return ((codes.astype(np.int32) - self.zero_point) * np.float32(self.scale)).astype(np.float32)


def quant_params(low: float, high: float, bits: int, symmetric: bool,
                 unsigned_nonnegative: bool = True) -> QuantParams:
    """Scale and zero point for the range [low, high] (widened to include zero)."""
    if bits not in ACTIVATION_BITS:
        raise ValueError(f"activation bits must be 8 or 16, not {bits}")
    low, high = min(float(low), 0.0), max(float(high), 0.0)
    if symmetric:
        if low >= 0.0 and unsigned_nonnegative:
            scale = high / ((1 << bits) - 1)
            return QuantParams(low, high, _positive(scale), 0, bits, signed=False)
        scale = max(-low, high) / ((1 << (bits - 1)) - 1)
        return QuantParams(low, high, _positive(scale), 0, bits, signed=True)
    scale = _positive((high - low) / ((1 << bits) - 1))
    qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    zero_point = int(np.clip(round(qmin - low / scale), qmin, qmax))
    return QuantParams(low, high, scale, zero_point, bits, signed=True)


def _positive(scale: float) -> float:
    """A float32-representable positive scale (an all-zero tensor gets 1.0, as onnxruntime does)."""
    value = float(np.float32(scale))
    return value if value > 0.0 and math.isfinite(value) else 1.0


def choose_range(stats: TensorStats, method: Method, bits: int, symmetric: bool,
                 percentile: float = 99.99, unsigned_nonnegative: bool = True) -> tuple[float, float]:
    """The clip range [low, high] of ``method`` (see the module docstring)."""
    if stats.count == 0:
        return 0.0, 0.0
    low, high = min(stats.min, 0.0), max(stats.max, 0.0)
    if method == "minmax" or high == low or (bits >= 16 and method in ("percentile", "entropy")):
        return low, high
    if stats.counts is None:
        raise ValueError(f"method {method!r} needs a histogram")
    if method == "percentile":
        if not 0.0 < percentile <= 100.0:
            raise ValueError(f"percentile must be in (0, 100], not {percentile}")
        return _percentile_range(stats, low, high, percentile)
    one_sided = low >= 0.0 and (not symmetric or unsigned_nonnegative)
    if method == "entropy":
        levels = 1 << (bits if one_sided or not symmetric else bits - 1)
        counts = stats.nonzero_counts()
        t = _entropy_threshold(counts[stats.bins:] + counts[:stats.bins][::-1], stats.width, levels)
        return max(low, -t), min(high, t)
    if method == "mse":
        return _mse_range(stats, low, high, bits, symmetric, unsigned_nonnegative)
    raise ValueError(f"unknown calibration method {method!r} (one of {', '.join(METHODS)})")


def _quantile(counts: np.ndarray, edges_low: float, width: float, q: float) -> float:
    """The value below which a fraction ``q`` of the histogram lies (linear inside a bin)."""
    cumulative = np.cumsum(counts, dtype=np.float64)
    target = q * cumulative[-1]
    k = int(np.searchsorted(cumulative, target, side="left"))
    k = min(k, counts.size - 1)
    before = cumulative[k - 1] if k > 0 else 0.0
    inside = (target - before) / counts[k] if counts[k] else 0.0
    return edges_low + (k + float(np.clip(inside, 0.0, 1.0))) * width


def _percentile_range(stats: TensorStats, low: float, high: float, percentile: float) -> tuple[float, float]:
    t = _quantile(stats.abs_histogram(), 0.0, stats.width, percentile / 100.0)
    return max(low, -t), min(high, t)


def _entropy_threshold(hist: np.ndarray, width: float, levels: int) -> float:
    """TensorRT's threshold: the clip of |x| whose ``levels``-level requantization loses least (KL)."""
    used = int(np.flatnonzero(hist)[-1]) + 1 if hist.any() else 0
    if used <= levels:
        return used * width  # every bin gets its own level: nothing to gain from clipping
    tail = np.cumsum(hist[::-1])[::-1] / hist.sum()  # tail[i]: fraction of values in bins >= i
    first = max(levels, int(np.argmax(tail <= MAX_ENTROPY_CLIPPED)))
    step = max(1, -(-(used - first) // MAX_CANDIDATES))
    candidates = list(range(first, used, step)) + [used]
    divergences = [_kl_after_requantization(hist, i, levels) for i in candidates]
    return candidates[int(np.argmin(divergences))] * width  # first minimum: ties keep the smaller clip


def _kl_after_requantization(hist: np.ndarray, i: int, levels: int) -> float:
    reference = hist[:i].astype(np.float64)
    reference[-1] += hist[i:].sum()
    sliced = hist[:i].astype(np.float64)
    nonzero = sliced > 0
    edges = np.floor(np.linspace(0, i, levels + 1)).astype(np.int64)
    starts = edges[:-1]
    sums = np.add.reduceat(sliced, starts)
    occupied = np.add.reduceat(nonzero.astype(np.float64), starts)
    per_bin = np.divide(sums, occupied, out=np.zeros_like(sums), where=occupied > 0)
    expanded = np.repeat(per_bin, np.diff(edges)) * nonzero
    p = reference / reference.sum()
    q_total = expanded.sum()
    if q_total == 0:
        return math.inf
    q = expanded / q_total
    mask = p > 0
    q_masked = np.where(q[mask] > 0, q[mask], 1e-12)  # a reference bin with no quantized mass: large cost
    return float(np.sum(p[mask] * np.log(p[mask] / q_masked)))


def _mse_range(stats: TensorStats, low: float, high: float, bits: int, symmetric: bool,
               unsigned_nonnegative: bool) -> tuple[float, float]:
    width = stats.width
    centres = (np.arange(2 * stats.bins) - stats.bins + 0.5) * width
    weights = stats.nonzero_counts().astype(np.float64)
    keep = weights > 0
    centres, weights = centres[keep], weights[keep]

    def error(lo: float, hi: float) -> float:
        params = quant_params(lo, hi, bits, symmetric, unsigned_nonnegative)
        s = params.scale
        edge_lo, edge_hi = (params.qmin - params.zero_point) * s, (params.qmax - params.zero_point) * s
        clipped = np.clip(centres, edge_lo, edge_hi)
        err = np.where(centres == clipped, s * s / 12.0, np.square(centres - clipped))
        return float(np.dot(weights, err))

    def best(make: Callable[[float], tuple[float, float]]) -> tuple[float, float]:
        ranges = [make(r) for r in MSE_RATIOS]
        errors = [error(lo, hi) for lo, hi in ranges]
        lo, hi = ranges[int(np.argmin(errors))]
        return float(lo), float(hi)

    if symmetric:
        peak = max(-low, high)
        if low >= 0.0 and unsigned_nonnegative:
            return best(lambda r: (0.0, r * high))
        chosen = best(lambda r: (-r * peak, r * peak))
        return max(low, chosen[0]), min(high, chosen[1])
    lo, hi = low, high
    for _ in range(2):  # coordinate descent: the upper end, then the lower one
        hi = best(lambda r, lo=lo: (lo, r * high))[1]
        lo = best(lambda r, hi=hi: (r * low, hi))[0]
    return lo, hi
