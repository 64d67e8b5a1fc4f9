"""What MemryX's own measurements say about the mx3 model: two readings of the profile, fitted and left out.

docs/credibility.md compares the mx3 model with MemryX's factory-diagnostics runs (the SDK's Benchmark,
February 2024, each DFP compiled for the chips its row names) as held-out rows: the built-in profile is
several times too fast on them.
This script asks which change of the model those rows support, without changing the product:

- **stated**: the built-in profile (3 TOPS read as 1 op per MAC, the reading the ~1,800 FPS ResNet-50 quote
  forces: 5,000 MACs per cycle per chip).
- **two ops per MAC**: the same profile with ``chip.mac_cores.macs_per_cycle`` halved, the usual reading of
  TOPS (2,500 MACs per cycle per chip). Nothing is fitted in it.

For each reading every network is built as a user builds it (``accelbuild run``, ``tools/credibility_mx3.py``)
and its simulated frame period P is read. The rows are then compared as they are, with one fitted term (a
time g per frame that adds to the chips' period: the measured period is P + g), and with four (a scale of P,
g, a time per activation byte per chip and a time per layer), each fitted by least squares on log error and
each network also predicted by a fit that left it out. A ratio is the predicted frame period over the
measured one (the page's convention: above 1, the model is too slow).

    python -m tools.mx3_vendor_reading --models DIR [--jobs 2] [--work DIR]

DIR holds the networks as tools/credibility.py expects them (``tools/credibility.py`` says how to export
them). Builds take about 10 minutes per reading on 2 cores (a second run with the same --work
reuses them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from accelbuild.errors import AccelbuildError  # noqa: E402
from tools import credibility_mx3 as mx3

READINGS = ("stated", "two ops per MAC")
GRID_S = np.linspace(0.0, 3e-3, 3001)  # candidate per-frame times: 0 to 3 ms in 1 us steps


def halved_profile(folder: Path) -> Path:
    """The built-in profile with each MAC core's MACs per cycle halved (TOPS read as 2 ops per MAC)."""
    profile = yaml.safe_load(mx3.BUILTIN.read_text())
    cores = profile["chip"]["mac_cores"]
    cores["macs_per_cycle"] = cores["macs_per_cycle"] // 2
    profile["description"] = profile["description"] + ", TOPS read as 2 ops per MAC"
    path = folder / "mx3_two_ops_per_mac.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    return path


@dataclass(frozen=True)
class Built:
    """What one build says about a network: its simulated frame period and what else might set a measured one."""

    period_s: float
    activation_bytes_per_chip: float  # every layer's output bytes per frame, over the chips
    layers: int


def built(models: Path, work: Path, chip_gen: str, jobs: int) -> dict[str, Built]:
    """Each vendor-measured network that builds, for the chips its row names; refusals are printed."""
    def one(network: str) -> tuple[str, Built | None, str]:
        try:
            fps, _ = mx3.chip_figures(mx3.build(network, models, work / network, chip_gen))
        except AccelbuildError as error:
            return network, None, str(error)
        layers = json.loads((mx3.artifacts(work / network, network) / "mapping.json").read_text())["layers"]
        activations = sum(layer.get("out_bytes", 0) for layer in layers) / mx3.chips(network)
        return network, Built(1.0 / fps, activations, len(layers)), ""

    found: dict[str, Built] = {}
    with ThreadPoolExecutor(jobs) as pool:
        for network, build, why in pool.map(one, sorted(mx3.MEASURED)):
            if build is None:
                print(f"  not built: {why}")
            else:
                found[network] = build
    return found


def fit_frame_time(period: np.ndarray, published_fps: np.ndarray) -> float:
    """The per-frame time g (s) that minimises the summed squared log error of (period + g) x published FPS."""
    errors = np.log((period[None, :] + GRID_S[:, None]) * published_fps[None, :])
    return float(GRID_S[int(np.argmin((errors ** 2).sum(axis=1)))])


