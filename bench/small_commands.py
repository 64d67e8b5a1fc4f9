"""Small commands benchmark: ``validate``, ``tensors`` and ``init`` against ``python -c "import onnx, numpy"``.

What is measured
    The wall-clock time of one whole CLI process (interpreter start-up to exit) for each command, on the
    repository's tinydet pipeline (``pipelines/tinydet.yaml``, ``examples/models/``) and, with ``--model``,
    on another model file (a pipeline naming it is written into a temporary folder for ``validate``). Every
    command reads ONNX models, so ``import onnx, numpy`` is the reference; the goal is each command at most
    ``GOAL`` times it.

Cold and warm
    Each command is timed twice over: cold, with an empty state dir for every run (the model is opened:
    imported, cropped, described), and warm, with the state dir the previous run left (the model was
    checked or described before and is read back by content: ``engine/checked_models.py``,
    ``engine/info_cache.py``). Warm is what a user who edits a pipeline and validates it again sees.

Why ratios, measured in the same run
    The machine is shared and its speed drifts: each command is run alternately with the reference, round
    after round (after one warm-up each), and the medians are compared, so a slow moment hits both sides.

Usage::

    python bench/small_commands.py [--rounds N] [--model FILE [--input-shape NAME=H,W,C]] [--json]

Exit code 0 whether or not the goal is met (a benchmark, not a test); 1 if a command fails.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.3
REFERENCE = [sys.executable, "-c", "import onnx, numpy"]


def _time(command: list[str], cwd: Path, state: Path | None = None) -> float:
    """Wall-clock seconds of one run; ``state``: the state dir it uses."""
    if "-o" in command:  # init never overwrites: each run writes the pipeline anew
        Path(command[command.index("-o") + 1]).unlink(missing_ok=True)
    env = {**os.environ, **({"ACCELBUILD_STATE_DIR": str(state)} if state else {})}
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"small_commands.py: {' '.join(command)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed


_RUNS = itertools.count()


def _state(folder: Path, mode: str) -> Path:
    """Cold: an empty state dir for every run; warm: the one state dir every run shares."""
    return folder / (f"state-{next(_RUNS)}" if mode == "cold" else "state")


def _commands(folder: Path, model: Path | None, shapes: list[str]) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "accelbuild.cli"]
    tinydet = ROOT / "examples" / "models" / "tinydet.onnx"
    commands = {
        "validate tinydet": [*cli, "validate", str(ROOT / "pipelines" / "tinydet.yaml")],
        "tensors tinydet": [*cli, "tensors", str(tinydet), "--input-shape", "images=320,320,3"],
        "init tinydet": [*cli, "init", str(tinydet), "--input-shape", "images=320,320,3",
                         "-o", str(folder / "tinydet_init.yaml")],
    }
    if model is not None:
        pipeline = folder / "model.yaml"
        given = {s.split("=")[0]: [int(d) for d in s.split("=")[1].split(",")] for s in shapes}
        pipeline.write_text(f"accelbuild: 2\nname: model\nmodels:\n  - name: model\n    path: {json.dumps(str(model))}\n"
                            + (f"    input_shapes: {json.dumps(given)}\n" if given else ""))
        flags = [arg for s in shapes for arg in ("--input-shape", s)]
        commands |= {
            f"validate {model.name}": [*cli, "validate", str(pipeline)],
            f"tensors {model.name}": [*cli, "tensors", str(model), *flags],
            f"init {model.name}": [*cli, "init", str(model), *flags, "-o", str(folder / "model_init.yaml")],
        }
    return commands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--model", type=Path, help="another model file to time the commands on")
    parser.add_argument("--input-shape", action="append", default=[], metavar="NAME=H,W,C")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    env_path = os.environ.get("PYTHONPATH", "")
    if str(ROOT) not in env_path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env_path) if p)
    results = {}
    with tempfile.TemporaryDirectory(prefix="small-commands-") as tmp:
        folder = Path(tmp)
        for name, command in _commands(folder, args.model and args.model.absolute(), args.input_shape).items():
            for mode in ("cold", "warm"):
                _time(command, folder, _state(folder, mode)), _time(REFERENCE, folder)  # warm-up
                mine, reference = [], []
                for _ in range(args.rounds):
                    mine.append(_time(command, folder, _state(folder, mode)))
                    reference.append(_time(REFERENCE, folder))
                ratio = statistics.median(mine) / statistics.median(reference)
                row = results[f"{name} ({mode})"] = {
                    "median_s": round(statistics.median(mine), 3),
                    "reference_median_s": round(statistics.median(reference), 3),
                    "ratio": round(ratio, 2), "goal_met": ratio <= GOAL}
                if not args.json:
                    print(f"{name + f' ({mode})':<44} {row['median_s']:6.3f} s   import onnx, numpy "
                          f"{row['reference_median_s']:6.3f} s   ratio {ratio:4.2f} "
                          f"({'ok' if ratio <= GOAL else f'over {GOAL}'})", flush=True)
    if args.json:
        print(json.dumps({"goal": GOAL, "rounds": args.rounds, "commands": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
