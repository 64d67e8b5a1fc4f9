"""Shape inference: accelbuild.util.shape_inference against onnx's own, on the same models.

What is measured
    Seconds to infer shapes with ``onnx.shape_inference.infer_shapes`` and with accelbuild's wrapper (large
    float weights handed over as typed inputs, not bytes), alternating, round after round, after one
    warm-up of each; the medians are compared as a ratio (the machine is shared: a slow moment hits both).
    Every pair of results is checked to be the same bytes. The models: a generated 2,000-layer chain
    (bench/npu.py's islands graph, 64 channels at 56x56: about 74 MB of weights), and with ``--models`` every
    ``.onnx`` file of a folder (tools/credibility.py's rebuilt networks, say).

    python bench/shape_inference.py [--models DIR] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import onnx

from accelbuild.testing import npu_graphs
from accelbuild.util.shape_inference import infer_shapes

OPTIONS = {"check_type": True, "strict_mode": False, "data_prop": True}  # what the import stage asks for


def timed(function: Callable[..., onnx.ModelProto], model: onnx.ModelProto) -> tuple[float, bytes]:
    started = time.perf_counter()
    result = function(model, **OPTIONS)
    return time.perf_counter() - started, result.SerializeToString(deterministic=True)


def compare(name: str, model: onnx.ModelProto, rounds: int) -> dict:
    theirs_s, ours_s = [], []
    for round_ in range(rounds + 1):  # round 0 warms up
        theirs, theirs_bytes = timed(onnx.shape_inference.infer_shapes, model)
        ours, ours_bytes = timed(infer_shapes, model)
        if ours_bytes != theirs_bytes:
            raise SystemExit(f"shape_inference.py: {name}: the results differ")
        if round_:
            theirs_s.append(theirs)
            ours_s.append(ours)
    return {"model": name, "megabytes": round(model.ByteSize() / 1e6, 1), "onnx_s": statistics.median(theirs_s),
            "ours_s": statistics.median(ours_s), "ratio": statistics.median(ours_s) / statistics.median(theirs_s)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    models = [("chain_2000", npu_graphs.long_chain(2000, channels=64, size=56))]
    if args.models:
        models += [(path.stem, onnx.load(path)) for path in sorted(args.models.glob("*.onnx"))]
    rows = [compare(name, model, args.rounds) for name, model in models]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'model':<28}{'MB':>8}{'onnx s':>10}{'ours s':>10}{'ours/onnx':>11}")
    for r in rows:
        print(f"{r['model']:<28}{r['megabytes']:>8}{r['onnx_s']:>10.3f}{r['ours_s']:>10.3f}{r['ratio']:>11.3f}")
    ratios = [r["ratio"] for r in rows]
    print(f"ours / onnx over {len(rows)} models: median {statistics.median(ratios):.3f}, worst {max(ratios):.3f}; "
          "every result the same bytes")


if __name__ == "__main__":
    main()
