"""Cold builds: YOLOv8n at 320, effort hard with the closed loop, and the shipped pipelines, from nothing.

What is measured
    The wall-clock time of ``accelbuild run --json`` in a fresh folder with an empty state dir and cache
    (one whole CLI process, interpreter start-up included), against onnxruntime loading the same float
    YOLOv8n and running 100 frames at 1x3x320x320 (also one whole process: ``import onnxruntime``, the
    session, the frames). The two alternate, round after round, after one warm-up of each (bytecode into a
    temporary pycache: ``noop.child_env``); medians are compared, so a slow moment of the shared machine hits both. The project's goal (``GOAL``): the YOLOv8n build in at most 5x the
    onnxruntime time. The shipped pipelines (``pipelines/tinydet.yaml``, its six-variant ``sweep.yaml``)
    are built cold once per round too and shown against the same reference.

The breakdown
    Per stage: the task seconds the build reports (``--json``). With ``--profile``, the YOLOv8n build runs
    once more in this process under cProfile, serially (``target.closed_loop.jobs: 1``, so the split workers'
    time is seen), and its time is split by what it is spent in (``CATEGORIES``: exclusive time of the
    functions of each part, the rest is "other").

YOLOv8n is the 320n.onnx of the ``nudenet`` wheel (a benchmark input only, never a dependency):

    pip download --no-deps nudenet -d /tmp/wheels
    unzip -o -q /tmp/wheels/nudenet-*.whl -d /tmp/wheels/nudenet
    python bench/cold.py --model /tmp/wheels/nudenet/nudenet/320n.onnx [--rounds 3] [--profile] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noop import child_env  # noqa: E402  (the same bytecode footing as the no-op bench)
from scale import find_model  # noqa: E402  (nudenet's YOLOv8n, as scale.py finds it)

REPO = Path(__file__).resolve().parents[1]
GOAL = 5.0  # the YOLOv8n cold build / onnxruntime session + 100 frames
FRAMES = 100
PIPELINE = """accelbuild: 2
name: yolo
target: {{num_chips: 2, effort: hard, closed_loop: {{enabled: true, keep_splits: true{jobs}}}}}
models:
  - {{name: det, path: models/yolov8n.onnx, input_shapes: {{images: [320, 320, 3]}}, crop: {{auto: true}}}}
"""
REFERENCE = f"""
import numpy as np, onnxruntime as ort, sys
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
x = np.random.default_rng(0).random((1, 3, 320, 320), dtype=np.float32)
for _ in range({FRAMES}):
    session.run(None, {{session.get_inputs()[0].name: x}})
"""
# what a profiled build's time goes to: (name, substrings of the function's file or name), first match wins
CATEGORIES = (
    ("mx3 timing simulator", ("accelbuild/targets/mx3/sim/",)),
    ("mx3 mapper", ("accelbuild/targets/mx3/mapper/",)),
    ("onnxruntime (sessions and runs)", ("onnxruntime",)),
    ("onnx shape inference", ("infer_shapes",)),
    ("onnx checker", ("check_model",)),
    ("protobuf (de)serialisation", ("SerializeToString", "ParseFromString", "CopyFrom")),
    ("graph passes", ("accelbuild/passes/",)),
    ("quantization", ("accelbuild/quantize/",)),
    ("hashing", ("_hashlib", "hashlib")),
    ("file writes and fsync", ("fsync", "posix.write", "method 'write'", "posix.replace", "posix.rename")),
    ("numpy", ("numpy",)),
    ("imports", ("<frozen importlib", "marshal.loads", "builtins.compile")),
)


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"cold.py: {' '.join(argv[-3:])} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds, proc.stdout


def yolo_folder(root: Path, model: Path, jobs: str = "") -> Path:
    folder = Path(tempfile.mkdtemp(prefix="yolo-", dir=root))
    (folder / "models").mkdir()
    shutil.copy(model, folder / "models" / "yolov8n.onnx")
    (folder / "yolo.yaml").write_text(PIPELINE.format(jobs=jobs), encoding="utf-8")
    return folder


def shipped_folder(root: Path) -> Path:
    """A copy of the repository's pipelines/ and examples/models/, as a fresh clone has them."""
    folder = Path(tempfile.mkdtemp(prefix="shipped-", dir=root))
    shutil.copytree(REPO / "pipelines", folder / "pipelines", ignore=shutil.ignore_patterns("build"))
    shutil.copytree(REPO / "examples" / "models", folder / "examples" / "models")
    return folder


