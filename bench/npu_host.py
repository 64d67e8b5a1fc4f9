"""Family npu's host code compiled by TVM (``offload.host_compiler: tvm``) on real trained models and photographs.

Two builds, as issue 27's acceptance names them: YOLOv8n (``nudenet``'s 320n.onnx, uncropped, so the box
decoding and the SPPF max-pools run on the Arm cores) on ``tda4vm``, and PP-OCRv4's text detector and
recognizer in one pipeline (``rapidocr-onnxruntime``) on ``mlsoc``. Calibration and every check use seeded
crops of real photographs (scikit-learn's china.jpg and flower.jpg, matplotlib's grace_hopper.jpg).

Each pipeline is built three times through the CLI in clean folders: twice with the tvm extra's default
(host_compiler tvm; the packages must be byte-identical) and once with ``host_compiler: onnx``. Printed:
each host program's ``file`` type, its check against onnxruntime on the real inputs (cosine, max abs error),
its time measured here in TVM's VM, the profile's model of the board and the scaled board estimate; then
each model's accuracy against float with the host code as TVM built it and as float ONNX in onnxruntime.

    python bench/npu_host.py [--wheels DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ptq  # noqa: E402  (the bench's wheel cache and photo crops)

PIPELINES = {
    "yolo_tda4vm": """\
accelbuild: 2
name: yolo_tda4vm
target: {{family: npu, platform: tda4vm, offload: {offload}}}
models:
  - name: yolov8n
    path: {unpacked}/nudenet/320n.onnx
    input_shapes: {{images: [320, 320, 3]}}
    data: {{path: photos_320x320/, preprocess: {{color: rgb, mean: [0], std: [255]}}}}
""",
    "ocr_mlsoc": """\
accelbuild: 2
name: ocr_mlsoc
target: {{family: npu, platform: mlsoc, offload: {offload}}}
models:
  - name: det
    path: {unpacked}/rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx
    input_shapes: {{x: [320, 320, 3]}}
    data: {{path: photos_320x320/, preprocess: {{color: bgr, mean: [123.675, 116.28, 103.53],
                                                std: [58.395, 57.12, 57.375]}}}}
  - name: rec
    path: {unpacked}/rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx
    input_shapes: {{x: [48, 320, 3]}}
    data: {{path: photos_48x320/, preprocess: {{color: bgr, mean: [127.5], std: [127.5]}}}}
""",
}


def build(work: Path, name: str, unpacked: Path, offload: str) -> Path:
    (work / f"{name}.yaml").write_text(PIPELINES[name].format(unpacked=unpacked, offload=offload))
    result = subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", f"{name}.yaml"], cwd=work,
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    return work / "build" / name


def file_types(package: Path) -> dict[str, str]:
    """``file``'s word on each host program of a package."""
    found = {}
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(package) as tar:
        for info in tar.getmembers():
            if info.name.endswith((".so", ".tar")):
                path = Path(tmp) / info.name
                path.write_bytes(tar.extractfile(info).read())
                found[info.name] = subprocess.run(["file", "-b", str(path)], capture_output=True,
                                                  text=True).stdout.split(",")[:2]
    return {name: ",".join(words).strip() for name, words in found.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=Path(tempfile.gettempdir()) / "accelbuild-bench-wheels")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    unpacked = ptq.unpacked_wheels(args.wheels)
    photos = [unpacked / p for p in ptq.PHOTOS]
    results = {}
    with tempfile.TemporaryDirectory(prefix="accelbuild-bench-npu-host-") as tmp:
        runs = [Path(tmp) / run for run in ("tvm_1", "tvm_2", "onnx")]
        for run in runs:
            (run / ".git").mkdir(parents=True)
            ptq.write_crops(photos, run / "photos_320x320", 1.0, 4, seed=0)
            ptq.write_crops(photos, run / "photos_48x320", 320 / 48, 4, seed=0)
        for name in PIPELINES:
            first, second = (build(run, name, unpacked, "{}") for run in runs[:2])
            plain = build(runs[2], name, unpacked, "{host_compiler: onnx}")
            package = f"{name}.tar.gz"
            bench = json.loads((first / "benchmark.json").read_text())
            onnx_bench = json.loads((plain / "benchmark.json").read_text())
            results[name] = {
                "byte_identical": all((first / f).read_bytes() == (second / f).read_bytes()
                                      for f in (package, "host_build.tar.gz", "host_code.json")),
                "package_bytes": (first / package).stat().st_size,
                "file": file_types(first / package),
                "host_code": bench["offload"]["host_code"],
                "accuracy": {m["name"]: {"tvm": m["accuracy"]["cosine"], "onnx": o["accuracy"]["cosine"],
                                         "worst_file": m["accuracy"].get("worst_file")}
                             for m, o in zip(bench["models"], onnx_bench["models"])},
                "not_compiled_reason": onnx_bench["offload"]["host_code"]["reason"],
            }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for name, r in results.items():
        code = r["host_code"]
        print(f"\n{name}: {code['compiler']}, {code['format']}, target {code['board_target'].get('mcpu')}; "
              f"package {r['package_bytes']:,} bytes, byte-identical across two clean builds: {r['byte_identical']}")
        print(f"  measured on {code['measured_on']}; this core {code['this_core']}")
        print(f"  {'subgraph':10} {'file':42} {'cosine':>9} {'max err':>9} {'here ms':>8} {'model ms':>8} "
              f"{'scaled ms':>9}")
        for s in code["subgraphs"]:
            if not s["compiled"]:
                print(f"  {s['name']:10} float ONNX: {s['reason']}")
                continue
            print(f"  {s['name']:10} {r['file'].get(s['file'], '?')[:42]:42} {s['check']['cosine']:9.6f} "
                  f"{s['check']['max_abs_err']:9.3g} {s['measured_ms']:8.3f} {s['modelled_ms']:8.3f} "
                  f"{s['scaled_ms']:8.3f}")
        compiled = [s for s in code["subgraphs"] if s["compiled"]]
        print(f"  per frame: {sum(s['measured_ms'] for s in compiled):.3f} ms here, "
              f"{sum(s['modelled_ms'] for s in compiled):.3f} ms modelled for {code['board_cpu']}, "
              f"{sum(s['scaled_ms'] for s in compiled):.3f} ms scaled estimate")
        for model, a in r["accuracy"].items():
            print(f"  {model}: cosine vs float, host code as TVM built it {a['tvm']:.5f}, as float ONNX "
                  f"{a['onnx']:.5f} (worst frame {a['worst_file']})")
        print(f"  with host_compiler onnx: {r['not_compiled_reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
