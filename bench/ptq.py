"""Post-training static quantization: accelbuild's QDQ quantizer against onnxruntime's ``quantize_static``.

Real trained models from public wheels (downloaded into a folder for the bench only, never by the
product): YOLOv8n (``nudenet``, 320n.onnx) and PP-OCRv4 det, rec and the text-direction classifier
(``rapidocr-onnxruntime``). Real photographs from wheels: scikit-learn's ``china.jpg`` and
``flower.jpg`` and matplotlib's ``grace_hopper.jpg``; each fold calibrates on seeded crops of two of them
and measures on crops of the third (written as files and read with ``accelbuild.data``), and the table
averages the folds (one photograph is a small test set: single folds swing by a dB on the OCR models).

Each model is imported and cropped by accelbuild (``run --until crop``, auto crop: YOLOv8's box decoding
stays on the host), and its ``ai.onnx`` is quantized twice with 8-bit per-channel weights and 8-bit
asymmetric per-tensor activations on the same calibration frames, for every method both have (MinMax,
Percentile at the same percentile, Entropy: onnxruntime with its default options) and ``mse`` (accelbuild
only). Both QDQ models run in onnxruntime on the measurement frames with its QDQ fusion off, so that
Quantize/DequantizeLinear compute what ONNX defines (the integer arithmetic of an accelerator, the same on
every machine: with fusion on, onnxruntime's int8 kernels saturate on x86 CPUs without VNNI, which moved
single figures by 0.3 dB on an AVX2-only EPYC); the table gives the output SQNR and cosine against the float
model and the wall time of each quantizer call (calibration, model writing) in the same process.

NNCF (``nncf.quantize``, its ONNX backend) is a third peer when ``--nncf-python`` names the interpreter of a
venv of its own (NNCF is never a dependency of accelbuild; without the option its rows are skipped):

    python3 -m venv /work/venv-nncf
    /work/venv-nncf/bin/pip install nncf==3.4.0 onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6  # no torch

``bench/peers/nncf_ptq.py`` runs there on the same ``ai.onnx`` as it is (static shapes, opset 21; NNCF needs
opset 13 or later for per-channel weights) and the same calibration frames (an .npz),
with 8-bit per-channel weights, 8-bit per-tensor activations and ``subset_size`` = calibration frames, once
with NNCF's default preset for CNNs (``performance``: symmetric activations) and once with ``mixed``
(asymmetric activations, like the others); everything else is NNCF's default (its mean-of-per-frame min/max
activation ranges, fast bias correction, 7-bit first-layer weights against overflow). Its QDQ model is
measured as the others are; its time is ``nncf.quantize`` plus writing the model, taken in the child process
(interpreter start and imports excluded). An NNCF row sets accelbuild's default method (``QdqConfig()``,
percentile) against NNCF. NNCF places fewer quantizers (as OpenVINO's CPU kernels need them: none between a
convolution and its activation, none in squeeze-excitation blocks); ``--json`` gives the activation
QuantizeLinear count of its model, and the bench stops if that is zero or NNCF saw other frames.

    python bench/ptq.py [--wheels DIR] [--calibration N] [--measure N] [--folds 1-3] [--models yolov8n,...]
                        [--tensorrt-entropy] [--nncf-python PATH] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime import quantization as ortq
from PIL import Image

from accelbuild import accuracy
from accelbuild.data import DataSpec, input_infos, load_inputs
from accelbuild.frontends.onnx_model import save_onnx, serialize
from accelbuild.passes.sections import read_section
from accelbuild.quantize.qdq import QdqConfig, quantize_qdq
from accelbuild.quantize.weights import sqnr_db

WHEELS = {"nudenet": "nudenet", "rapidocr_onnxruntime": "rapidocr-onnxruntime",
          "scikit_learn": "scikit-learn", "matplotlib": "matplotlib"}
PHOTOS = ["sklearn/datasets/images/china.jpg", "sklearn/datasets/images/flower.jpg",
          "matplotlib/mpl-data/sample_data/grace_hopper.jpg"]
PERCENTILE = 99.99


# name, file in the wheels, input shape (H, W, C), preprocess (color, mean, std), crop
MODELS = {
    "yolov8n": ("nudenet/320n.onnx", (320, 320, 3), ("rgb", (0.0,), (255.0,)), True),
    "ppocr_det": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx", (480, 480, 3),
                  ("bgr", (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)), True),
    "ppocr_rec": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx", (48, 320, 3),
                  ("bgr", (127.5,), (127.5,)), False),
    "ppocr_cls": ("rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", (48, 192, 3),
                  ("bgr", (127.5,), (127.5,)), False),
}
METHODS = [("minmax", ortq.CalibrationMethod.MinMax), ("percentile", ortq.CalibrationMethod.Percentile),
           ("entropy", ortq.CalibrationMethod.Entropy), ("mse", None)]
DEFAULT_METHOD = QdqConfig().method  # what an NNCF row sets against NNCF
NNCF_PEER = Path(__file__).resolve().parent / "peers" / "nncf_ptq.py"
NNCF_PRESETS = {"nncf-perf": "performance", "nncf-mixed": "mixed"}


def unpacked_wheels(folder: Path, wheels: dict[str, str] = WHEELS, into: str = "unpacked",
                    suffixes: tuple[str, ...] = (".onnx", ".jpg")) -> Path:
    """Download (once) the ``wheels`` (file-name stem -> pip name) that carry the models and photographs, and
    unpack their files ending in ``suffixes`` into ``folder/into``."""
    folder.mkdir(parents=True, exist_ok=True)
    have = {p.name.split("-")[0].lower() for p in folder.glob("*.whl")}
    missing = [pip for stem, pip in wheels.items() if stem.lower() not in have]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "-d", str(folder), *missing], check=True)
    unpacked = folder / into
    if not unpacked.exists():
        for wheel in sorted(folder.glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(unpacked, [n for n in archive.namelist() if n.endswith(suffixes)])
    return unpacked


def write_crops(photos: list[Path], folder: Path, aspect: float, per_photo: int, seed: int) -> None:
    """Seeded crops (40..100 % of the photo's shorter side, the model input's aspect ratio) as PNG files."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for p, photo in enumerate(photos):
        image = Image.open(photo).convert("RGB")
        w, h = image.size
        for k in range(per_photo):
            cw = min(w, int(min(w, h * aspect) * rng.uniform(0.4, 1.0)))
            ch = max(8, int(cw / aspect))
            x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, max(1, h - ch + 1)))
            crop = image.crop((x, y, x + cw, y + ch))
            if k % 2:
                crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            crop.save(folder / f"{p:02d}_{k:02d}.png")


