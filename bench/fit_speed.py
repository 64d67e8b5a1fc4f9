"""The credibility fit's evaluations: plans looked up (``PlanMemo``) against every subgraph planned afresh.

What is measured
    Seconds for one finite-difference Jacobian of tools/credibility.py's fit on a profile: the figures of
    every case at the profile's values and with each free value moved by 2%, one at a time (what scipy's
    least_squares asks for at each step). Once with plans planned afresh, once with a PlanMemo, alternating,
    round after round; the medians are compared as a ratio (the machine is shared: a slow moment hits both).
    Every figure of the two is checked to be equal. The cases: each network's latency and FPS point, as the
    published tables give both. Networks: accelbuild.testing.models' ResNet-18/50 and MobileNetV1 at 224, and
    with ``--models`` every ``.onnx`` file of a folder (tools/credibility.py's rebuilt networks, say).

    python bench/fit_speed.py [--platform x5] [--models DIR] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from accelbuild.targets.npu.hardware import NPU_PROFILES, builtin_profiles, load_npu_hardware  # noqa: E402
from accelbuild.targets.profile_files import load_profile  # noqa: E402
from accelbuild.testing import models  # noqa: E402
from tools import credibility  # noqa: E402  (the repository's lab tools)


def cases(platform: str, folder: Path | None) -> list[credibility.Case]:
    networks = {name: getattr(models, name)(size=224) for name in ("resnet18", "resnet50", "mobilenet_v1")}
    if folder is not None:
        networks |= {path.stem: credibility.imported(folder, path.stem) for path in sorted(folder.glob("*.onnx"))}
    hw = load_npu_hardware(platform)
    return [credibility.prepare(credibility.Point(platform, name, metric, 1.0, "bench"), model, hw)
            for name, model in networks.items() for metric in ("latency_ms", "fps")]


def jacobian(raws: dict[str, dict], found: list[credibility.Case], fixed: list[dict[str, float]],
             memo: credibility.PlanMemo | None) -> list[float]:
    """Every case's figure at the profile's values and with each free value moved 2% (``raws``: the one
    profile; ``fixed``: the cases' host parts, held by the fit)."""
    (platform,) = raws
    free = credibility.group_parameters(raws, [c.point for c in found])
    base = np.array([credibility.stated(raws[platform], f) for f in free])
    figures = []
    for moved in [None, *range(len(free))]:
        values = base if moved is None else base * np.where(np.arange(len(base)) == moved, 1.02, 1.0)
        hws = credibility.Hardware(raws, free, values)
        figures += [credibility.fast_figure(c, hws.of(c.point), f, memo) for c, f in zip(found, fixed)]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", default="x5")
    parser.add_argument("--models", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    found = cases(args.platform, args.models)
    raws = {args.platform: load_profile(builtin_profiles()[args.platform], NPU_PROFILES)}
    fixed = [credibility.host_part(c, raws[args.platform]) for c in found]
    afresh_s, memo_s = [], []
    for _ in range(args.rounds):
        started = time.perf_counter()
        afresh = jacobian(raws, found, fixed, None)
        afresh_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        looked_up = jacobian(raws, found, fixed, credibility.PlanMemo())  # a fresh memo: no earlier round's plans
        memo_s.append(time.perf_counter() - started)
        if looked_up != afresh:
            raise SystemExit("the memo's figures differ from planning afresh")
    row = {"platform": args.platform, "cases": len(found), "afresh_s": round(statistics.median(afresh_s), 3),
           "memo_s": round(statistics.median(memo_s), 3),
           "ratio": round(statistics.median(memo_s) / statistics.median(afresh_s), 3), "same_figures": True}
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        print(f"{row['platform']}: one Jacobian of {row['cases']} cases, planned afresh {row['afresh_s']:.3f} s, "
              f"with the plan memo {row['memo_s']:.3f} s, ratio {row['ratio']:.3f} (same figures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
