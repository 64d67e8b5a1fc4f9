"""Family cpu on real trained models: onnxruntime on this machine, float against int8, and onnxruntime against
TVM (``backend: tvm``, float), measured.

Models (from public wheels, downloaded into a folder for the bench only, never by the product): YOLOv8n
(``nudenet``, 320n.onnx, input 320x320; accelbuild's auto crop leaves the box decoding to post.onnx) and
PP-OCR's text-direction classifier and PP-OCRv4 recognizer (``rapidocr-onnxruntime``, inputs 48x192 and
48x320), and PP-OCRv4's text detector (at 320x320). Each model is built through the CLI three times:
onnxruntime ``precision: float`` and ``precision: int8`` (``graph_optimization: extended``, onnxruntime's
default threads) and TVM ``precision: float`` (needs the tvm extra; ``--no-tvm`` skips it), calibrated and
measured on seeded random
inputs (speed does not depend on the values; the int8 accuracy on random inputs is a lower bound of what
photographs give, see bench/ptq.py for real-image PTQ accuracy). The table gives, from benchmark.json:
median and p90 latency of model.ort over ``--frames``, FPS = 1000 / median, the end-to-end latency with the host
sections, the integer operators in the program (model.ort or model.so), and cosine/SQNR against the float
model; then, per model, TVM's median latency over onnxruntime's (float), measured in the same run.

    python bench/cpu.py [--wheels DIR] [--frames 200] [--no-tvm] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ptq  # noqa: E402  (the bench's wheel cache)

REPO = Path(__file__).resolve().parents[1]
WHEELS = {"nudenet": "nudenet", "rapidocr_onnxruntime": "rapidocr-onnxruntime"}
# name, file in the wheels, input shape (H, W, C), auto crop
MODELS = {
    "yolov8n": ("nudenet/320n.onnx", (320, 320, 3), True),
    "ppocr_cls": ("rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", (48, 192, 3), False),
    "ppocr_rec": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx", (48, 320, 3), False),
    "ppocr_det": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx", (320, 320, 3), False),
}
BUILDS = (("onnxruntime", "float"), ("onnxruntime", "int8"), ("tvm", "float"))  # (backend, precision)


def unpacked_wheels(folder: Path) -> Path:
    """Download (once) and unpack the wheels that carry the models (their .onnx files only)."""
    return ptq.unpacked_wheels(folder, WHEELS, "unpacked-cpu", (".onnx",))


def pipeline(name: str, model: Path, shape: tuple[int, int, int], crop: bool, backend: str, precision: str,
             frames: int) -> str:
    lines = ["accelbuild: 2", f"name: {name}_{backend}_{precision}",
             f"target: {{family: cpu, backend: {backend}, precision: {precision}, graph_optimization: extended}}",
             "models:",
             f"  - name: {name}", f"    path: {model}", f"    input_shapes: [{list(shape)}]"]
    if crop:
        lines.append("    crop: {auto: true}")
    lines.append(f"benchmark: {{frames: {frames}, accuracy: {{samples: 24, seed: 0}}}}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=Path(tempfile.gettempdir()) / "accelbuild-bench-wheels")
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--no-tvm", action="store_true", help="onnxruntime only (without the tvm extra)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    unpacked = unpacked_wheels(args.wheels)
    rows = []
    with tempfile.TemporaryDirectory(prefix="accelbuild-bench-cpu-") as tmp:
        work = Path(tmp)
        (work / ".git").mkdir()
        for name, (file, shape, crop) in MODELS.items():
            for backend, precision in BUILDS:
                if backend == "tvm" and args.no_tvm:
                    continue
                yaml = work / f"{name}_{backend}_{precision}.yaml"
                yaml.write_text(pipeline(name, unpacked / file, shape, crop, backend, precision, args.frames))
                result = subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", yaml.name], cwd=work,
                                        capture_output=True, text=True)
                if result.returncode != 0:
                    print(result.stderr, file=sys.stderr)
                    return 1
                out = work / "build" / f"{name}_{backend}_{precision}"
                bench = json.loads((out / "benchmark.json").read_text())
                ort = json.loads((out / name / ("tvm.json" if backend == "tvm" else "ort.json")).read_text())
                m = bench["models"][0]
                rows.append({"model": name, "backend": backend, "precision": precision, "latency_ms": m["latency_ms"],
                             "latency_p90_ms": m["latency_p90_ms"], "fps": m["fps"],
                             "end_to_end_ms": m["end_to_end"]["latency_ms"], "sections": m["end_to_end"]["sections"],
                             "integer_ops": ort["integer_operators"], "ops": sum(ort["operators"].values()),
                             "cosine": m["accuracy"]["cosine"], "sqnr_db": m["accuracy"]["sqnr_db"],
                             "measured_on": bench["measured_on"]})
    ratios = {r["model"]: r["latency_ms"] / next(o["latency_ms"] for o in rows if o["model"] == r["model"]
                                                 and (o["backend"], o["precision"]) == ("onnxruntime", "float"))
              for r in rows if r["backend"] == "tvm"}
    if args.json:
        print(json.dumps({"rows": rows, "tvm_over_onnxruntime_latency": ratios}, indent=2))
        return 0
    print(f"measured on {rows[0]['measured_on']}")
    print(f"{'model':10} {'backend':11} {'prec':5} {'median ms':>9} {'p90 ms':>8} {'FPS':>8} {'e2e ms':>8} "
          f"{'int ops':>9} {'cosine':>8} {'SQNR dB':>8}")
    for r in rows:
        print(f"{r['model']:10} {r['backend']:11} {r['precision']:5} {r['latency_ms']:9.3f} {r['latency_p90_ms']:8.3f} "
              f"{r['fps']:8.1f} {r['end_to_end_ms']:8.3f} {r['integer_ops']:4}/{r['ops']:<4} {r['cosine']:8.5f} "
              f"{r['sqnr_db']:8.2f}")
    for model, ratio in ratios.items():
        print(f"{model}: TVM (untuned) median latency {ratio:.2f}x onnxruntime's (float, same run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
