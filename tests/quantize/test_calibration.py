"""Activation calibration on planted distributions: bounded exact histograms and the four methods."""

from __future__ import annotations

import numpy as np
import pytest

from accelbuild.quantize.calibration import (
    METHODS,
    TensorStats,
    choose_range,
    quant_params,
)


def frames(values: np.ndarray, n: int) -> list[np.ndarray]:
    return np.array_split(values, n)


def stats_of(*parts: np.ndarray, bins: int = 2048) -> TensorStats:
    stats = TensorStats(bins)
    for part in parts:
        stats.add(part)
    return stats


def normal(n: int = 200_000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


@pytest.mark.parametrize("symmetric", [True, False])
def test_an_outlier_moves_minmax_but_not_percentile(symmetric: bool) -> None:
    clean = normal()
    spiked = clean.copy()
    spiked[1234] = 80.0
    ranges = {}
    for name, values in [("clean", clean), ("spiked", spiked)]:
        stats = stats_of(*frames(values, 8))
        for method in ("minmax", "percentile"):
            ranges[name, method] = choose_range(stats, method, 8, symmetric, percentile=99.99)
    assert ranges["spiked", "minmax"][1] == 80.0 and ranges["clean", "minmax"][1] < 6.0
    clean_hi, spiked_hi = ranges["clean", "percentile"][1], ranges["spiked", "percentile"][1]
    assert 3.0 < clean_hi < 5.0 and abs(spiked_hi - clean_hi) < 0.05 * clean_hi


@pytest.mark.parametrize("method", ["entropy", "mse", "percentile"])
@pytest.mark.parametrize("symmetric", [True, False])
def test_heavy_tails_are_clipped_below_the_max_and_lose_less_than_minmax(method: str, symmetric: bool) -> None:
    values = np.random.default_rng(1).laplace(size=400_000).astype(np.float32)
    stats = stats_of(*frames(values, 4))
    low, high = choose_range(stats, method, 8, symmetric)
    assert high < 0.85 * float(values.max()) and low > 0.85 * float(values.min())

    def error(lo_hi: tuple[float, float]) -> float:
        params = quant_params(*lo_hi, 8, symmetric)
        return float(np.mean(np.square(params.dequantize(params.quantize(values)) - values)))

    assert error((low, high)) < 0.8 * error(choose_range(stats, "minmax", 8, symmetric))


@pytest.mark.parametrize("method", ["entropy", "mse"])
def test_relu_outputs_keep_their_zeros_out_of_the_clip_choice(method: str) -> None:
    values = np.maximum(np.random.default_rng(2).laplace(size=400_000), 0).astype(np.float32)
    low, high = choose_range(stats_of(values), method, 8, symmetric=False)
    assert low == 0.0 and 0.5 * values.max() < high < values.max()


@pytest.mark.parametrize("method", METHODS)
def test_deterministic_and_independent_of_frame_order(method: str) -> None:
    values = np.random.default_rng(3).standard_t(3, 100_000).astype(np.float32) * np.float32(0.1)
    parts = frames(values, 10)
    parts[7] = parts[7] * np.float32(20)  # a late frame with a much larger range re-bins the histogram
    forward, backward = stats_of(*parts), stats_of(*parts[::-1])
    assert np.array_equal(forward.counts, backward.counts) and forward.exponent == backward.exponent
    assert choose_range(forward, method, 8, True) == choose_range(backward, method, 8, True)
    assert choose_range(forward, method, 8, True) == choose_range(stats_of(*parts), method, 8, True)


def test_merging_statistics_equals_collecting_everything() -> None:
    a, b = normal(50_000, 4) * np.float32(0.01), normal(50_000, 5) * np.float32(3)
    merged = TensorStats.merged([stats_of(a), stats_of(b)])
    together = stats_of(a, b)
    assert np.array_equal(merged.counts, together.counts) and merged.exponent == together.exponent
    assert (merged.min, merged.max, merged.count, merged.zeros) == (together.min, together.max, 100_000, 0)


def test_memory_is_bounded_by_the_bin_count() -> None:
    stats = TensorStats(bins=256)
    rng = np.random.default_rng(6)
    for k in range(50):
        stats.add(rng.standard_normal(1000).astype(np.float32) * np.float32(2.0 ** (k % 12)))
    assert stats.counts.shape == (512,) and stats.counts.sum() == 50_000 and stats.frames == 50
    assert 2.0 ** 11 * 3 < stats.width * 256 <= 2.0 ** 11 * 12  # the largest frame fits, in the upper half


def test_quant_params_grids() -> None:
    sym = quant_params(-2.0, 1.0, 8, symmetric=True)
    assert (sym.zero_point, sym.signed, sym.dtype) == (0, True, np.int8) and sym.scale == np.float32(2.0 / 127)
    relu = quant_params(0.0, 5.1, 8, symmetric=True)
    assert (relu.zero_point, relu.signed, relu.dtype) == (0, False, np.uint8) and relu.scale == np.float32(0.02)
    assert quant_params(0.0, 5.1, 8, symmetric=True, unsigned_nonnegative=False).dtype == np.int8
    asym = quant_params(-1.0, 3.0, 8, symmetric=False)
    assert asym.dtype == np.int8 and asym.zero_point == -64 and asym.scale == np.float32(4.0 / 255)
    assert asym.quantize(np.array([-1.0, 0.0, 3.0])).tolist() == [-128, -64, 127]
    wide = quant_params(1.0, 4.0, 16, symmetric=False)  # a range always includes zero
    assert (wide.low, wide.dtype, wide.zero_point) == (0.0, np.int16, -32768)
    assert quant_params(0.0, 0.0, 8, symmetric=False).scale == 1.0
    with pytest.raises(ValueError):
        quant_params(-1.0, 1.0, 4, symmetric=True)


def test_sixteen_bits_do_not_clip_with_entropy() -> None:
    values = np.random.default_rng(7).laplace(size=100_000).astype(np.float32)
    stats = stats_of(values)
    assert choose_range(stats, "entropy", 16, True)[1] >= 0.99 * float(np.abs(values).max())


def test_bad_values_and_methods() -> None:
    stats = TensorStats()
    stats.add(np.array([1.0, np.nan, -np.inf, -2.0], np.float32))  # a masked tensor: its finite values count
    assert (stats.min, stats.max, stats.non_finite, stats.count) == (-2.0, 1.0, 2, 2)
    with pytest.raises(ValueError, match="unknown calibration method"):
        choose_range(stats_of(normal(100)), "kl", 8, True)  # type: ignore[arg-type]
    assert choose_range(TensorStats(), "entropy", 8, True) == (0.0, 0.0)
    assert choose_range(stats_of(np.zeros(10, np.float32)), "mse", 8, True) == (0.0, 0.0)


def test_entropy_never_clips_into_the_bulk_of_a_distribution_far_from_zero() -> None:
    logits = (np.random.default_rng(8).standard_normal(200_000) - 10.0).astype(np.float32)  # class logits
    low, high = choose_range(stats_of(logits), "entropy", 8, symmetric=False)
    assert low <= float(np.quantile(logits, 0.01)) and high == 0.0


def test_sixteen_bits_never_clip_with_percentile_or_entropy() -> None:
    """At 16 bits the rounding step is already tiny: clipping the rare outliers only adds error."""
    values = np.concatenate([np.random.default_rng(0).normal(size=100_000), [80.0]]).astype(np.float32)
    stats = stats_of(values)
    assert choose_range(stats, "percentile", 8, False)[1] < 10  # 8 bits: the outlier is clipped
    for method in ("percentile", "entropy"):
        assert choose_range(stats, method, 16, False) == (float(values.min()), 80.0)
