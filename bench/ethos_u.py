"""Family ethos-u on real models: the build system's overhead around Vela, Vela's estimates, int8 accuracy.

Models (trained, from public wheels, unpacked into a folder for the bench only, never by the product):
PP-OCR's text-direction classifier (``rapidocr-onnxruntime``, ch_ppocr_mobile_v2.0_cls_infer.onnx, input
48x192) and two MediaPipe detectors (``mediapipe`` 0.10.x wheel: face_detection_short_range.tflite, input
128x128, and palm_detection_lite.tflite, 192x192, read by accelbuild's TFLite frontend). Representative
data: the photographs in ``--images`` (scikit-learn's china.jpg and flower.jpg, matplotlib's
grace_hopper.jpg, ...), all of them calibrating (``calibration_frames`` = their count) and measuring.

Per model, a pipeline of family ethos-u is built once through the CLI; then, ``--repeat`` times each:

- ``accelbuild run P.yaml --until assemble --json`` with the Vela output removed and an empty artifact
  cache, so exactly the assemble task runs: ``stage`` is that task's own time as the build reports it
  (Vela in a subprocess, caching and publishing the outputs, parsing Vela's files), ``cli`` the whole
  command's wall time (Python and CLI start-up, loading the config, planning, doit's up-to-date checks of
  the other tasks: paid once per build, not per stage);
- Vela alone: ``vela int8.tflite`` (its console script) with the same options, on the same file.

The table gives medians (seconds), the ratios stage/Vela (the build system's overhead around the
compiler, goal <= 1.5x) and cli/Vela, Vela's estimate for the model (FPS and latency at the system
config's clock), NPU/CPU operators, and the int8 model's accuracy against float in LiteRT (cosine, SQNR)
from benchmark.json.

    python bench/ethos_u.py --models-dir DIR --images DIR [--accelerator ethos-u55-128] [--repeat 3] [--json]
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

REPO = Path(__file__).resolve().parents[1]
MODELS = {  # name -> (file, input_shapes YAML, preprocess YAML)
    "ppocr_cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", "{x: [48, 192, 3]}",
                  "{mean: [127.5, 127.5, 127.5], std: [127.5, 127.5, 127.5]}"),
    "mp_face_short": ("face_detection_short_range.tflite", None,
                      "{mean: [127.5, 127.5, 127.5], std: [127.5, 127.5, 127.5]}"),
    "mp_palm_lite": ("palm_detection_lite.tflite", None, "{mean: [0, 0, 0], std: [255, 255, 255]}"),
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELBUILD_")}
    env["PYTHONPATH"] = str(REPO)
    return env


def _pipeline(work: Path, name: str, models_dir: Path, images: Path, accelerator: str) -> Path:
    file, shapes, preprocess = MODELS[name]
    count = len([p for p in images.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png", ".bmp")])
    lines = ["accelbuild: 1", f"name: {name}", f"target: {{family: ethos-u, accelerator: {accelerator}}}",
             "models:", f"  - name: {name}", f"    path: {models_dir / file}"]
    if shapes:
        lines.append(f"    input_shapes: {shapes}")
    lines += [f"    data: {{path: {images}, preprocess: {preprocess}}}",
              f"    quantize: {{calibration_frames: {count}}}"]
    path = work / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


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


def measure(name: str, work: Path, args: argparse.Namespace) -> dict:
    yaml_path = _pipeline(work, name, args.models_dir, args.images, args.accelerator)
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
    vela_s = statistics.median(alone)
    return {"model": name, "stage_s": round(statistics.median(stage), 3), "cli_s": round(statistics.median(cli), 3),
            "vela_s": round(vela_s, 3), "ratio": round(statistics.median(stage) / vela_s, 2),
            "cli_ratio": round(statistics.median(cli) / vela_s, 2),
            "estimated_by": bench["estimated_by"], "fps": model["fps"], "latency_ms": round(model["latency_ms"], 3),
            "npu_ops": model["npu_ops"], "cpu_ops": len(model["cpu_ops"]), "sram_bytes": model["sram_bytes"],
            "flash_bytes": model["flash_bytes"], "cosine": model["accuracy"]["cosine"],
            "sqnr_db": model["accuracy"]["sqnr_db"], "images": model["accuracy"].get("samples"),
            "writer_max_steps": check["layers"]["max_steps"], "tensors_checked": check["layers"]["tensors"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", type=Path, required=True)
    parser.add_argument("--images", type=Path, required=True)
    parser.add_argument("--accelerator", default="ethos-u55-128")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.models_dir, args.images = args.models_dir.resolve(), args.images.resolve()
    with tempfile.TemporaryDirectory(prefix="ethos-u-bench-") as tmp:
        work = Path(tmp)
        (work / ".git").mkdir()
        rows = [measure(name, work, args) for name in args.models.split(",")]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'model':15} {'stage s':>8} {'cli s':>6} {'vela s':>7} {'ratio':>6} {'cli/v':>6} {'FPS':>8} {'ms':>8} {'NPU':>4} {'CPU':>4} "
          f"{'SRAM KiB':>9} {'cosine':>8} {'SQNR dB':>8} {'writer':>7}")
    for r in rows:
        print(f"{r['model']:15} {r['stage_s']:8.3f} {r['cli_s']:6.3f} {r['vela_s']:7.3f} {r['ratio']:6.2f} "
              f"{r['cli_ratio']:6.2f} {r['fps']:8.1f} "
              f"{r['latency_ms']:8.3f} {r['npu_ops']:4d} {r['cpu_ops']:4d} {r['sram_bytes'] / 1024:9.1f} "
              f"{r['cosine']:8.5f} {r['sqnr_db']:8.2f} {r['writer_max_steps']:7.0f}")
    print(f"FPS and latency: {rows[0]['estimated_by']} for {args.accelerator}; cosine/SQNR: int8.tflite in LiteRT vs "
          "float; writer: largest step difference of any tensor vs quantized.onnx's operator")


if __name__ == "__main__":
    main()
