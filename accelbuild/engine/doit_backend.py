"""The doit side of a build: jobs become doit tasks (through a ``TaskLoader2``), results come back
through a reporter, and up-to-date checks are explained for ``status``.

A task is up to date when its task key (``engine/task_key.py``: definition, inputs by content, version) is
the one its last successful run recorded in doit's values (``key_unchanged``), its targets exist and every
output is as that run wrote it (``outputs_unedited``). Inputs are not doit ``file_dep``: an input whose stat
is as recorded keeps its recorded SHA-256, any other is hashed, and the key decides. doit orders tasks by
``task_dep`` (each input's producer) and runs them, in parallel processes with ``-j N``. Its state DB is a
SQLite file in the state dir, written in one transaction at the end of a run.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from doit.cmd_base import TaskLoader2
from doit.dependency import Dependency, MD5Checker, SqliteDB
from doit.doit_cmd import DoitMain
from doit.exceptions import BaseFail, UnmetDependency
from doit.task import Task

from accelbuild.engine import executor as executors
from accelbuild.engine import task_key, worker
from accelbuild.engine.cache import ArtifactCache
from accelbuild.engine.plan import Job
from accelbuild.engine.remote_cache import REMOTE_DOWN_MARKER, RemoteSpec
from accelbuild.engine.state import working_folder
from accelbuild.util.files import file_sha256

DB_NAME = "doit.sqlite3"


@dataclass
class TaskResult:
    name: str
    pipeline: str
    model: str | None
    stage: str
    status: str = "skipped"
    seconds: float = 0.0
    message: str = ""
    user_error: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pipeline": self.pipeline,
            "model": self.model,
            "stage": self.stage,
            "status": self.status,
            "seconds": self.seconds,
        }


@dataclass
class RunOptions:
    root: Path  # the project root: the state records paths relative to it
    state_dir: Path
    cache_dir: Path
    jobs: int = 1
    force: bool = False
    keep_going: bool = False
    remote_cache: str | None = None  # a shared cache's fsspec URL (checked by remote_cache.parse_url)
    executor: str | None = None  # dask://HOST:PORT, opened for the run (see engine/executor.py)

    @property
    def remote(self) -> RemoteSpec | None:
        if not self.remote_cache:
            return None
        return RemoteSpec(self.remote_cache, str(self.state_dir / REMOTE_DOWN_MARKER))


PROGRESS_AFTER_SECONDS = 2.0  # a task running longer than this is named on the terminal's progress line


class Progress:
    """On a terminal, a transient line naming the tasks that have run for a couple of seconds (with their
    elapsed time); finished-task lines print above it. Nothing at all when the stream is not a TTY."""

    def __init__(self, stream: TextIO, started: dict[str, float], names: dict[str, str]) -> None:
        from rich.console import Console
        from rich.live import Live

        self.started = started
        self.names = names
        self.console = Console(file=stream, force_terminal=True, highlight=False)
        self.live = Live(self, console=self.console, refresh_per_second=2, transient=True)

    def __rich__(self) -> str:
        now = time.monotonic()
        running = [f"{self.names.get(task, task)} {now - t0:.0f} s" for task, t0 in list(self.started.items())
                   if now - t0 >= PROGRESS_AFTER_SECONDS]
        return f"running: {', '.join(running)}" if running else ""

    def print(self, text: str) -> None:
        self.console.print(text, markup=False, soft_wrap=True, end="")


@dataclass
class RunLog:
    """Collects results as doit reports them, and prints one line per finished task."""

    results: dict[str, TaskResult]
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    width: int = 32  # of the task-name column: the longest name of the run
    quiet: bool = False  # only failed tasks get a line
    progress: Progress | None = None  # on a terminal only
    started: dict[str, float] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)

    def finish(self, name: str, status: str, seconds: float | None = None, message: str = "",
               user_error: bool = False) -> None:
        self.reported.add(name)
        result = self.results[name]
        result.status = status
        if seconds is None:
            seconds = time.monotonic() - self.started.get(name, time.monotonic())
        result.seconds = round(seconds, 3)
        result.message = message
        result.user_error = user_error
        self.started.pop(name, None)
        if self.quiet and status != "failed":
            return
        text = task_line(result.name, self.width, status, result.seconds)
        if message:
            text += message.rstrip("\n") + "\n"
        if self.progress is not None:
            self.progress.print(text)
        else:
            self.stream.write(text)
            self.stream.flush()


def task_line(name: str, width: int, status: str, seconds: float) -> str:
    """A finished task's line: name (in a column ``width`` wide), status, seconds."""
    return f"{name:<{width}} {status:<10} {seconds:7.2f}s\n"