def ai_sections(work: Path, unpacked: Path, names: list[str]) -> dict[str, tuple[Path, Path]]:
    """Import (static shapes, folded constants) and crop every model with accelbuild's own CLI."""
    (work / "models").mkdir()
    yaml = ["accelbuild: 2", "name: bench", "models:"]
    for name in names:
        file, (h, w, c), _, crop = MODELS[name]
        target = work / "models" / f"{name}.onnx"
        target.write_bytes((unpacked / file).read_bytes())
        yaml += [f"  - name: {name}", f"    path: models/{name}.onnx", f"    input_shapes: [[{h}, {w}, {c}]]"]
        if crop:
            yaml.append("    crop: {auto: true}")
    (work / "p.yaml").write_text("\n".join(yaml) + "\n")
    subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", "p.yaml", "--until", "crop", "--state-dir",
                    "state"], cwd=work, check=True, capture_output=True)
    result = {}
    for name in names:
        folder = work / "build/bench" / name
        result[name] = (folder / "ai.onnx", folder / "pre.onnx")
    return result


def frames(work: Path, unpacked: Path, name: str, full: onnx.ModelProto, pre: onnx.ModelProto | None,
           calibration: int, measured: int, fold: int) -> tuple[list[dict], list[dict]]:
    """Fold k: crops of every photograph but the k-th calibrate, crops of the k-th measure."""
    _, (h, w, _), (color, mean, std), _ = MODELS[name]
    sets = []
    held_out = [PHOTOS[fold]]
    for label, photos, count, seed in (("calibration", [p for p in PHOTOS if p not in held_out], calibration, 0),
                                       ("measure", held_out, measured, 1)):
        folder = work / "data" / name / f"fold{fold}" / label
        per_photo = -(-count // len(photos))
        write_crops([unpacked / p for p in photos], folder, w / h, per_photo, seed)
        spec = DataSpec(folder, f"data/{name}/fold{fold}/{label}/", count=count, color=color, mean=mean, std=std)
        sets.append(accuracy.through(pre, load_inputs(spec, input_infos(full))))
    return sets[0], sets[1]


class Reader(ortq.CalibrationDataReader):
    def __init__(self, feeds: list[dict], names: set[str]) -> None:
        self.feeds = iter([{k: v for k, v in f.items() if k in names} for f in feeds])

    def get_next(self):
        return next(self.feeds, None)


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    """A session that computes QDQ graphs as ONNX defines them (see the module docstring)."""
    options = ort.SessionOptions()
    options.add_session_config_entry("session.disable_quant_qdq", "1")
    return ort.InferenceSession(serialize(model), options, providers=["CPUExecutionProvider"])


def outputs(sess: ort.InferenceSession, feeds: list[dict]) -> np.ndarray:
    names = {i.name for i in sess.get_inputs()}
    runs = [sess.run(None, {k: v for k, v in f.items() if k in names}) for f in feeds]
    return np.concatenate([o.astype(np.float64).ravel() for outs in runs for o in outs])


def figures(reference: np.ndarray, got: np.ndarray) -> dict[str, float]:
    cosine = float(np.dot(reference, got) / (np.linalg.norm(reference) * np.linalg.norm(got)))
    return {"sqnr_db": round(sqnr_db(reference, got), 2), "cosine": round(cosine, 5)}


def ort_tensorrt_entropy(ai: onnx.ModelProto, calib: list[dict], path: Path, work: Path) -> None:
    """onnxruntime's entropy calibrator with TensorRT's settings (2048 bins, 128 quantized bins), which
    quantize_static cannot pass on (it always uses 128 bins and so tries a single threshold: the full
    range); the ranges go to quantize_static through its calibration cache."""
    from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    source, cache = work / "entropy_source.onnx", work / "entropy_ranges.json"
    onnx.save(ai, str(source))
    calibrator = create_calibrator(source, list(set(QLinearOpsRegistry) | set(QDQRegistry)),
                                   augmented_model_path=str(work / "entropy_augmented.onnx"),
                                   calibrate_method=ortq.CalibrationMethod.Entropy,
                                   extra_options={"num_bins": 2048, "num_quantized_bins": 128})
    calibrator.collect_data(Reader(calib, {v.name for v in ai.graph.input}))
    save_tensors_data(calibrator.compute_data(), cache)
    ortq.quantize_static(_copy(ai), str(path), None, quant_format=ortq.QuantFormat.QDQ, per_channel=True,
                         activation_type=ortq.QuantType.QInt8, weight_type=ortq.QuantType.QInt8,
                         calibrate_method=ortq.CalibrationMethod.Entropy, calibration_cache_path=str(cache))


def compare(ai: onnx.ModelProto, calib: list[dict], measure: list[dict], work: Path,
            tensorrt_entropy: bool = False, nncf_python: Path | None = None) -> list[dict]:
    reference = outputs(session(ai), measure)
    names = {v.name for v in ai.graph.input}
    rows = []
    methods = METHODS + ([("entropy-trt", "tensorrt")] if tensorrt_entropy else [])
    for method, ort_method in methods:
        row: dict = {"method": method}
        started = time.perf_counter()
        ours = "entropy" if method == "entropy-trt" else method
        result = quantize_qdq(ai, calib, QdqConfig(method=ours, percentile=PERCENTILE))
        save_onnx(result.model, work / f"ours_{method}.onnx")
        row["accelbuild_s"] = time.perf_counter() - started
        row["accelbuild"] = figures(reference, outputs(session(result.model), measure))
        if ort_method is not None:
            path = work / f"ort_{method}.onnx"
            started = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):  # it prints its progress
                if ort_method == "tensorrt":
                    ort_tensorrt_entropy(ai, calib, path, work)
                else:
                    ortq.quantize_static(_copy(ai), str(path), Reader(calib, names), quant_format=ortq.QuantFormat.QDQ,
                                         per_channel=True, activation_type=ortq.QuantType.QInt8,
                                         weight_type=ortq.QuantType.QInt8, calibrate_method=ort_method,
                                         extra_options={"CalibPercentile": PERCENTILE})
            row["onnxruntime_s"] = time.perf_counter() - started
            row["onnxruntime"] = figures(reference, outputs(session(onnx.load(str(path))), measure))
        rows.append(row)
    if nncf_python is not None:
        ours = next(r for r in rows if r["method"] == DEFAULT_METHOD)
        for row in nncf(ai, calib, measure, reference, work, nncf_python):
            rows.append({"method": row.pop("method"), "accelbuild": ours["accelbuild"],
                         "accelbuild_s": ours["accelbuild_s"], **row})
    return rows


