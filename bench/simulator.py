"""Simulator speed, the cost model against the simulator, and closed-loop gain.

1. Numeric simulation time per frame (the DFP's arithmetic with bfloat16 activations and the profile's
   activation approximations, in onnxruntime) as a ratio to onnxruntime float inference of the same AI
   section, both with warm sessions, alternating, medians (goal <= 3x).
2. Timing simulation of 500 frames: seconds.
3. Cost model against simulator, per model of every pipeline: the cost model's and the simulator's
   steady-state FPS and latency for the program the closed loop ships, their ratios (goal: FPS within 10%,
   latency within 20%, or the report names the effect that separates them), and what binds each side (the
   cost model's bottleneck; the simulator's binding resource with its busy share). Beside it, the same
   table recorded before issue 14 (``BEFORE``: the simulator's fixed 8 frames in flight and 4 frames per
   edge; no host buffers or link sharing in the cost model). That simulator named no binding resource;
   ``BEFORE`` gives the busiest one and, where none was saturated, frames in flight = FPS x latency.
4. Closed-loop gain: simulated FPS of the best split over the simulated FPS of the split the cost model
   ranked first, across the models below (average and range).

Models: YOLOv8n from the `nudenet` wheel when installed (BF16 and RGB888 input), PP-OCR from the
`rapidocr-onnxruntime` wheel when installed (det 320x320 + cls 48x192 on 3 chips, cls alone on 1 chip, det
640x640 on 4 chips), a random-weight ResNet-50, the repository's tiny detector and classifier, a TFLite
MobileNet-like model, and a two-model pipeline. Everything is built with `accelbuild run` (effort hard,
closed loop) in a temporary folder.

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
from typing import Any

import onnx

from accelbuild import accuracy
from accelbuild.quantize import measure
from accelbuild.targets.mx3.mapper.view import describe
from accelbuild.targets.mx3.sim import numeric, timing
from accelbuild.targets.mx3.sim.program import load_program
from accelbuild.testing import models, tflite_models

PIPELINE = """accelbuild: 2
name: {name}
target: {{num_chips: {chips}, effort: hard, input_format: {input_format}}}
models:
{models}
closed_loop: {{enabled: true, jobs: 2}}
benchmark: {{frames: 200, host: false, accuracy: {{samples: 1}}}}
"""

# Recorded at a6a35c6 (before issue 14) with these pipelines: model -> (predicted FPS, simulated FPS,
# predicted latency ms, simulated latency ms, the cost model's bottleneck, what bound the simulation).
BEFORE: dict[str, tuple[float, float, float, float, str, str]] = {
    'resnet50/r50': (1978.65, 1978.65, 2.5162, 4.0432,
        'layer layer2.0.down of r50 on chip 0',
        'layer layer2.0.down of r50 on chip 0 (100% busy)'),
    'tinydet/det': (5208.33, 5183.93, 0.3007, 0.2857,
        'host_link',
        'host link, host -> chip (100% busy)'),
    'tinycls/cls': (520833.33, 49113.89, 0.0498, 0.048,
        'host_link',
        'no resource saturated (busiest: host link, host -> chip, 9%); frames in flight = FPS x latency = 2.4'),
    'mobilenet_tflite/mnet': (594520.9, 49924.76, 0.0539, 0.0534,
        'layer block/dw of mnet on chip 0',
        'no resource saturated (busiest: layer stem/conv of mnet on chip 0, 8%); frames in flight = FPS x latency = 2.7'),
    'two_models/det': (4692.95, 5142.2, 0.3254, 0.3177,
        'host_link',
        'host link, host -> chip (100% busy)'),
    'two_models/cls': (51538.69, 5142.2, 0.0498, 0.1241,
        'host_link',
        'host link, host -> chip (100% busy)'),
    'yolov8n/det': (5043.51, 3605.82, 1.6594, 2.2298,
        'layer /model.22/cv3.0/cv3.0.1/conv/Conv of det on chip 1',
        'no resource saturated (busiest: layer /model.22/cv3.0/cv3.0.1/conv/Conv of det on chip 1, 71%); frames in flight = FPS x latency = 8.0'),
    'yolov8n_rgb888/det': (5043.51, 3616.89, 1.5634, 2.223,
        'layer /model.22/cv3.0/cv3.0.1/conv/Conv of det on chip 1',
        'no resource saturated (busiest: layer /model.22/cv3.0/cv3.0.1/conv/Conv of det on chip 1, 72%); frames in flight = FPS x latency = 8.0'),
    'ppocr_cls/cls': (57870.37, 11914.8, 0.6224, 0.6915,
        'host_link',
        'no resource saturated (busiest: host link, host -> chip, 21%); frames in flight = FPS x latency = 8.2'),
    'ppocr_det_cls/det': (1893.94, 1893.87, 1.6818, 4.2243,
        'chip link 0 -> 1',
        'chip link 0 -> 1 (100% busy)'),
    'ppocr_det_cls/cls': (11292.99, 1893.87, 0.8219, 4.0311,
        'chip link 0 -> 1',
        'chip link 0 -> 1 (100% busy)'),
    'ppocr_det_640/det': (497.51, 497.52, 3.1861, 16.08,
        'chip link 2 -> 3',
        'chip link 2 -> 3 (100% busy)'),
}


def _wheel_folder(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def write_models(folder: Path) -> dict[str, tuple[int, list[str], str]]:
    """Pipelines: name -> (chips, model entries, input format)."""
    (folder / "models").mkdir()
    onnx.save(models.resnet50(), folder / "models/resnet50.onnx")
    onnx.save(models.tiny_detector(), folder / "models/tinydet.onnx")
    onnx.save(models.tiny_classifier(), folder / "models/tinycls.onnx")
    (folder / "models/mobilenet.tflite").write_bytes(tflite_models.mobilenet_like())
    det = "  - {name: det, path: models/tinydet.onnx, input_shapes: {images: [320, 320, 3]}, crop: {auto: true}}"
    pipelines = {
        "resnet50": (4, ["  - {name: r50, path: models/resnet50.onnx}"], "BF16"),
        "tinydet": (2, [det], "BF16"),
        "tinycls": (2, ["  - {name: cls, path: models/tinycls.onnx}"], "BF16"),
        "mobilenet_tflite": (2, ["  - {name: mnet, path: models/mobilenet.tflite}"], "BF16"),
        "two_models": (2, [det, "  - {name: cls, path: models/tinycls.onnx}"], "BF16"),
    }
    nudenet = _wheel_folder("nudenet")
    if nudenet is not None:
        shutil.copy(nudenet / "320n.onnx", folder / "models/yolov8n.onnx")
        yolo = ["  - {name: det, path: models/yolov8n.onnx, input_shapes: {images: [320, 320, 3]}, crop: {auto: true}}"]
        pipelines["yolov8n"] = (2, yolo, "BF16")
        pipelines["yolov8n_rgb888"] = (2, yolo, "RGB888")
    ocr = _wheel_folder("rapidocr_onnxruntime")
    if ocr is not None:
        shutil.copy(ocr / "models/ch_PP-OCRv4_det_infer.onnx", folder / "models/ocr_det.onnx")
        shutil.copy(ocr / "models/ch_ppocr_mobile_v2.0_cls_infer.onnx", folder / "models/ocr_cls.onnx")
        cls = "  - {name: cls, path: models/ocr_cls.onnx, input_shapes: {x: [48, 192, 3]}}"
        pipelines["ppocr_cls"] = (1, [cls], "BF16")
        pipelines["ppocr_det_cls"] = (3, ["  - {name: det, path: models/ocr_det.onnx, input_shapes: {x: [320, 320, 3]}}",
                                          cls], "BF16")
        pipelines["ppocr_det_640"] = (4, ["  - {name: det, path: models/ocr_det.onnx, input_shapes: {x: [640, 640, 3]}}"],
                                      "BF16")
    for name, (chips, entries, input_format) in pipelines.items():
        (folder / f"{name}.yaml").write_text(PIPELINE.format(name=name, chips=chips, models="\n".join(entries),
                                                             input_format=input_format))
    return pipelines


def build(folder: Path, names: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", *[f"{n}.yaml" for n in names], "--state-dir",
                    "state", "-j", "2"], cwd=folder, check=True, capture_output=True)


def numeric_ratio(folder: Path, pipeline: str, model: str, rounds: int = 20) -> dict[str, float]:
    program = load_program(folder / "build" / pipeline / f"{pipeline}.dfp")
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


def agreement_rows(folder: Path, pipelines: list[str]) -> list[dict[str, Any]]:
    """Per pipeline and model: the shipped program's cost-model figures against its simulation."""
    rows = []
    for name in pipelines:
        bench = json.loads((folder / "build" / name / "benchmark.json").read_text())
        for entry in bench["agreement"]:
            cost, sim = entry["cost_model"], entry["simulated"]
            rows.append({"pipeline": name, "model": entry["model"], "predicted_fps": cost["fps"],
                         "simulated_fps": sim["fps"], "fps_ratio": entry["fps_ratio"],
                         "predicted_latency_ms": cost["latency_ms"], "simulated_latency_ms": sim["latency_ms"],
                         "latency_ratio": entry["latency_ratio"], "cost_model_bottleneck": describe(cost["bottleneck"]),
                         "simulator_binding": describe(sim["binding"]), "agree": entry["agree"],
                         "effects": entry["effects"]})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pipelines = write_models(folder)
        build(folder, list(pipelines))
        loops = {name: json.loads((folder / "build" / name / "closed_loop.json").read_text()) for name in pipelines}
        rows = agreement_rows(folder, list(pipelines))
        speed_model = ("yolov8n", "det") if "yolov8n" in pipelines else ("tinydet", "det")
        speed = numeric_ratio(folder, *speed_model)
    gains = {name: loop["gain"] for name, loop in loops.items()}
    figures = {"numeric": {"model": speed_model[0], **speed},
               "cost_model_vs_simulator": rows,
               "before": {key: dict(zip(("predicted_fps", "simulated_fps", "predicted_latency_ms",
                                         "simulated_latency_ms", "cost_model_bottleneck", "simulator_binding"), value))
                          for key, value in BEFORE.items()},
               "closed_loop": {name: {"splits": len(loop["splits"]), "cost_model_choice_fps": loop["cost_model_choice_fps"],
                                      "best_fps": loop["best_fps"], "gain": loop["gain"]} for name, loop in loops.items()},
               "gain_average": round(statistics.mean(gains.values()), 4),
               "gain_range": [min(gains.values()), max(gains.values())]}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    _print(figures)
    return 0


