"""A real text detector on text images, frame by frame: what mx3's ``auto_precision`` reaches on the worst
frame with signal.

PP-OCRv4's detector (DBNet, from the ``rapidocr-onnxruntime`` wheel) on eight 640x480 images: six crops of
real photographs (scikit-learn's ``china.jpg`` and ``flower.jpg``, matplotlib's ``grace_hopper.jpg``) with
lines of text drawn on them in matplotlib's DejaVu fonts, at seeded sizes, colours and places, and two crops
without text, whose probability map is ~0 (the frames the per-frame records flag as without signal). The
text is synthetic; the photographs and the detector are real. Wheels are downloaded once into ``--wheels``
(never by the product).

It builds the detector for mx3 twice with ``models[].data`` on these images: as configured by default, and
with ``auto_precision: {min_cosine: 0.99}``; and prints, per frame, its role, whether it has signal and its
cosine against float, then the headline (the worst frame with signal), the pooled cosine over all frames
(what the records said before issue 23), the layers auto_precision raised and whether it reached the target.

    python bench/ocr_frames.py [--wheels DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ptq  # noqa: E402  (the bench's wheel cache: models and photographs)

WORDS = ("invoice", "total", "2026-11-24", "accelbuild", "PP-OCRv4", "detector", "frame", "held out", "EUR 19.90",
         "platform", "signal", "quantized", "Lorem ipsum dolor", "NPU", "bfloat16", "Ethos-U", "page 3 of 7")
SIZE = (640, 480)


def font_file(wheels: Path) -> Path:
    """DejaVu Sans from the matplotlib wheel (extracted once)."""
    target = wheels / "unpacked" / "DejaVuSans.ttf"
    if not target.exists():
        wheel = next(wheels.glob("matplotlib-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            member = next(n for n in archive.namelist() if n.endswith("mpl-data/fonts/ttf/DejaVuSans.ttf"))
            target.write_bytes(archive.read(member))
    return target


def text_images(unpacked: Path, font: Path, folder: Path, seed: int = 0, count: int = 8,
                plain: tuple[int, ...] = (6, 7)) -> list[str]:
    """``count`` photograph crops with text, except those in ``plain`` (by default six with text and two
    without); returns the file names (sorted, as the data folder)."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    photos = [Image.open(unpacked / p).convert("RGB") for p in ptq.PHOTOS]
    names = []
    for k in range(count):
        photo = photos[k % len(photos)]
        w, h = photo.size
        cw = min(w, int(h * SIZE[0] / SIZE[1] * rng.uniform(0.6, 1.0)))
        ch = int(cw * SIZE[1] / SIZE[0])
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        image = photo.crop((x, y, x + cw, y + ch)).resize(SIZE)
        with_text = k not in plain
        if with_text:
            draw = ImageDraw.Draw(image)
            for line in range(int(rng.integers(3, 7))):
                size = int(rng.integers(18, 48))
                words = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 4))))
                colour = tuple(int(c) for c in (rng.integers(0, 60, 3) if rng.uniform() < 0.6 else
                                                 rng.integers(200, 256, 3)))
                place = (int(rng.integers(10, SIZE[0] // 2)), int(20 + line * SIZE[1] / 7 + rng.integers(0, 20)))
                draw.text(place, words, fill=colour, font=ImageFont.truetype(str(font), size))
        name = f"{k:02d}_{'text' if with_text else 'plain'}.png"
        image.save(folder / name)
        names.append(name)
    return names


def build(work: Path, model: Path, auto: bool) -> dict:
    """Build for mx3 on the images; returns quantize.json and benchmark.json's accuracy."""
    folder = work / ("auto" if auto else "default")
    folder.mkdir()
    quantize = "    quantize: {auto_precision: {min_cosine: 0.99}}\n" if auto else ""
    (folder / "p.yaml").write_text(
        "accelbuild: 2\nname: ocr\ntarget: {family: mx3, num_chips: min}\nmodels:\n  - name: det\n"
        f"    path: {model}\n    input_shapes: {{x: [480, 640, 3]}}\n"
        "    data:\n      path: ../images\n"
        "      preprocess: {color: bgr, mean: [123.675, 116.28, 103.53], std: [58.395, 57.12, 57.375]}\n"
        f"{quantize}benchmark: {{frames: 20}}\n")
    result = subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", "p.yaml"], cwd=folder,
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"build failed:\n{result.stderr[-3000:]}")
    quantize_record = json.loads((folder / "build/ocr/det/quantize.json").read_text())
    bench = json.loads((folder / "build/ocr/benchmark.json").read_text())
    return {"quantize": quantize_record, "accuracy": bench["models"][0]["accuracy"], "fps": bench["models"][0]["fps"],
            "log": [line for line in result.stderr.splitlines() if "warning" in line or "auto precision" in line]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, default=Path(tempfile.gettempdir()) / "accelbuild-bench-wheels")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    unpacked = ptq.unpacked_wheels(args.wheels)
    font = font_file(args.wheels)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        text_images(unpacked, font, work / "images")
        model = unpacked / ptq.MODELS["ppocr_det"][0]
        for auto in (False, True):
            results["auto_precision" if auto else "default"] = build(work, model, auto)
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for label, r in results.items():
        acc = r["accuracy"]
        print(f"\n{label}: {r['fps']:,.1f} FPS simulated; headline cosine {acc['cosine']:.5f} "
              f"(worst {acc['measured_on']} frame with signal: {acc['worst_file']}; mean {acc['mean_cosine']:.5f}; "
              f"{acc['no_signal_frames']} frame(s) without signal)")
        for frame in acc["frames"]:
            print(f"  {frame['file']:<24} {frame['role']:<12} signal {str(frame['signal']):<5} "
                  f"cosine {frame['cosine']:.5f}  SQNR {frame['sqnr_db']:6.2f} dB")
        auto = r["quantize"].get("auto_precision")
        if auto:
            print(f"  auto_precision: {auto['reason']}; raised {len(auto['raised'])} layer(s), "
                  f"+{auto['extra_bytes']:,} bytes; cosine {auto['start_cosine']:.5f} -> {auto['cosine']:.5f}")
        for line in r["log"]:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
