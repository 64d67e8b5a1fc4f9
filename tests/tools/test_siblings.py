"""tools/siblings.py: its series are real series of the credibility set, and a step's quotients (no builds)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from tools import siblings

ROOT = Path(__file__).resolve().parents[2]



def test_every_series_is_of_networks_with_points_built_at_the_same_bits() -> None:
    points = siblings.credibility.POINTS
    for platform, series_list in siblings.SERIES.items():
        for series in series_list:
            assert len(series) >= 2 and len(set(series)) == len(series), series
            bits = {p.bits for p in points if p.platform == platform and p.network in series}
            assert {p.network for p in points if p.platform == platform} >= set(series), series
            assert len(bits) == 1, f"{series}: built at {bits}"
            assert siblings.series_metric(platform, series)  # one published figure all of them have


def test_a_step_divides_the_published_and_the_simulated_time_by_the_macs() -> None:
    run = [{"platform": "x5", "points": [
        {"network": "fastvit_t8", "metric": "fps", "simulated": 400.0, "left_out_ratio": 2.0},
        {"network": "fastvit_t12", "metric": "fps", "simulated": 250.0, "left_out_ratio": 1.0},
        {"network": "fastvit_s12", "metric": "fps", "simulated": 200.0, "left_out_ratio": None}]}]
    macs = {"fastvit_t8": 500, "fastvit_t12": 1000, "fastvit_s12": 1250}
    first, second = siblings.steps("x5", ("fastvit_t8", "fastvit_t12", "fastvit_s12"), macs, run)
    assert (first.smaller, first.larger, first.metric) == ("fastvit_t8", "fastvit_t12", "fps")
    assert first.mac_ratio == 2.0 and second.mac_ratio == 1.25
    # published: 667.21 and 234.78 FPS (frames in flight), so times 1000 / FPS
    assert first.time_ratio == pytest.approx(667.21 / 234.78)
    assert first.per_mac == pytest.approx(667.21 / 234.78 / 2.0)
    assert first.model_per_mac == pytest.approx((400.0 / 250.0) / 2.0)
    assert second.model_per_mac == pytest.approx((250.0 / 200.0) / 1.25)
    # left out: each published time times its left-out ratio (a time ratio), where the run has one
    assert first.left_out_per_mac == pytest.approx(667.21 / 234.78 * (1.0 / 2.0) / 2.0)
    assert second.left_out_per_mac is None


def test_a_series_without_frame_rates_compares_latencies() -> None:
    edgenext = ("edgenext_xx_small", "edgenext_x_small")
    assert siblings.series_metric("x5", edgenext) == "latency_ms"
    assert siblings.series_metric("x5", ("fastvit_t8", "fastvit_t12")) == "fps"
    assert siblings.series_metric("mlsoc", ("vgg11_tv", "vgg16_tv")) == "accelerator_ms"  # SiMa's zoo: the MLA alone
    with pytest.raises(ValueError, match="share no published figure"):
        siblings.series_metric("mlsoc", ("resnet50", "resnet101"))
    run = [{"platform": "x5", "points": [{"network": n, "metric": "latency_ms", "simulated": 2.0, "left_out_ratio": 1.1}
                                         for n in edgenext]}]
    (step,) = siblings.steps("x5", edgenext, {edgenext[0]: 1, edgenext[1]: 2}, run)
    assert step.time_ratio == pytest.approx(2.88 / 2.47) and step.model_per_mac == 0.5


def test_two_figures_can_both_be_in_the_band_only_where_the_quotients_are_close() -> None:

    def step(model_time_ratio: float) -> object:
        return siblings.Step("a", "b", "fps", mac_ratio=2.0, time_ratio=2.8, model_time_ratio=model_time_ratio)

    # the larger network's predicted / published ratio over the smaller one's is model / published
    assert step(2.8).both_can_be_within(0.2)
    assert step(2.8 * 0.8 / 1.2 * 1.001).both_can_be_within(0.2)  # smaller at 1.2x, larger at 0.8x
    assert not step(2.8 * 0.8 / 1.2 * 0.99).both_can_be_within(0.2)
    assert not step(1.54).both_can_be_within(0.2)                 # FastViT-T8 -> T12 as the page says: 0.77 / 1.40
    assert step(2.8 * 1.2 / 0.8 * 0.999).both_can_be_within(0.2) and not step(2.8 * 1.5 * 1.01).both_can_be_within(0.2)


def test_the_pages_sibling_figures_are_the_stored_runs() -> None:
    """docs/credibility.md quotes tools/siblings.py. A step's model quotient over the published one is the two
    networks' predicted / published ratios divided, so the stored run alone checks those quotes: a refit that
    moves them fails here until the page says the new figures."""
    run = json.loads(siblings.credibility.RESULTS.read_text())["results"]
    limits = " ".join(siblings.credibility.LIMITS.split())
    gaps, left_out_gaps = [], []
    for platform, series_list in siblings.SERIES.items():
        for series in series_list:
            metric = siblings.series_metric(platform, series)
            for a, b in zip(series, series[1:]):
                ra, rb = (siblings.stored_row(run, platform, n, metric) for n in (a, b))
                gaps.append(abs(rb["simulated_ratio"] / ra["simulated_ratio"] - 1))
                left_out_gaps.append(abs(rb["left_out_ratio"] / ra["left_out_ratio"] - 1))
    assert len(gaps) == 57 and "57 steps" in limits
    assert f"a median {statistics.median(gaps):.1%} apart" in limits
    assert f"and {statistics.median(left_out_gaps):.1%} (" in limits
    # FastViT-T8 -> T12 at the MAC ratio the page gives
    mac_ratio = float(re.search(r"for ([\d.]+)x the MACs", limits).group(1))
    per_mac = siblings.published_ms("x5", "fastvit_t12", "fps") / siblings.published_ms("x5", "fastvit_t8", "fps") \
        / mac_ratio
    t8, t12 = (siblings.stored_row(run, "x5", n, "fps") for n in ("fastvit_t8", "fastvit_t12"))
    model = per_mac * t12["simulated_ratio"] / t8["simulated_ratio"]
    left_out = per_mac * t12["left_out_ratio"] / t8["left_out_ratio"]
    assert f"spends {per_mac:.2f}x T8's time per MAC" in limits
    assert f"the model gives {model:.2f}x ({left_out:.2f}x left out)" in limits
