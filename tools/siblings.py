"""Published figures against their siblings: does a larger network of a family run its MACs as efficiently?

What is measured
    For each series of one architecture at growing width or depth (``SERIES``, built at the same bits), the
    published time per frame of each network (1000 / FPS where the source gives a frame rate with frames in
    flight, else the single-frame latency) over its MACs on the NPU (the layers accelbuild finds for the
    platform), and for each step of a series: the MAC ratio, the published time ratio and their quotient,
    how much more time the larger network spends per MAC. Beside it, the same quotient of the fitted
    profile's simulated times, from the run the page shows (tools/credibility_results.json), and of its
    left-out predictions (each figure by a fit that did not see its network). The model prices
    a layer by its shape, never by its network, so it moves a family's steps together; and since the two
    quotients' ratio is the two networks' predicted / published ratios divided, both networks are within
    20% only where the model's quotient is within 2/3 to 3/2 of the published one; a step outside that range
    is printed as such (at that quotient, one of its two figures is out of the band, however the fit moves
    the other). Nothing is fitted here: the inputs are the published figures of tools/credibility.py's
    ``POINTS``, that run, and the networks it rebuilds (``--models``: the folder its ``--models`` filled).

    python -m tools.siblings --models DIR [--platforms x5,mlsoc,...] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelbuild.targets.npu.hardware import load_npu_hardware  # noqa: E402
from tools import credibility

# Each series: one architecture, smallest first (larger by width, depth or input size), every member built at the
# same bits and published as the same figure (so RepVGG-B1g4's grouped convolutions, MobileOne-S4's
# squeeze-excitation, FastViT-SA12's attention, EfficientFormerV2-S0's 16-bit build and ResNet-50's MLPerf figures
# on mlsoc stay out: they change the layers or the measurement, not only the size).
SERIES: dict[str, tuple[tuple[str, ...], ...]] = {
    "x5": (
        ("fastvit_t8", "fastvit_t12", "fastvit_s12"),
        ("repvgg_a0", "repvgg_a1", "repvgg_a2"),
        ("mobileone_s0", "mobileone_s1", "mobileone_s2", "mobileone_s3"),
        ("fasternet_t0", "fasternet_t1", "fasternet_t2", "fasternet_s"),
        ("repvit_m0_9", "repvit_m1_0", "repvit_m1_1"),
        ("edgenext_xx_small", "edgenext_x_small", "edgenext_small", "edgenext_base"),
        ("efficientformer_l1", "efficientformer_l3"),
        ("efficientformerv2_s1", "efficientformerv2_s2"),
        ("yolov5nu_640", "yolov5su_640", "yolov5mu_640", "yolov5lu_640", "yolov5xu_640"),
        ("yolov8n_640", "yolov8s_640", "yolov8m_640", "yolov8l_640", "yolov8x_640"),
        ("yolo11n_640", "yolo11s_640", "yolo11m_640", "yolo11l_640", "yolo11x_640"),
        ("yolov8n_cls_224", "yolov8s_cls_224", "yolov8m_cls_224", "yolov8l_cls_224", "yolov8x_cls_224"),
        ("yolo11n_cls_224", "yolo11s_cls_224", "yolo11m_cls_224", "yolo11l_cls_224", "yolo11x_cls_224"),
    ),
    "mlsoc": (
        ("resnet18", "resnet34"),
        ("resnet101", "resnet152"),
        ("vgg11_tv", "vgg16_tv", "vgg19_tv"),
        ("wide_resnet50_2_tv", "wide_resnet101_2_tv"),
        ("regnetx_004", "regnetx_008"),
        ("efficientnet_b1_tv", "efficientnet_b3_tv", "efficientnet_b5_tv", "efficientnet_b7_tv"),
        ("efficientnet_v2_s_tv", "efficientnet_v2_m_tv"),
    ),
    "tda4vm": (
        ("regnetx_002", "regnetx_004", "regnetx_008"),
        ("yolox_nano_lite_416", "yolox_tiny_lite_416", "yolox_s_lite_640"),
        ("mobilenetv2_100", "mobilenetv2_140"),
    ),
    "am62a": (
        ("regnetx_002", "regnetx_004", "regnetx_008"),
        ("yolox_nano_lite_416", "yolox_tiny_lite_416", "yolox_s_lite_640"),
    ),
    "am68a": (
        ("regnetx_004", "regnetx_008"),
    ),
}


BAND = 0.2  # the in-sample band: every figure within +-20%


@dataclasses.dataclass(frozen=True)
class Step:
    smaller: str
    larger: str
    metric: str           # which published figure both times come from: fps (1000 / FPS) or latency_ms
    mac_ratio: float      # larger / smaller, MACs on the NPU
    time_ratio: float     # larger / smaller, published time per frame
    model_time_ratio: float  # larger / smaller, the fitted profile's simulated time (the page's run)
    left_out_time_ratio: float | None = None  # the same, each figure predicted by a fit that did not see it

    @property
    def per_mac(self) -> float:
        """The larger network's published time per MAC over the smaller one's."""
        return self.time_ratio / self.mac_ratio

    @property
    def model_per_mac(self) -> float:
        return self.model_time_ratio / self.mac_ratio

    @property
    def left_out_per_mac(self) -> float | None:
        return None if self.left_out_time_ratio is None else self.left_out_time_ratio / self.mac_ratio

    def both_can_be_within(self, band: float) -> bool:
        """Whether the two networks' predicted / published ratios can both lie within 1 +- ``band``, given the
        model's quotient over the published one (which is the larger network's ratio over the smaller one's)."""
        spread = self.model_per_mac / self.per_mac
        return (1 - band) / (1 + band) <= spread <= (1 + band) / (1 - band)


