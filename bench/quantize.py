"""Output SQNR of accelbuild's weight quantizer against onnxruntime's own per-channel weight quantization.

For each model and bit width, every weighted layer of the AI section is quantized per output channel
twice — by accelbuild (`accelbuild.quantize`) and by onnxruntime's `quant_utils.quantize_data`
(symmetric, the same axis) — and both dequantized models run on the same seeded inputs with activations
rounded to bfloat16, as the chip computes. The table shows each output's SQNR against the float model,
and the time each quantizer takes over all layers (ratio in the same run; machines are noisy).

Models: the YOLOv8n of the `nudenet` wheel when installed (`pip install nudenet --no-deps`), cropped at
its heads, plus the repository's generated detector and classifier and a TFLite MobileNet-like model.

    python bench/quantize.py [--samples N] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import quant_utils

from accelbuild import accuracy
from accelbuild.quantize import measure
from accelbuild.quantize.weights import dequantize, quantize, weighted_layers
from accelbuild.testing import models, tflite_models

ORT_TYPES = {4: onnx.TensorProto.INT4, 8: onnx.TensorProto.INT8, 16: onnx.TensorProto.INT16}


def build_ai_sections(folder: Path) -> dict[str, Path]:
    """Import and crop the benchmark models with accelbuild itself; returns ai.onnx per model."""
    (folder / "models").mkdir()
    onnx.save(models.tiny_detector(), folder / "models/tinydet.onnx")
    onnx.save(models.tiny_classifier(), folder / "models/tinycls.onnx")
    (folder / "models/mobilenet.tflite").write_bytes(tflite_models.mobilenet_like())
    entries = [("tinydet", "tinydet.onnx", "{images: [320, 320, 3]}"), ("tinycls", "tinycls.onnx", "auto"),
               ("mobilenet_tflite", "mobilenet.tflite", "auto")]
    spec = importlib.util.find_spec("nudenet")
    if spec is not None and spec.submodule_search_locations:
        shutil.copy(Path(list(spec.submodule_search_locations)[0]) / "320n.onnx", folder / "models/yolov8n.onnx")
        entries.insert(0, ("yolov8n", "yolov8n.onnx", "{images: [320, 320, 3]}"))
    yaml = ["accelbuild: 2", "name: bench", "models:"]
    for name, file, shapes in entries:
        yaml += [f"  - name: {name}", f"    path: models/{file}", f"    input_shapes: {shapes}",
                 "    crop: {auto: true}"]
    (folder / "p.yaml").write_text("\n".join(yaml) + "\n")
    subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", "p.yaml", "--until", "crop",
                    "--state-dir", "state"], cwd=folder, check=True, capture_output=True)
    return {name: folder / "build/bench" / name / "ai.onnx" for name, _, _ in entries}


def ort_quantize(weight: np.ndarray, bits: int, axis: int) -> np.ndarray:
    """onnxruntime's symmetric quantization of each channel, dequantized."""
    moved = np.moveaxis(weight, axis, 0)
    out = np.empty_like(moved)
    for c in range(moved.shape[0]):
        _, scale, codes = quant_utils.quantize_data(moved[c].ravel(), ORT_TYPES[bits], True)
        out[c] = (codes.astype(np.float32) * np.float32(scale)).reshape(moved[c].shape)
    return np.moveaxis(out, 0, axis)


def ours(weight: np.ndarray, bits: int, axis: int) -> np.ndarray:
    return dequantize(*quantize(weight, bits, axis), axis)


def measure_model(path: Path, bits: int, samples: int) -> dict[str, float]:
    model = onnx.load(str(path))
    layers = weighted_layers(model)
    weights = {layer.weight: onnx.numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == layer.weight))
               for layer in layers}
    feeds = accuracy.random_inputs(model, samples, seed=0)
    reference = measure.run_all(measure.session(model), feeds)
    probe = measure.session(measure.with_bf16_activations(measure.weights_as_inputs(model, weights)))
    figures = {}
    for label, quantizer in (("accelbuild", ours), ("onnxruntime", ort_quantize)):
        started = time.perf_counter()
        variant = {layer.weight: quantizer(weights[layer.weight], bits, layer.axis) for layer in layers}
        figures[f"{label}_s"] = time.perf_counter() - started
        figures[f"{label}_sqnr_db"] = measure.compare(reference, measure.run_all(probe, feeds, variant))["sqnr_db"]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in build_ai_sections(Path(tmp)).items():
            for bits in (4, 8, 16):
                rows.append({"model": name, "bits": bits, **measure_model(path, bits, args.samples)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("output SQNR vs float (bf16 activations), same inputs; quantize time over all layers")
    print(f"{'model':<18}{'bits':>5}{'accelbuild dB':>15}{'onnxruntime dB':>16}{'diff dB':>9}{'time ratio':>12}")
    for r in rows:
        ratio = r["accelbuild_s"] / r["onnxruntime_s"] if r["onnxruntime_s"] else float("nan")
        print(f"{r['model']:<18}{r['bits']:>5}{r['accelbuild_sqnr_db']:>15.2f}{r['onnxruntime_sqnr_db']:>16.2f}"
              f"{r['accelbuild_sqnr_db'] - r['onnxruntime_sqnr_db']:>9.2f}{ratio:>12.3f}")
    better = sum(r["accelbuild_sqnr_db"] >= r["onnxruntime_sqnr_db"] - 0.01 for r in rows)
    print(f"equal or better in {better} of {len(rows)} cases (goal: all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
