"""No-op rebuild benchmark: ``accelbuild run`` over N built pipelines against ``dvc repro`` of one.

What is measured
    The wall-clock time of a rebuild that has nothing to do, as a user sees it: one whole CLI process,
    from interpreter start-up to exit. On the accelbuild side that is one ``accelbuild run --json
    p000.yaml ...`` over N already-built pipelines (every task ``up-to-date``); on the DVC side
    one ``dvc repro`` of one already-built, equivalent six-stage pipeline (import -> crop -> quantize ->
    map -> assemble -> benchmark, chained through files that each stage copies). The project's goals
    (``GOALS``): 100 pipelines in at most half of DVC's time for one, 20 in at most a quarter.

    The accelbuild command is timed two ways, on the same built folder: replayed from its no-op stamp
    (``accelbuild/engine/stamp.py``; what a no-op run is once the files are settled, and checked to have
    been a replay) and without it (the stamp removed before each run: configs loaded, jobs planned, doit
    asked about each task, as after any change). The goal is judged on the replayed figure.

Why ratios, measured in the same run
    Absolute seconds depend on the machine and on whatever else it is doing. The two commands are run
    alternately, round after round (after one warm-up each), and the medians are compared, so slow
    moments hit both sides alike and the ratio stays meaningful on a noisy CI runner. A bare
    ``python -c pass`` of the same interpreter is timed in the same rotation, to show how much of the
    accelbuild figure is interpreter start-up that no build tool written in Python can avoid.

Everything happens in a temporary folder, offline and deterministically: the model comes from
``accelbuild.testing.models``; DVC runs with analytics, update checks and Studio off and with its
config and site cache dirs inside the temporary folder; bytecode caches go there too (``child_env``).
Every timed run is checked to have been a no-op. DVC is needed only for this benchmark and is
not a dependency of accelbuild; install it into a venv of its own (see ``DVC_INSTALL_HINT``).

Usage::

    python bench/noop.py [--dvc PATH] [--pipelines N] [--rounds N] [--json]

The exit code is 0 whether or not the goal is met (this is a benchmark, not a test); 2 if DVC is not
found, 1 if a build or a no-op check fails.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PIPELINES = 20
GOALS = {100: 0.5, 20: 0.25}  # pipelines -> the most accelbuild / dvc may be
DVC_STAGES = ("import", "crop", "quantize", "map", "assemble", "benchmark")
DVC_UP_TO_DATE = "Data and pipelines are up to date."
DVC_INSTALL_HINT = """\
noop.py: dvc not found ({tried}). It is needed only for this benchmark; install it into a venv of its own:
    python3 -m venv /work/dvcvenv && /work/dvcvenv/bin/pip install dvc
then run:  python bench/noop.py --dvc /work/dvcvenv/bin/dvc   (or set DVC=/work/dvcvenv/bin/dvc)"""

PIPELINE_YAML = """\
accelbuild: 2
name: {name}
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes:
      images: [320, 320, 3]
"""


class BenchError(Exception):
    """The benchmark could not set up or measure what it claims to measure."""


@dataclass
class Command:
    """A command to time, and a check that a finished run of it really was a no-op."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    check: Callable[[subprocess.CompletedProcess[str]], object] = lambda proc: None
    before: Callable[[], object] = lambda: None  # untimed, before each timed run
    samples: list[float] = field(default_factory=list)

    def run(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv, cwd=self.cwd, env=self.env, capture_output=True, text=True)

    def timed(self) -> float:
        self.before()
        started = time.perf_counter()
        proc = self.run()
        seconds = time.perf_counter() - started
        self.check(proc)
        return seconds

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


# --- finding the tools ---------------------------------------------------------------------------


def find_dvc(option: str | None) -> str | None:
    """``--dvc PATH``, else ``$DVC``, else ``dvc`` on PATH (the first one given is the one used);
    None if it is not an executable."""
    return shutil.which(option or os.environ.get("DVC") or "dvc")


