"""Simulator speed and closed-loop gain.

1. Numeric simulation time per frame (the DFP's arithmetic with bfloat16 activations and the profile's
   activation approximations, in onnxruntime) as a ratio to onnxruntime float inference of the same AI
   section, both with warm sessions, alternating, medians (goal <= 3x).
2. Timing simulation of 500 frames: seconds.
3. Closed-loop gain: simulated FPS of the best split over the simulated FPS of the split the cost model
   ranked first, across the models below (average and range).

Models: YOLOv8n from the `nudenet` wheel when installed, a random-weight ResNet-50, the repository's tiny
detector and classifier, a TFLite MobileNet-like model, and a two-model pipeline. Everything is built
with `accelbuild run` in a temporary folder.

    python bench/simulator.py [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

from accelbuild import accuracy
from accelbuild.quantize import measure
from accelbuild.targets.mx3.sim import numeric, timing
from accelbuild.targets.mx3.sim.program import load_program
from accelbuild.testing import models, tflite_models

PIPELINE = """accelbuild: 1
name: {name}
target: {{num_chips: {chips}, effort: hard}}
models:
{models}
closed_loop: {{enabled: true, jobs: 2}}
benchmark: {{frames: 200, host: false, accuracy: {{samples: 1}}}}
"""


def write_models(folder: Path) -> dict[str, tuple[int, list[str]]]:
    """Pipelines: name -> (chips, model entries)."""
    (folder / "models").mkdir()
    onnx.save(models.resnet50(), folder / "models/resnet50.onnx")
    onnx.save(models.tiny_detector(), folder / "models/tinydet.onnx")
    onnx.save(models.tiny_classifier(), folder / "models/tinycls.onnx")
    (folder / "models/mobilenet.tflite").write_bytes(tflite_models.mobilenet_like())
    det = "  - {name: det, path: models/tinydet.onnx, input_shapes: {images: [320, 320, 3]}, crop: {auto: true}}"
    pipelines = {
        "resnet50": (4, ["  - {name: r50, path: models/resnet50.onnx}"]),
        "tinydet": (2, [det]),
        "tinycls": (2, ["  - {name: cls, path: models/tinycls.onnx}"]),
        "mobilenet_tflite": (2, ["  - {name: mnet, path: models/mobilenet.tflite}"]),
        "two_models": (2, [det, "  - {name: cls, path: models/tinycls.onnx}"]),
    }
    spec = importlib.util.find_spec("nudenet")
    if spec is not None and spec.submodule_search_locations:
        shutil.copy(Path(list(spec.submodule_search_locations)[0]) / "320n.onnx", folder / "models/yolov8n.onnx")
        pipelines["yolov8n"] = (2, ["  - {name: det, path: models/yolov8n.onnx, input_shapes: {images: [320, 320, 3]},"
                                    " crop: {auto: true}}"])
    for name, (chips, entries) in pipelines.items():
        (folder / f"{name}.yaml").write_text(PIPELINE.format(name=name, chips=chips, models="\n".join(entries)))
    return pipelines


def build(folder: Path, names: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", *[f"{n}.yaml" for n in names], "--until",
                    "assemble", "--state-dir", "state", "-j", "2"], cwd=folder, check=True, capture_output=True)


def numeric_ratio(folder: Path, pipeline: str, model: str, rounds: int = 20) -> dict[str, float]:
    program = load_program(folder / "build" / pipeline / "best_split.dfp")
    entry = next(m for m in program.models if m.name == model)
    ai = onnx.load(str(folder / "build" / pipeline / model / "ai.onnx"))
    sample = accuracy.random_inputs(ai, 1, 0)
    chip = measure.session(numeric.chip_graph(entry, program.hardware["approximations"]))
    reference = measure.session(ai)
    chip_s, float_s = [], []
    for _ in range(rounds):
        for sess, bucket in ((chip, chip_s), (reference, float_s)):
            started = time.perf_counter()
            measure.run_all(sess, sample)
            bucket.append(time.perf_counter() - started)
    chip_ms, float_ms = 1000 * statistics.median(chip_s), 1000 * statistics.median(float_s)
    started = time.perf_counter()
    timing.simulate(program, 500)
    return {"numeric_ms_per_frame": round(chip_ms, 3), "float_ms_per_frame": round(float_ms, 3),
            "ratio": round(chip_ms / float_ms, 2), "timing_500_frames_s": round(time.perf_counter() - started, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pipelines = write_models(folder)
        build(folder, list(pipelines))
        loops = {name: json.loads((folder / "build" / name / "closed_loop.json").read_text()) for name in pipelines}
        speed_model = ("yolov8n", "det") if "yolov8n" in pipelines else ("tinydet", "det")
        speed = numeric_ratio(folder, *speed_model)
    gains = {name: loop["gain"] for name, loop in loops.items()}
    figures = {"numeric": {"model": speed_model[0], **speed},
               "closed_loop": {name: {"splits": len(l["splits"]), "cost_model_choice_fps": l["cost_model_choice_fps"],
                                      "best_fps": l["best_fps"], "gain": l["gain"]} for name, l in loops.items()},
               "gain_average": round(statistics.mean(gains.values()), 4),
               "gain_range": [min(gains.values()), max(gains.values())]}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    n = figures["numeric"]
    print(f"numeric simulation of {n['model']}: {n['numeric_ms_per_frame']} ms/frame vs onnxruntime float "
          f"{n['float_ms_per_frame']} ms/frame: ratio {n['ratio']} (goal <= 3)")
    print(f"timing simulation, 500 frames: {n['timing_500_frames_s']} s")
    print("closed loop (simulated FPS, best split vs the cost model's first choice):")
    for name, row in figures["closed_loop"].items():
        print(f"  {name:<18} {row['splits']:>3} splits  {row['cost_model_choice_fps']:>12.1f} -> "
              f"{row['best_fps']:>12.1f}  gain {100 * row['gain']:+.2f}%")
    low, high = figures["gain_range"]
    print(f"  average gain {100 * figures['gain_average']:+.2f}%, range {100 * low:+.2f}% .. {100 * high:+.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