def published_ms(platform: str, network: str, metric: str) -> float:
    (point,) = [p for p in credibility.POINTS if (p.platform, p.network, p.metric) == (platform, network, metric)]
    return 1e3 / point.value if metric == "fps" else point.value


def stored_row(run: list[dict[str, Any]], platform: str, network: str, metric: str) -> dict[str, Any]:
    """A point's row in a stored run of tools/credibility.py (its simulated figure and ratios)."""
    (result,) = [r for r in run if r["platform"] == platform]
    (row,) = [r for r in result["points"] if (r["network"], r["metric"]) == (network, metric)]
    return row


def simulated_ms(run: list[dict[str, Any]], platform: str, network: str, metric: str) -> float:
    """The fitted profile's simulated time per frame in a stored run of tools/credibility.py."""
    row = stored_row(run, platform, network, metric)
    return 1e3 / row["simulated"] if metric == "fps" else row["simulated"]


def left_out_ms(run: list[dict[str, Any]], platform: str, network: str, metric: str) -> float | None:
    """The time per frame the run's fit without this network predicts (its left-out ratio is a time ratio)."""
    ratio = stored_row(run, platform, network, metric)["left_out_ratio"]
    return None if ratio is None else ratio * published_ms(platform, network, metric)


def series_metric(platform: str, series: Sequence[str]) -> str:
    """The figure every member has: fps first (frames in flight: the accelerator's time, not the host's), then
    accelerator_ms, then latency_ms."""
    have = {(p.network, p.metric) for p in credibility.POINTS if p.platform == platform}
    for metric in ("fps", "accelerator_ms", "latency_ms"):
        if all((n, metric) in have for n in series):
            return metric
    raise ValueError(f"{platform}: {', '.join(series)} share no published figure")