def accelbuild_argv() -> list[str]:
    """The ``accelbuild`` console script beside this interpreter, as users run it."""
    script = Path(sys.executable).parent / "accelbuild"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "accelbuild.cli"]


def child_env(root: Path) -> dict[str, str]:
    """The environment of every timed command: this one, minus accelbuild settings that would point
    outside the temporary folder, with bytecode caching on (into the temporary folder).

    Installed packages normally run from cached bytecode, and pip compiles it at install time, but an
    editable checkout under ``PYTHONDONTWRITEBYTECODE`` would recompile its sources on every run; a
    pycache prefix that the warm-up run fills puts both tools on the same, usual footing without
    writing into the checkout or either venv.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELBUILD_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    return env


def describe(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit code {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"


# --- the accelbuild side -------------------------------------------------------------------------


def write_model(folder: Path) -> Path:
    from accelbuild.testing.models import tiny_detector  # here, so --help and a missing dvc need no onnx

    path = folder / "models" / "tinydet.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tiny_detector().SerializeToString(deterministic=True))
    return path


def write_pipelines(folder: Path, count: int) -> list[str]:
    names = [f"p{i:03d}.yaml" for i in range(count)]
    for name in names:
        (folder / name).write_text(PIPELINE_YAML.format(name=Path(name).stem), encoding="utf-8")
    return names


def task_statuses(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    try:
        return {task["name"]: task["status"] for task in json.loads(proc.stdout)["tasks"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"accelbuild run --json printed no task list ({exc})\n{describe(proc)}") from None


def check_accelbuild_noop(proc: subprocess.CompletedProcess[str]) -> int:
    """Exit code 0 and every task ``up-to-date`` in the ``--json`` summary; returns the task count."""
    statuses = task_statuses(proc)
    if proc.returncode != 0 or not statuses or set(statuses.values()) != {"up-to-date"}:
        raise BenchError(f"accelbuild run is not a no-op: {statuses}\n{describe(proc)}")
    return len(statuses)


def stamps(folder: Path) -> list[tuple[str, int, int]]:
    """The no-op stamps in the state dir, as (name, inode, mtime): a replay leaves them as they are."""
    found = sorted((folder / "state" / "noop").glob("*.json"))
    return [(p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in found]


def prepare_accelbuild(folder: Path, env: dict[str, str], count: int) -> tuple[Command, Command, int]:
    """Build ``count`` pipelines once, wait until the files are settled, confirm a second run is all
    ``up-to-date`` (it writes the no-op stamp). Returns the replayed no-op command, the full-check no-op
    command (its stamp removed before each run) and the task count.

    The timed commands carry ``--json``: its summary is the stable contract for checking that every
    timed run really was a no-op (the progress lines on stderr are for people and may change). The
    replayed command is also checked to have left the stamp as it was (a replay, not a full check).
    """
    from accelbuild.engine.stamp import SETTLE_NS

    write_model(folder)
    pipelines = write_pipelines(folder, count)
    argv = [*accelbuild_argv(), "run", *pipelines, "--state-dir", str(folder / "state"), "--json"]
    first = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True)
    if first.returncode != 0:
        raise BenchError(f"initial accelbuild build failed: {describe(first)}")
    time.sleep(SETTLE_NS / 1e9 + 0.5)  # a stamp is written only once every file is settled
    tasks = check_accelbuild_noop(subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True))
    if not stamps(folder):
        raise BenchError("the no-op run after the build wrote no stamp")
    seen: list[list[tuple[str, int, int]]] = []

    def replayed(proc: subprocess.CompletedProcess[str]) -> None:
        check_accelbuild_noop(proc)
        if stamps(folder) != seen[-1] or not seen[-1]:
            raise BenchError(f"accelbuild run checked in full instead of replaying its stamp\n{describe(proc)}")

    replay = Command(argv, folder, env, replayed, before=lambda: seen.append(stamps(folder)))
    full = Command(argv, folder, env, check_accelbuild_noop,
                   before=lambda: shutil.rmtree(folder / "state" / "noop", ignore_errors=True))
    return replay, full, tasks


# --- the DVC side --------------------------------------------------------------------------------


def dvc_env(folder: Path, base: dict[str, str]) -> dict[str, str]:
    """DVC with no network and no configuration from outside the temporary folder."""
    return dict(
        base,
        DVC_NO_ANALYTICS="1",
        DVC_STUDIO_OFFLINE="1",
        DVC_GLOBAL_CONFIG_DIR=str(folder / "dvc-global"),
        DVC_SYSTEM_CONFIG_DIR=str(folder / "dvc-system"),
        DVC_SITE_CACHE_DIR=str(folder / "dvc-site-cache"),
    )


def dvc_yaml(model: str) -> str:
    """Six stages chained through files; each copies its input to its output."""
    lines = ["stages:"]
    previous = model
    for stage in DVC_STAGES:
        output = f"{stage}.out"
        lines += [
            f"  {stage}:",
            f"    cmd: cp {previous} {output}",
            f"    deps: [{previous}]",
            f"    outs: [{output}]",
        ]
        previous = output
    return "\n".join(lines) + "\n"


def check_dvc_noop(proc: subprocess.CompletedProcess[str]) -> None:
    output = proc.stdout + proc.stderr
    if proc.returncode != 0 or DVC_UP_TO_DATE not in output or "Running stage" in output:
        raise BenchError(f"dvc repro no-op did work or failed: {describe(proc)}")


def prepare_dvc(folder: Path, dvc: str, base_env: dict[str, str]) -> Command:
    """A DVC project with the same model and six copying stages, built once; the no-op ``repro`` command."""
    write_model(folder)
    env = dvc_env(folder, base_env)
    setup = [
        [dvc, "init", "--no-scm", "--quiet"],
        [dvc, "config", "core.analytics", "false"],
        [dvc, "config", "core.check_update", "false"],
    ]
    for argv in setup:
        proc = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BenchError(f"{' '.join(argv[1:])} failed: {describe(proc)}")
    (folder / "dvc.yaml").write_text(dvc_yaml("models/tinydet.onnx"), encoding="utf-8")
    command = Command([dvc, "repro"], folder, env, check_dvc_noop)
    first = command.run()
    ran = first.stdout.count("Running stage")
    if first.returncode != 0 or ran != len(DVC_STAGES):
        raise BenchError(f"initial dvc repro ran {ran} of {len(DVC_STAGES)} stages: {describe(first)}")
    check_dvc_noop(command.run())
    return command


def dvc_version(dvc: str, env: dict[str, str]) -> str:
    proc = subprocess.run([dvc, "--version"], capture_output=True, text=True, env=env)
    return proc.stdout.strip()


# --- timing and reporting ------------------------------------------------------------------------


def python_startup(folder: Path, env: dict[str, str]) -> Command:
    return Command([sys.executable, "-c", "pass"], folder, env)


def measure(commands: Sequence[Command], rounds: int) -> None:
    """One warm-up of each, then ``rounds`` rounds running each command once, in turn."""
    for command in commands:
        command.timed()
    for _ in range(rounds):
        for command in commands:
            command.samples.append(command.timed())


@dataclass
class Figures:
    rounds: int
    pipelines: int
    tasks: int
    dvc_stages: int
    accelbuild_s: float  # replayed from its stamp (the usual no-op)
    full_check_s: float  # without a stamp: load, plan and doit's checks (the no-op after any change)
    dvc_s: float
    python_s: float
    dvc_version: str
    samples: dict[str, list[float]]

    @property
    def ratio(self) -> float:
        return self.accelbuild_s / self.dvc_s

    @property
    def ratio_to_python(self) -> float:
        return self.accelbuild_s / self.python_s

    @property
    def goal(self) -> float | None:
        return GOALS.get(self.pipelines)

    @property
    def goal_met(self) -> bool | None:
        return None if self.goal is None else self.ratio <= self.goal

    def as_json(self) -> dict:
        return {
            "rounds": self.rounds,
            "pipelines": self.pipelines,
            "tasks": self.tasks,
            "dvc_stages": self.dvc_stages,
            "dvc_version": self.dvc_version,
            "median_s": {
                "accelbuild": _r(self.accelbuild_s), "accelbuild_full_check": _r(self.full_check_s),
                "dvc": _r(self.dvc_s), "python": _r(self.python_s),
            },
            "ratio": _r(self.ratio),
            "ratio_full_check": _r(self.full_check_s / self.dvc_s),
            "ratio_to_python": _r(self.ratio_to_python),
            "goal": self.goal,
            "goal_met": self.goal_met,
            "samples_s": {name: [_r(s) for s in values] for name, values in self.samples.items()},
        }

    def as_text(self) -> str:
        accel = f"accelbuild run ({self.pipelines} pipelines, {self.tasks} tasks), replayed:"
        full = "  the same without its stamp (full check):"
        dvc = f"dvc repro (1 pipeline, {self.dvc_stages} stages):"
        py = "python -c pass (interpreter start-up):"
        width = max(map(len, (accel, full, dvc, py))) + 1
        return "\n".join([
            f"no-op rebuild, medians of {self.rounds} alternating runs (dvc {self.dvc_version})",
            f"  {accel:<{width}}{self.accelbuild_s:.3f} s",
            f"  {full:<{width}}{self.full_check_s:.3f} s (x{self.full_check_s / self.dvc_s:.2f} of dvc)",
            f"  {dvc:<{width}}{self.dvc_s:.3f} s",
            f"  {py:<{width}}{self.python_s:.3f} s",
            f"  ratio: {self.ratio:.2f}" + ("" if self.goal is None else
                                           f" (goal <= {self.goal}): {'goal met' if self.goal_met else 'goal NOT met'}"),
            f"  accelbuild / python start-up: {self.ratio_to_python:.1f}x",
        ])


def _r(value: float) -> float:
    return round(value, 4)


def benchmark(dvc: str, rounds: int, pipelines: int = PIPELINES) -> Figures:
    with tempfile.TemporaryDirectory(prefix="accelbuild-noop-") as tmp:
        root = Path(tmp)
        (root / "accelbuild").mkdir()
        (root / "dvc").mkdir()
        env = child_env(root)
        accelbuild, full_check, tasks = prepare_accelbuild(root / "accelbuild", env, pipelines)
        dvc_repro = prepare_dvc(root / "dvc", dvc, env)
        python = python_startup(root, env)
        measure([full_check, accelbuild, dvc_repro, python], rounds)  # the full check writes the stamp replayed
        return Figures(
            rounds=rounds,
            pipelines=pipelines,
            tasks=tasks,
            dvc_stages=len(DVC_STAGES),
            accelbuild_s=accelbuild.median,
            full_check_s=full_check.median,
            dvc_s=dvc_repro.median,
            python_s=python.median,
            dvc_version=dvc_version(dvc, dvc_repro.env),
            samples={"accelbuild": accelbuild.samples, "accelbuild_full_check": full_check.samples, "dvc": dvc_repro.samples, "python": python.samples},
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dvc", metavar="PATH", help="the dvc executable (default: $DVC, else dvc on PATH)")
    parser.add_argument("--rounds", type=int, default=10, metavar="N", help="timed rounds (default 10)")
    parser.add_argument("--pipelines", type=int, default=PIPELINES, metavar="N",
                        help=f"built pipelines the no-op checks (default {PIPELINES}; goals for {sorted(GOALS)})")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.rounds < 1:
        _parser().error("--rounds must be at least 1")
    dvc = find_dvc(args.dvc)
    if dvc is None:
        tried = args.dvc or os.environ.get("DVC") or "dvc on PATH"
        print(DVC_INSTALL_HINT.format(tried=tried), file=sys.stderr)
        return 2
    try:
        figures = benchmark(dvc, args.rounds, args.pipelines)
    except BenchError as exc:
        print(f"noop.py: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(figures.as_json(), indent=2) if args.json else figures.as_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