def name_width(jobs: list[Job]) -> int:
    """The task-name column of a run: its longest name, at least 32."""
    return max([32, *(len(job.name) for job in jobs)])


def _reporter_for(log: RunLog) -> type:
    """A doit reporter class bound to ``log`` (doit instantiates reporters itself)."""

    class Reporter:
        desc = "accelbuild task lines"

        def __init__(self, outstream: TextIO, options: dict[str, Any]) -> None:
            self.log = log

        def initialize(self, tasks: Any, selected_tasks: Any) -> None:
            pass

        def get_status(self, task: Task) -> None:
            pass

        def execute_task(self, task: Task) -> None:
            self.log.started[task.name] = time.monotonic()
            if self.log.progress is not None:
                self.log.progress.live.refresh()

        def add_success(self, task: Task) -> None:
            values = task.values or {}
            self.log.finish(task.name, values.get("status", "ran"), values.get("seconds"))

        def add_failure(self, task: Task, fail: BaseFail) -> None:
            if isinstance(fail, UnmetDependency):
                self.log.finish(task.name, "skipped", 0.0)
                return
            user = isinstance(fail, worker.UserFailure)
            message = fail.message if isinstance(fail, (worker.UserFailure, worker.StageFailure,
                                                        worker.InternalFailure)) else fail.get_msg()
            self.log.finish(task.name, "failed", message=message, user_error=user)
            if isinstance(fail, worker.InternalFailure) and fail.traceback:
                self.log.stream.write("".join(fail.traceback))

        def skip_uptodate(self, task: Task) -> None:
            self.log.finish(task.name, "up-to-date", 0.0)

        def skip_ignore(self, task: Task) -> None:
            self.log.finish(task.name, "skipped", 0.0)

        def cleanup_error(self, exception: BaseFail) -> None:
            self.log.stream.write(f"accelbuild: cleanup error: {exception.get_msg()}\n")

        def runtime_error(self, msg: str) -> None:
            self.log.stream.write(f"accelbuild: {msg}\n")

        def teardown_task(self, task: Task) -> None:
            pass

        def complete_run(self) -> None:
            pass

    return Reporter


def outputs_unedited(task: Task, values: dict[str, Any], outputs: list[str]) -> bool:
    """doit ``uptodate`` check: the task's outputs are as its last run left them (doit itself checks
    only that targets exist, so an artifact edited by hand would otherwise stay and feed later stages)."""
    return worker.edited_outputs(outputs, values.get("outputs")) == []


def output_paths(job: Job) -> list[str]:
    """The job's outputs as the state records them (relative to the project root, the current folder
    while doit runs); a folder output keeps its trailing ``/``."""
    return [_relative(p) + ("/" if name.endswith("/") else "") for name, p in job.outputs.items()]


def _relative(path: Path) -> str:
    return os.path.relpath(path)


def key_unchanged(task: Task, values: dict[str, Any], definition: str, inputs: dict[str, str]) -> bool:
    """doit ``uptodate`` check: the task key of ``definition`` and the ``inputs`` (role -> path) as they are
    now is the key the last run recorded (never true without a record)."""
    recorded = values.get("key")
    if not isinstance(recorded, str):
        return False
    current = worker.input_record(inputs, values.get("inputs"))
    return current is not None and task_key.task_key(definition, worker.digests_of(current)) == recorded


def producers(jobs: list[Job]) -> dict[str, str]:
    """Each output path -> the task id of the job that writes it."""
    return {str(path): job.task_id for job in jobs for path in job.outputs.values()}


def to_doit_task(job: Job, options: RunOptions, made_by: dict[str, str]) -> Task:
    """``made_by``: ``producers`` of the run's jobs (each input's producer runs first)."""
    return Task(
        job.task_id,
        actions=[(worker.execute, [job, str(options.cache_dir), options.force, options.remote, options.executor])],
        task_dep=sorted({made_by[str(p)] for p in job.inputs.values() if str(p) in made_by}),
        targets=[_relative(p) for p in job.required_outputs],
        uptodate=[
            (key_unchanged, [job.param_digest, {role: _relative(p) for role, p in job.inputs.items()}], {}),
            (outputs_unedited, [output_paths(job)], {}),
        ],
        doc=f"{job.stage} {job.model_name or job.pipeline_name}",
        verbosity=2,
    )