def steps(platform: str, series: Sequence[str], macs: dict[str, int], run: list[dict[str, Any]]) -> list[Step]:
    metric = series_metric(platform, series)

    def left_out(a: str, b: str) -> float | None:
        times = left_out_ms(run, platform, a, metric), left_out_ms(run, platform, b, metric)
        return None if None in times else times[1] / times[0]

    return [Step(a, b, metric, macs[b] / macs[a],
                 published_ms(platform, b, metric) / published_ms(platform, a, metric),
                 simulated_ms(run, platform, b, metric) / simulated_ms(run, platform, a, metric), left_out(a, b))
            for a, b in zip(series, series[1:])]


def npu_macs(platform: str, network: str, folder: Path) -> int:
    """MACs per frame of the layers accelbuild runs on the platform's NPU (at the bits the source built)."""
    (point, *_) = [p for p in credibility.POINTS if (p.platform, p.network) == (platform, network)]
    case = credibility.prepare(point, credibility.imported(folder, network), load_npu_hardware(platform))
    return sum(layer.macs for layers in case.layers.values() for layer in layers)


def report(platform: str, found: list[Step]) -> list[str]:
    lines = [f"{platform}: each step of a series, larger / smaller: NPU MACs, published time per frame and per MAC, "
             f"and the fitted profile's time per MAC ({credibility.RESULTS.name})",
             f"  {'smaller':<20} {'larger':<20} {'figure':<14} {'MACs':>6} {'time':>6} {'per MAC':>8} {'model':>6} "
             f"{'left out':>8}"]
    lines += [f"  {s.smaller:<20} {s.larger:<20} {s.metric:<14} {s.mac_ratio:6.2f} {s.time_ratio:6.2f} "
              f"{s.per_mac:8.2f} {s.model_per_mac:6.2f} "
              f"{'' if s.left_out_per_mac is None else format(s.left_out_per_mac, '8.2f'):>8}" for s in found]
    worst = sorted(found, key=lambda s: -s.per_mac)[:3]
    lines.append("  most published time per MAC in the larger network: "
                 + "; ".join(f"{s.smaller} -> {s.larger} {s.per_mac:.2f}x (model {s.model_per_mac:.2f}x)" for s in worst))
    lines.append(f"  the model's own range: {min(s.model_per_mac for s in found):.2f}x to "
                 f"{max(s.model_per_mac for s in found):.2f}x")
    apart = [s for s in found if not s.both_can_be_within(BAND)]
    lines.append(f"  steps whose two figures cannot both be within {BAND:.0%} at the model's quotient: "
                 + ("; ".join(f"{s.smaller} -> {s.larger}" for s in apart) or "none"))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platforms", default=",".join(SERIES), help=f"comma-separated, of: {', '.join(SERIES)}")
    parser.add_argument("--models", type=Path, required=True, help="tools/credibility.py's --models folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    platforms = args.platforms.split(",")
    unknown = [p for p in platforms if p not in SERIES]
    if unknown:
        parser.error(f"--platforms: no series for {', '.join(unknown)} (there are: {', '.join(SERIES)})")
    missing = sorted({n for p in platforms for series in SERIES[p] for n in series
                      if not (args.models / f"{n}.onnx").exists()})
    if missing:
        parser.error(f"{args.models}: no {', '.join(missing)} (run tools/credibility.py with --models there first)")
    run = json.loads(credibility.RESULTS.read_text())["results"]
    found: dict[str, list[Step]] = {}
    for platform in platforms:
        names = sorted({n for series in SERIES[platform] for n in series})
        macs = {n: npu_macs(platform, n, args.models) for n in names}
        found[platform] = [s for series in SERIES[platform] for s in steps(platform, series, macs, run)]
    if args.json:
        print(json.dumps({platform: [dataclasses.asdict(s) | {"per_mac": s.per_mac, "model_per_mac": s.model_per_mac,
                                                               "left_out_per_mac": s.left_out_per_mac}
                                     for s in steps_of] for platform, steps_of in found.items()}, indent=1))
        return 0
    print("\n\n".join("\n".join(report(platform, steps_of)) for platform, steps_of in found.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
