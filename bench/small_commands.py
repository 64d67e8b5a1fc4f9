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
    The spread is each round's ratio (the command over the reference run right after it): p10 and p90. CPU time
    (user + system, of the process and its children) is reported beside wall time: on a machine shared with
    other work it is the steadier figure.

Compiled bytecode, as an installed package has it
    A pip-installed package and numpy and onnx have their modules compiled (``__pycache__``); a checkout run
    with ``PYTHONDONTWRITEBYTECODE`` set would compile accelbuild's modules from source in every run (about
    0.1 s) while the reference reads numpy's and onnx's compiled ones. Every process here runs with
    ``PYTHONPYCACHEPREFIX`` in the temporary folder and bytecode writing on, so the warm-up compiles both sides
    once and the counted runs read bytecode, as a user's do.

Before and after
    ``--baseline DIR`` (a checkout of another commit, e.g. from ``git worktree add`` or ``git archive``) times
    the same commands with that code too, in the same rounds: command, baseline, reference.

Usage::

    python bench/small_commands.py [--rounds N] [--model FILE [--input-shape NAME=H,W,C]] [--baseline DIR] [--json]

Exit code 0 whether or not the goal is met (a benchmark, not a test); 1 if a command fails.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import timed_run  # noqa: E402  (bench/ is not a package)

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.3
REFERENCE = [sys.executable, "-c", "import onnx, numpy"]


def _time(command: list[str], cwd: Path, state: Path | None = None, code: Path = ROOT) -> tuple[float, float]:
    """Wall-clock and CPU (user + system) seconds of one run; ``state``: the state dir it uses; ``code``: the
    checkout it runs."""
    if "-o" in command:  # init never overwrites: each run writes the pipeline anew
        Path(command[command.index("-o") + 1]).unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPYCACHEPREFIX": str(cwd / "pycache" / str(code).replace(os.sep, "_")),
            "PYTHONPATH": os.pathsep.join(p for p in (str(code), os.environ.get("PYTHONPATH", "")) if p),
            **({"ACCELBUILD_STATE_DIR": str(state)} if state else {})}
    proc, elapsed, cpu = timed_run(command, cwd=cwd, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"small_commands.py: {' '.join(command)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed, cpu


_RUNS = itertools.count()


def _state(folder: Path, mode: str, code: Path) -> Path:
    """Cold: an empty state dir for every run; warm: the one state dir every run of ``code`` shares."""
    return folder / (f"state-{next(_RUNS)}" if mode == "cold" else f"state-{str(code).replace(os.sep, '_')}")


def _row(mine: list[tuple[float, float]], reference: list[tuple[float, float]]) -> dict:
    """Per figure (wall, CPU): medians, their ratio, and the spread of the rounds' own ratios (each run over the
    reference after it). The goal is on wall time; CPU time is what a busy machine disturbs least."""
    row: dict = {}
    for i, figure in enumerate(("", "cpu_")):
        ours, theirs = [m[i] for m in mine], [r[i] for r in reference]
        pairs = sorted(m / r for m, r in zip(ours, theirs))
        deciles = statistics.quantiles(pairs, n=10) if len(pairs) > 1 else pairs * 9
        row |= {f"{figure}median_s": round(statistics.median(ours), 3),
                f"{figure}reference_median_s": round(statistics.median(theirs), 3),
                f"{figure}ratio": round(statistics.median(ours) / statistics.median(theirs), 2),
                f"{figure}ratio_p10": round(deciles[0], 2), f"{figure}ratio_p90": round(deciles[-1], 2)}
    return row | {"goal_met": row["ratio"] <= GOAL}


def _commands(folder: Path, model: Path | None, shapes: list[str]) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "accelbuild.cli"]
    tinydet = ROOT / "examples" / "models" / "tinydet.onnx"  # the files of this checkout, whichever code runs
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
    parser.add_argument("--baseline", type=Path, help="a checkout of other code to time the same commands with")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    codes = {"": ROOT} | ({"baseline ": args.baseline.absolute()} if args.baseline else {})
    results = {}
    with tempfile.TemporaryDirectory(prefix="small-commands-") as tmp:
        folder = Path(tmp)
        for name, command in _commands(folder, args.model and args.model.absolute(), args.input_shape).items():
            for mode in ("cold", "warm"):
                for code in codes.values():  # warm-up: compiles the bytecode, fills the warm state dir
                    _time(command, folder, _state(folder, mode, code), code)
                _time(REFERENCE, folder)
                times: dict[str, list[tuple[float, float]]] = {label: [] for label in codes}
                reference: list[tuple[float, float]] = []
                for _ in range(args.rounds):
                    for label, code in codes.items():
                        times[label].append(_time(command, folder, _state(folder, mode, code), code))
                    reference.append(_time(REFERENCE, folder))
                for label, mine in times.items():
                    results[f"{label}{name} ({mode})"] = row = _row(mine, reference)
                    if not args.json:
                        print(f"{label + name + f' ({mode})':<53} {row['median_s']:6.3f} s   import onnx, numpy "
                              f"{row['reference_median_s']:6.3f} s   ratio {row['ratio']:4.2f} "
                              f"(p10-p90 {row['ratio_p10']:4.2f}-{row['ratio_p90']:4.2f}; "
                              f"{'ok' if row['goal_met'] else f'over {GOAL}'})   CPU {row['cpu_median_s']:5.3f} s "
                              f"vs {row['cpu_reference_median_s']:5.3f} s ratio {row['cpu_ratio']:4.2f} "
                              f"(p10-p90 {row['cpu_ratio_p10']:4.2f}-{row['cpu_ratio_p90']:4.2f})", flush=True)
    if args.json:
        print(json.dumps({"goal": GOAL, "rounds": args.rounds, "commands": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