class JobLoader(TaskLoader2):
    """Hands our jobs to doit, with doit's configuration pointing at the state dir."""

    def __init__(self, jobs: list[Job], options: RunOptions, log: RunLog) -> None:
        super().__init__()
        self.jobs = jobs
        self.options = options
        self.log = log

    def load_doit_config(self) -> dict[str, Any]:
        # with an executor, tasks run elsewhere: doit's threads only wait for them (and restore from the cache)
        executor = executors.get(self.options.executor) if self.options.executor else None
        parallel = max(self.options.jobs, executor.slots) if executor else self.options.jobs
        return {
            "dep_file": str(self.options.state_dir / DB_NAME),
            "backend": "sqlite3",
            "check_file_uptodate": "md5",
            "verbosity": 2,
            "reporter": _reporter_for(self.log),
            "num_process": parallel if parallel > 1 else 0,
            "par_type": "thread" if executor else "process",
            "continue": self.options.keep_going,
            "always": self.options.force,
        }

    def load_tasks(self, cmd: Any, pos_args: list[str]) -> list[Task]:
        made_by = producers(self.jobs)
        return [to_doit_task(job, self.options, made_by) for job in self.jobs]


def run_jobs(jobs: list[Job], options: RunOptions, stream: TextIO | None = None,
             quiet: bool = False) -> list[TaskResult]:
    """Run the jobs through doit; every job gets a result (``skipped`` if it never started)."""
    results = {
        job.task_id: TaskResult(job.name, job.pipeline_name, job.model_name, job.stage) for job in jobs
    }
    out = stream or sys.stderr
    log = RunLog(results, out, width=name_width(jobs), quiet=quiet)
    if _is_terminal(out):
        log.progress = Progress(out, log.started, {job.task_id: job.name for job in jobs})
    options.state_dir.mkdir(parents=True, exist_ok=True)
    with working_folder(options.root), (log.progress.live if log.progress else contextlib.nullcontext()):
        DoitMain(JobLoader(jobs, options, log), config_filenames=()).run(["run"])
    for job in jobs:  # tasks doit never reached (it stops at the first failure without --keep-going)
        if job.task_id not in log.reported:
            log.finish(job.task_id, "skipped", 0.0)
    return [results[job.task_id] for job in jobs]


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@dataclass
class Explanation:
    name: str
    would_run: bool  # out of date: runs, or is restored from the cache when ``cached``
    reasons: list[str]
    cached: bool = False  # the artifact cache holds its outputs for its current inputs: restored, not run


def explain(jobs: list[Job], options: RunOptions) -> list[Explanation]:
    """Which jobs would run and why, without running anything (``status`` and ``--dry-run``)."""
    with working_folder(options.root):
        return _explain(jobs, options)


def _explain(jobs: list[Job], options: RunOptions) -> list[Explanation]:
    db_path = options.state_dir / DB_NAME
    made_by = producers(jobs)
    tasks = {job.task_id: to_doit_task(job, options, made_by) for job in jobs}
    names = {job.task_id: job.name for job in jobs}
    producers_of = {out: names[task] for out, task in made_by.items()}
    explanations: list[Explanation] = []
    will_run: set[str] = set()  # out of date and not in the cache: their outputs are unknown
    restored: dict[str, str] = {}  # output path -> SHA-256 it will have once restored from the cache
    cache = ArtifactCache(options.cache_dir)
    dep = Dependency(SqliteDB, str(db_path), checker_cls=MD5Checker) if db_path.exists() else None
    try:
        for job in jobs:
            reasons = _reasons(job, tasks, dep, options.force)
            upstream = sorted({producers_of[p] for p in map(str, job.inputs.values())
                               if producers_of.get(p) in will_run})
            if not reasons and upstream:
                reasons = [f"runs if {', '.join(upstream)} changes its outputs"]
            listing = None if not reasons or options.force else _cached_outputs(job, cache, restored, will_run,
                                                                                producers_of)
            if listing is not None:
                restored.update({str(job.outputs[name]): sha for name, sha in listing.items() if name in job.outputs})
            elif reasons:
                will_run.add(job.name)
            explanations.append(Explanation(job.name, bool(reasons), reasons, cached=listing is not None))
    finally:
        if dep is not None:
            dep.close()  # nothing was set: writes nothing back
    return explanations