def build(folder: Path, env: dict[str, str], *pipelines: str) -> tuple[float, dict[str, float]]:
    """A cold ``accelbuild run``: wall seconds and seconds per stage (summed over the build's tasks)."""
    seconds, out = timed([sys.executable, "-m", "accelbuild.cli", "run", *pipelines, "--json"], folder, env)
    stages: dict[str, float] = {}
    for task in json.loads(out)["tasks"]:
        if task["status"] not in ("ran", "cached"):  # cached: another task of this run built it (empty cache)
            raise SystemExit(f"cold.py: {task['name']} was {task['status']}, not built: the build was not cold")
        stages[task["stage"]] = stages.get(task["stage"], 0.0) + task["seconds"]
    return seconds, stages


def profile(model: Path, root: Path) -> dict[str, float]:
    """The YOLOv8n build in this process under cProfile, serially: seconds by ``CATEGORIES``."""
    from accelbuild import cli

    folder = yolo_folder(root, model, jobs=", jobs: 1")
    profiler = cProfile.Profile()
    before = Path.cwd()
    os.chdir(folder)
    try:
        profiler.runcall(cli.main, ["run", "yolo.yaml", "-q", "--state-dir", str(folder / "state")])
    finally:
        os.chdir(before)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    spent = {name: 0.0 for name, _ in CATEGORIES} | {"other": 0.0}

    def category(func: tuple[str, int, str]) -> str:
        where = f"{func[0]} {func[2]}"
        return next((name for name, keys in CATEGORIES if any(k in where for k in keys)), "other")

    for func, (_, _, exclusive, _, callers) in stats.items():
        name = category(func)
        if name == "other" and func[0] == "~" and callers:  # a builtin (max, dict.get): its callers' part
            for caller, edge in callers.items():
                spent[category(caller)] += edge[2]
        else:
            spent[name] += exclusive
    return {name: round(seconds, 3) for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1])}


def measure(model: Path, rounds: int) -> dict:
    samples: dict[str, list[float]] = {"yolo": [], "onnxruntime": [], "shipped": []}
    stage_samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="accelbuild-cold-") as tmp:
        root = Path(tmp)
        env = child_env(root)  # bytecode cached into root/pycache, as noop.py does (its docstring says why)
        timed([sys.executable, "-c", REFERENCE, str(model)], root, env)  # warm-ups: file cache, bytecode
        build(yolo_folder(root, model), env, "yolo.yaml")
        for _ in range(rounds):
            seconds, stages = build(yolo_folder(root, model), env, "yolo.yaml")
            samples["yolo"].append(seconds)
            for stage, s in stages.items():
                stage_samples.setdefault(stage, []).append(s)
            samples["onnxruntime"].append(timed([sys.executable, "-c", REFERENCE, str(model)], root, env)[0])
            shipped = shipped_folder(root)
            samples["shipped"].append(build(shipped / "pipelines", env, "tinydet.yaml", "sweep.yaml")[0])
    medians = {name: statistics.median(values) for name, values in samples.items()}
    ratio = medians["yolo"] / medians["onnxruntime"]
    return {
        "rounds": rounds,
        "median_s": {name: round(s, 3) for name, s in medians.items()},
        "yolo_stages_s": {stage: round(statistics.median(v), 3) for stage, v in stage_samples.items()},
        "ratio": round(ratio, 2),
        "shipped_ratio": round(medians["shipped"] / medians["onnxruntime"], 2),
        "goal": GOAL,
        "goal_met": ratio <= GOAL,
        "samples_s": {name: [round(s, 3) for s in values] for name, values in samples.items()},
    }


def as_text(figures: dict) -> str:
    m = figures["median_s"]
    lines = [
        f"cold builds, medians of {figures['rounds']} alternating rounds",
        f"  YOLOv8n-320, effort hard, closed loop (keep_splits): {m['yolo']:.2f} s",
        f"  onnxruntime: session + {FRAMES} frames of the same model: {m['onnxruntime']:.2f} s",
        f"  ratio: {figures['ratio']:.2f} (goal <= {GOAL}): {'goal met' if figures['goal_met'] else 'goal NOT met'}",
        f"  shipped pipelines (tinydet.yaml + sweep.yaml, 7 builds): {m['shipped']:.2f} s "
        f"(x{figures['shipped_ratio']:.2f} of the reference)",
        "  YOLOv8n build by stage (task seconds):",
        *(f"    {stage:<10} {s:6.2f} s" for stage, s in figures["yolo_stages_s"].items()),
    ]
    if "profile_s" in figures:
        total = sum(figures["profile_s"].values())
        lines.append(f"  YOLOv8n build profiled serially in-process ({total:.1f} s under cProfile), by part:")
        lines += [f"    {name:<32} {s:6.2f} s  {100 * s / total:4.1f}%" for name, s in figures["profile_s"].items()]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="YOLOv8n ONNX (nudenet's 320n.onnx)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--profile", action="store_true", help="also profile one serial build by part")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = find_model(args.model)
    figures = measure(model, args.rounds)
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="accelbuild-cold-profile-") as tmp:
            figures["profile_s"] = profile(model, Path(tmp))
    print(json.dumps(figures, indent=2) if args.json else as_text(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
