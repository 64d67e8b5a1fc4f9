"""npu mixed precision on real models and held-out images: what ``auto_precision`` raises and what it costs.

YOLOv8n (``nudenet``'s 320n.onnx) on crops of real photographs (scikit-learn's ``china.jpg`` and
``flower.jpg``, matplotlib's ``grace_hopper.jpg``); PP-OCRv4's detector on those crops with synthetic text
drawn on them (``ocr_frames.text_images``); PP-OCRv4's recognizer and the text-direction classifier on text
lines drawn on photograph strips. Each model has 16 images: the first 8 calibrate, the other 8 are held out.

Each model is built for two npu platforms (tda4vm, x5) twice: all 8-bit, and with
``auto_precision: {min_cosine: 0.99}``. The table gives the worst held-out frame with signal (the headline
of the accuracy record), the layers raised to 16 bits, and the simulated FPS of both builds with their
ratio (the cost of the raised layers, measured in the same run).

    python bench/npu_precision.py [--wheels DIR] [--models yolov8n,ppocr_det,...] [--platforms tda4vm,x5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ocr_frames  # noqa: E402
import ptq  # noqa: E402

FRAMES, CALIBRATION = 16, 8
# name: (model file in the wheels, input_shapes value, preprocess, images)
MODELS = {
    "yolov8n": ("nudenet/320n.onnx", "[320, 320, 3]", "{color: rgb, mean: [0], std: [255]}", "photos"),
    "ppocr_det": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx", "[480, 640, 3]",
                  "{color: bgr, mean: [123.675, 116.28, 103.53], std: [58.395, 57.12, 57.375]}", "text"),
    "ppocr_rec": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx", "[48, 320, 3]",
                  "{color: bgr, mean: [127.5], std: [127.5]}", "lines"),
    "ppocr_cls": ("rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", "[48, 192, 3]",
                  "{color: bgr, mean: [127.5], std: [127.5]}", "lines"),
}


def _frames_of_photos(unpacked: Path, folder: Path, seed: int) -> Iterator[tuple[int, Image.Image,
                                                                                np.random.Generator]]:
    """Make ``folder``; per frame k, the photograph it is cut from (in turn) and the seeded generator."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    photos = [Image.open(unpacked / p).convert("RGB") for p in ptq.PHOTOS]
    for k in range(FRAMES):
        yield k, photos[k % len(photos)], rng


def photo_crops(unpacked: Path, folder: Path, size: tuple[int, int], seed: int = 1) -> None:
    """Seeded crops of the three photographs, resized to ``size`` (W, H), as PNG files."""
    for k, photo, rng in _frames_of_photos(unpacked, folder, seed):
        w, h = photo.size
        side = int(min(w, h) * rng.uniform(0.4, 1.0))
        x, y = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
        photo.crop((x, y, x + side, y + side)).resize(size).save(folder / f"{k:02d}.png")


def text_lines(unpacked: Path, font: Path, folder: Path, size: tuple[int, int], seed: int = 2) -> None:
    """A line of text on a strip of a photograph (light or dark text for contrast), per file."""
    for k, photo, rng in _frames_of_photos(unpacked, folder, seed):
        w, h = photo.size
        y = int(rng.integers(0, h - 60))
        strip = photo.crop((0, y, w, y + 60)).resize(size)
        light = np.asarray(strip).mean() < 110
        words = " ".join(rng.choice(ocr_frames.WORDS, size=int(rng.integers(1, 3))))
        draw = ImageDraw.Draw(strip)
        draw.text((int(rng.integers(2, 20)), 6), words, fill=(245, 245, 245) if light else (15, 15, 15),
                  font=ImageFont.truetype(str(font), int(size[1] * 0.7)))
        if k % 4 == 3:
            strip = strip.rotate(180)  # the direction classifier's other class
        strip.save(folder / f"{k:02d}.png")


def build(work: Path, name: str, platform: str, auto: bool, model: Path, images: Path) -> dict:
    file, shape, preprocess, _ = MODELS[name]
    folder = work / f"{name}-{platform}-{'auto' if auto else 'int8'}"
    folder.mkdir()
    quantize = f"{{calibration_frames: {CALIBRATION}" + (", auto_precision: {min_cosine: 0.99}}" if auto else "}")
    (folder / "p.yaml").write_text(
        f"accelbuild: 2\nname: b\ntarget: {{family: npu, platform: {platform}, offload: {{max_subgraphs: 16}}}}\n"
        f"models:\n  - name: m\n    path: {model}\n    input_shapes: [{shape}]\n    crop: {{auto: true}}\n"
        f"    data: {{path: {images}, preprocess: {preprocess}}}\n    quantize: {quantize}\n"
        "benchmark: {frames: 20}\n")
    result = subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", "p.yaml"], cwd=folder,
                            capture_output=True, text=True)
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-1][:300]}
    q = json.loads((folder / "build/b/m/quantize.json").read_text())
    bench = json.loads((folder / "build/b/benchmark.json").read_text())
    accuracy = bench["models"][0]["accuracy"]
    auto_record = q.get("auto_precision") or {}
    return {"fps": bench["models"][0]["fps"], "cosine": accuracy["cosine"], "worst_file": accuracy["worst_file"],
            "measured_on": accuracy["measured_on"], "no_signal": accuracy["no_signal_frames"],
            "raised": auto_record.get("raised", []), "reached": auto_record.get("reached"),
            "npu_layers": bench["offload"]["npu_layers"], "host_layers": bench["offload"]["host_layers"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, default=Path(tempfile.gettempdir()) / "accelbuild-bench-wheels")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--platforms", default="tda4vm,x5")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    unpacked = ptq.unpacked_wheels(args.wheels)
    font = ocr_frames.font_file(args.wheels)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        photo_crops(unpacked, work / "photos", (320, 320))
        ocr_frames.text_images(unpacked, font, work / "text", count=FRAMES, plain=(6, 7, 14, 15))
        text_lines(unpacked, font, work / "lines", (320, 48))
        for name in args.models.split(","):
            for platform in args.platforms.split(","):
                model, images = unpacked / MODELS[name][0], work / MODELS[name][3]
                base = build(work, name, platform, False, model, images)
                auto = build(work, name, platform, True, model, images)
                rows.append({"model": name, "platform": platform, "int8": base, "auto": auto})
                if not args.json:
                    print(_line(rows[-1]), flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


def _line(row: dict) -> str:
    base, auto = row["int8"], row["auto"]
    head = f"{row['model']:<10} {row['platform']:<7}"
    if "error" in base or "error" in auto:
        return f"{head} error: {base.get('error') or auto.get('error')}"
    ratio = auto["fps"] / base["fps"] if base["fps"] else float("nan")
    return (f"{head} int8: worst {base['measured_on']} {base['cosine']:.4f} ({base['worst_file'].rsplit('/', 1)[-1]}), "
            f"{base['fps']:,.1f} FPS | auto_precision: {auto['cosine']:.4f}, raised {len(auto['raised'])} layer(s) "
            f"({'target reached' if auto['reached'] else 'NOT reached'}), {auto['fps']:,.1f} FPS (x{ratio:.3f}); "
            f"npu/host layers {auto['npu_layers']}/{auto['host_layers']}; frames without signal {base['no_signal']}")


if __name__ == "__main__":
    raise SystemExit(main())