def _cached_outputs(job: Job, cache: ArtifactCache, restored: dict[str, str], will_run: set[str],
                    producers: dict[str, str]) -> dict[str, str] | None:
    """The cache entry's files (name -> SHA-256) if the job would be restored, else None.

    Inputs that upstream restores would bring are taken at the digest the cache records, so a fresh
    checkout with a restored cache is seen as wholly cached, not as "never built"."""
    def digest(path: Path) -> str | None:
        if str(path) in restored:
            return restored[str(path)]
        if producers.get(str(path)) in will_run or not path.is_file():
            return None
        return file_sha256(path)

    try:
        digests = worker.input_digests(job, digest)
    except OSError:
        return None
    return None if digests is None else cache.listing(task_key.job_key(job, digests))


def _reasons(job: Job, tasks: dict[str, Task], dep: Dependency | None, force: bool) -> list[str]:
    if force:
        return ["--force"]
    values = dep.get_values(job.task_id) if dep is not None else {}
    if dep is None or not values:
        return ["never built (no record in the state dir)"]
    task = tasks[job.task_id]
    status = dep.get_status(task, tasks, get_log=True)
    if status.status == "up-to-date":
        return []
    reasons = []
    for kind, detail in status.reasons.items():
        if kind == "uptodate_false":
            for check, args, _ in detail:
                if check is outputs_unedited:
                    reasons.extend(_output_edits(args[0], values))
                else:
                    reasons.extend(_key_changes(job, values))
        elif kind == "missing_target":
            reasons.extend(f"output missing: {t}" for t in detail if f"output missing: {t}" not in reasons)
    return reasons or ["out of date"]


def _key_changes(job: Job, values: dict[str, Any]) -> list[str]:
    """What moved the task key since the last run: inputs (by role), parameters, code, version."""
    if not isinstance(values.get("key"), str):
        return ["built by an older accelbuild (no task key recorded)"]
    inputs = values.get("inputs")
    recorded: dict[str, Any] = inputs if isinstance(inputs, dict) else {}
    changes = []
    for role, path in sorted(job.inputs.items()):
        name = _relative(path)
        now = worker.input_record({role: path}, {role: recorded.get(role)})
        before = recorded.get(role)
        if now is None:
            changes.append(f"input {role} missing: {name}")
        elif not isinstance(before, list) or len(before) != 5:
            changes.append(f"input {role} added: {name}")
        elif now[role][4] != before[4]:
            changes.append(f"input {role} changed: {name}")
    changes.extend(f"input {role} removed" for role in sorted(set(recorded) - set(job.inputs)))
    return changes + _parameter_changes(job, values, quiet=bool(changes))


def _output_edits(outputs: list[str], values: dict[str, Any]) -> list[str]:
    edited = worker.edited_outputs(outputs, values.get("outputs"))
    if edited is None:
        return ["outputs not recorded by the last run (built by an older accelbuild)"]
    return [f"output {'edited' if Path(p).exists() else 'missing'}: {p}" for p in edited]


def _parameter_changes(job: Job, values: dict[str, Any], quiet: bool = False) -> list[str]:
    """Parameter and code changes; with neither (and not ``quiet``: no input changed either), the version."""
    old = values.get("params")
    changes = [] if isinstance(old, dict) else ["parameters changed"]
    if isinstance(old, dict):
        changes = [f"parameter {key} changed: {_short(before)} -> {_short(after)}"
                   for key, before, after in _differences(old, job.params_json)]
    if values.get("code") != job.code:
        changes.append("accelbuild changed (the code that builds this stage)")
    return changes or ([] if quiet else ["accelbuild version changed"])


def _differences(old: Any, new: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted key, old, new) for each change; a large mapping (a hardware profile) is walked to its
    changed leaves, a small one is shown whole."""
    small = len(repr(old)) + len(repr(new)) <= 120
    if isinstance(old, dict) and isinstance(new, dict) and not (prefix and small):
        found = []
        for key in sorted(set(old) | set(new)):
            found.extend(_differences(old.get(key), new.get(key), f"{prefix}{key}."))
        return found
    return [] if old == new else [(prefix.rstrip("."), old, new)]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