def _print(figures: dict[str, Any]) -> None:
    n = figures["numeric"]
    print(f"numeric simulation of {n['model']}: {n['numeric_ms_per_frame']} ms/frame vs onnxruntime float "
          f"{n['float_ms_per_frame']} ms/frame: ratio {n['ratio']} (goal <= 3)")
    print(f"timing simulation, 500 frames: {n['timing_500_frames_s']} s")
    print("cost model vs simulator (the shipped program; ratio = simulated / predicted):")
    head = f"  {'pipeline/model':<22} {'FPS pred':>10} {'FPS sim':>10} {'ratio':>6}  {'lat pred':>8} {'lat sim':>8} {'ratio':>6}"
    for label, source in (("after (this code)", figures["cost_model_vs_simulator"]), ("before issue 14", None)):
        print(f" {label}:")
        print(head)
        entries = source if source is not None else [
            {"pipeline": key.split("/")[0], "model": key.split("/")[1], **value,
             "fps_ratio": value["simulated_fps"] / value["predicted_fps"],
             "latency_ratio": value["simulated_latency_ms"] / value["predicted_latency_ms"]}
            for key, value in figures["before"].items()]
        for row in entries:
            print(f"  {row['pipeline'] + '/' + row['model']:<22} {row['predicted_fps']:>10.1f} {row['simulated_fps']:>10.1f} "
                  f"{row['fps_ratio']:>6.2f}  {row['predicted_latency_ms']:>8.3f} {row['simulated_latency_ms']:>8.3f} "
                  f"{row['latency_ratio']:>6.2f}")
            print(f"  {'':<22} cost model: {row['cost_model_bottleneck']}")
            print(f"  {'':<22} simulator:  {row['simulator_binding']}")
            for effect in row.get("effects") or []:
                print(f"  {'':<22} parts: {effect}")
    print("closed loop (simulated FPS, best split vs the cost model's first choice):")
    for name, row in figures["closed_loop"].items():
        print(f"  {name:<18} {row['splits']:>3} splits  {row['cost_model_choice_fps']:>12.1f} -> "
              f"{row['best_fps']:>12.1f}  gain {100 * row['gain']:+.2f}%")
    low, high = figures["gain_range"]
    print(f"  average gain {100 * figures['gain_average']:+.2f}%, range {100 * low:+.2f}% .. {100 * high:+.2f}%")


if __name__ == "__main__":
    sys.exit(main())