def nncf(ai: onnx.ModelProto, calib: list[dict], measure: list[dict], reference: np.ndarray, work: Path,
         python: Path) -> list[dict]:
    """NNCF's quantizer on the same model and calibration frames, in its own interpreter (``NNCF_PEER``), per
    preset; its QDQ model is measured here like the others."""
    source, frames_path = work / "nncf_source.onnx", work / "nncf_calibration.npz"
    save_onnx(ai, source)
    names = [v.name for v in ai.graph.input if v.name in calib[0]]
    np.savez(frames_path, **{n: np.stack([f[n] for f in calib]) for n in names})
    rows = []
    for method, preset in NNCF_PRESETS.items():
        path = work / f"{method}.onnx"
        done = subprocess.run([str(python), str(NNCF_PEER), str(source), str(frames_path), str(path),
                               "--preset", preset], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{NNCF_PEER.name} --preset {preset} failed:\n{done.stderr[-4000:]}")
        report = json.loads(done.stdout.strip().splitlines()[-1])
        model = onnx.load(str(path))
        if report["frames"] != len(calib) or not activation_quantizers(model):
            raise RuntimeError(f"NNCF ({preset}) calibrated on {report['frames']} frames of {len(calib)} and "
                               f"quantized {activation_quantizers(model)} activations")
        rows.append({"method": method, "nncf": figures(reference, outputs(session(model), measure)),
                     "nncf_s": report["quantize_s"] + report["save_s"], "nncf_version": report["nncf"],
                     "activation_quantizers": activation_quantizers(model)})
    return rows


def activation_quantizers(model: onnx.ModelProto) -> int:
    """QuantizeLinear nodes that quantize a computed tensor (not a constant weight)."""
    constants = {i.name for i in model.graph.initializer}
    constants |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    return sum(n.op_type == "QuantizeLinear" and n.input[0] not in constants for n in model.graph.node)


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """quantize_static moves the initializers of the model it is given to (temporary) external files."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=Path(tempfile.gettempdir()) / "accelbuild-bench-wheels")
    parser.add_argument("--calibration", type=int, default=32, help="calibration frames per fold")
    parser.add_argument("--measure", type=int, default=32, help="measurement frames per fold")
    parser.add_argument("--folds", type=int, default=3, choices=[1, 2, 3],
                        help="leave-one-photograph-out folds, averaged (1: grace_hopper.jpg held out)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--tensorrt-entropy", action="store_true",
                        help="also run onnxruntime's entropy calibrator with TensorRT's settings (slow)")
    parser.add_argument("--nncf-python", type=Path,
                        help="interpreter of a venv with nncf (see the module docstring): adds NNCF's rows")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.nncf_python is None:
        print("NNCF skipped (no --nncf-python)", file=sys.stderr)
    logging.basicConfig(level=logging.ERROR)  # onnxruntime's quantizer warns about pre-processing
    unpacked = unpacked_wheels(args.wheels)
    names = args.models.split(",")
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, (ai_path, pre_path) in ai_sections(work, unpacked, names).items():
            ai = onnx.load(str(ai_path))
            pre = read_section(pre_path)  # None: the crop stage cut off no pre-processing
            full = onnx.load(str(work / "build/bench" / name / "imported.onnx"))
            folds = []
            for fold in range(len(PHOTOS) - args.folds, len(PHOTOS)):
                calib, measure = frames(work, unpacked, name, full, pre, args.calibration, args.measure, fold)
                folds.append(compare(ai, calib, measure, work, args.tensorrt_entropy, args.nncf_python))
            for rows in zip(*folds):
                table.append({"model": name, **_mean(list(rows))})
                print(_line(table[-1]) if not args.json else "", end="\n" if not args.json else "", flush=True)
    if args.json:
        print(json.dumps(table, indent=2))
        return 0
    _summary(table)
    return 0


def _mean(rows: list[dict]) -> dict:
    """Figures averaged over folds (dB and cosine: mean; seconds: sum)."""
    result: dict = {"method": rows[0]["method"], "folds": len(rows)}
    for tool in ("accelbuild", *PEERS):
        if tool in rows[0]:
            result[tool] = {k: round(float(np.mean([r[tool][k] for r in rows])), 5) for k in rows[0][tool]}
            result[f"{tool}_s"] = sum(r[f"{tool}_s"] for r in rows)
    for key in ("nncf_version", "activation_quantizers"):
        if key in rows[0]:
            result[key] = rows[0][key]
    return result


PEERS = ("onnxruntime", "nncf")
HEADER = (f"{'model':<11}{'method':<11}{'accelbuild dB':>14}{'cosine':>9}{'peer dB':>9}{'cosine':>9}"
          f"{'diff dB':>9}{'ours s':>8}{'peer s':>8}{'time x':>8}")


def _line(r: dict) -> str:
    if not hasattr(_line, "printed"):
        _line.printed = True  # type: ignore[attr-defined]
        print(f"output SQNR / cosine vs float on a held-out photograph (mean of {r['folds']} leave-one-out "
              f"fold(s)); 8-bit weights (per channel) and activations (asymmetric but nncf-perf); percentile "
              f"{PERCENTILE}; seconds summed over folds; peer: onnxruntime, or NNCF against accelbuild's default "
              f"method ({DEFAULT_METHOD}) in the nncf rows\n{HEADER}")
    ours = r["accelbuild"]
    text = f"{r['model']:<11}{r['method']:<11}{ours['sqnr_db']:>14.2f}{ours['cosine']:>9.4f}"
    peer = next((p for p in PEERS if p in r), None)
    if peer is not None:
        theirs = r[peer]
        text += (f"{theirs['sqnr_db']:>9.2f}{theirs['cosine']:>9.4f}{ours['sqnr_db'] - theirs['sqnr_db']:>9.2f}"
                 f"{r['accelbuild_s']:>8.1f}{r[f'{peer}_s']:>8.1f}{r['accelbuild_s'] / r[f'{peer}_s']:>8.2f}")
    else:
        text += f"{'-':>9}{'-':>9}{'-':>9}{r['accelbuild_s']:>8.1f}{'-':>8}{'-':>8}"
    return text


def _summary(table: list[dict]) -> None:
    paired = [r for r in table if "onnxruntime" in r]
    better = sum(r["accelbuild"]["sqnr_db"] >= r["onnxruntime"]["sqnr_db"] - 0.01 for r in paired)
    slowest = max(r["accelbuild_s"] / r["onnxruntime_s"] for r in paired)
    print(f"SQNR equal or better in {better} of {len(paired)} pairs (goal: all); "
          f"time ratio at most {slowest:.2f} (goal: <= 2)")
    against = [r for r in table if "nncf" in r]
    if against:
        behind = [f"{r['model']} {r['method']} {r['accelbuild']['sqnr_db'] - r['nncf']['sqnr_db']:+.2f} dB"
                  for r in against if r["accelbuild"]["sqnr_db"] < r["nncf"]["sqnr_db"] - 0.01]
        print(f"NNCF {against[0]['nncf_version']}: accelbuild's {DEFAULT_METHOD} equal or better in "
              f"{len(against) - len(behind)} of {len(against)}" + (f"; behind: {', '.join(behind)}" if behind else ""))


if __name__ == "__main__":
    sys.exit(main())