def four_terms(x: np.ndarray, period: np.ndarray, activations: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """A measured period as a x the simulated one + g ms + b ns per activation byte per chip + c us per layer."""
    return x[0] * period + x[1] * 1e-3 + x[2] * 1e-9 * activations + x[3] * 1e-6 * layers


def fit_four_terms(period: np.ndarray, activations: np.ndarray, layers: np.ndarray, published: np.ndarray) -> np.ndarray:
    """The four non-negative terms of ``four_terms`` by least squares on log error."""
    from scipy.optimize import least_squares  # the credibility bench's fitter (tools/credibility.py)

    return least_squares(lambda x: np.log(four_terms(x, period, activations, layers) * published),
                         [1.0, 0.5, 0.1, 1.0], bounds=([0.0] * 4, [10.0, 5.0, 100.0, 100.0])).x


def summary(name: str, ratios: list[float]) -> str:
    errors = [abs(r - 1.0) for r in ratios]
    return f"{name}: median {100 * statistics.median(errors):.1f}%, worst {100 * max(errors):.1f}%"


def report(reading: str, found: dict[str, Built]) -> None:
    networks = sorted(found)
    period = np.array([found[n].period_s for n in networks])
    activations = np.array([found[n].activation_bytes_per_chip for n in networks])
    layers = np.array([found[n].layers for n in networks], dtype=float)
    published = np.array([mx3.MEASURED[n][1] for n in networks])
    as_is = list(period * published)
    g = fit_frame_time(period, published)
    fitted = list((period + g) * published)
    left_out, four_left_out = [], []
    for i in range(len(networks)):
        keep = np.arange(len(networks)) != i
        left_out.append(float((period[i] + fit_frame_time(period[keep], published[keep])) * published[i]))
        x = fit_four_terms(period[keep], activations[keep], layers[keep], published[keep])
        four_left_out.append(float(four_terms(x, period[i], activations[i], layers[i]) * published[i]))
    x = fit_four_terms(period, activations, layers, published)
    four = list(four_terms(x, period, activations, layers) * published)
    print(f"\n{reading}: {len(networks)} networks; fitted per-frame time g = {1e3 * g:.3f} ms")
    print(f"  {'network':34} {'measured FPS':>12} {'model FPS':>10} {'ratio':>6} {'with g':>7} {'left out':>9}")
    for n, p, pub, r0, r1, r2 in zip(networks, period, published, as_is, fitted, left_out):
        print(f"  {n:34} {pub:12.1f} {1 / p:10.1f} {r0:6.2f} {r1:7.2f} {r2:9.2f}")
    print("  " + summary("as is", as_is))
    print("  " + summary("with g, in-sample", fitted))
    print("  " + summary("with g, left out", left_out))
    print(f"  four terms ({x[0]:.3g} x the period + {x[1]:.3g} ms + {x[2]:.3g} ns per activation byte per chip + "
          f"{x[3]:.3g} us per layer): " + summary("in-sample", four) + "; " + summary("left out", four_left_out))
    worst = sorted(zip(four_left_out, networks), key=lambda t: -abs(t[0] - 1.0))[:4]
    print("  four terms, worst left out: " + ", ".join(f"{n} {r:.2f}" for r, n in worst))
    resnet = found.get("resnet50")
    if resnet is not None:
        quote = 1800.0
        print(f"  the ~1,800 FPS ResNet-50 quote: ratio {resnet.period_s * quote:.2f} as is, "
              f"{(resnet.period_s + g) * quote:.2f} with g")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, required=True, help="folder of the exported networks")
    parser.add_argument("--jobs", type=int, default=2, help="builds at once")
    parser.add_argument("--work", type=Path, default=None, help="build folder (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        chip_gens = {"stated": "mx3", "two ops per MAC": str(halved_profile(work))}
        for reading in READINGS:
            print(f"building for the {reading} reading ...", flush=True)
            report(reading, built(args.models, work / reading.replace(" ", "_"), chip_gens[reading], args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
