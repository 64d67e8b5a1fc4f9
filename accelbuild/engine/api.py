"""What the CLI calls: run, explain (status / dry run) and clean, on loaded pipeline specs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from accelbuild.config.spec import PipelineSpec
from accelbuild.engine import doit_backend, plan, remote_cache, worker
from accelbuild.engine import metrics as metrics_
from accelbuild.engine.doit_backend import Explanation, RunOptions, TaskResult
from accelbuild.engine.state import locked
from accelbuild.toolchains.environment import ROOT_ENV as TOOLCHAINS_ENV

if TYPE_CHECKING:
    from accelbuild.engine.stamp import Replay


@dataclass
class PipelineOutcome:
    """One pipeline after a run: its figures, where its artifacts are, and its checks."""

    name: str
    variant: str | None
    family: str
    metrics: dict[str, Any] | None
    artifacts: dict[str, Path]
    checks: list[metrics_.CheckResult] = field(default_factory=list)
    has_checks: bool = False  # the pipeline sets checks (evaluated only when it has figures)

    @property
    def checks_ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def unchecked(self) -> bool:
        """It has checks but no figures to evaluate them on (its build failed)."""
        return self.has_checks and self.metrics is None

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "variant": self.variant, "family": self.family, "metrics": self.metrics,
                "checks": [c.as_json() for c in self.checks],
                "artifacts": {k: str(v) for k, v in sorted(self.artifacts.items()) if v.exists()}}


@dataclass
class RunSummary:
    results: list[TaskResult]
    pipelines: list[PipelineOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warnings and check tables printed after the task lines

    @property
    def tasks_ok(self) -> bool:
        """Every task ran, was up to date or was restored (the same run again would have nothing to do)."""
        return all(r.status in ("ran", "up-to-date", "cached") for r in self.results)

    def as_noop(self) -> RunSummary:
        """This run as the same command run again prints it: every task up to date."""
        return replace(self, results=[replace(r, status="up-to-date", seconds=0.0, message="")
                                      for r in self.results])

    @property
    def ok(self) -> bool:
        return self.tasks_ok and all(p.checks_ok for p in self.pipelines)

    @property
    def exit_code(self) -> int:
        failed = [r for r in self.results if r.status == "failed"]
        if not failed and self.ok:
            return 0
        if failed and all(r.user_error for r in failed):
            return 2
        return 1

    def as_json(self) -> dict:
        return {"ok": self.ok, "tasks": [r.as_json() for r in self.results],
                "pipelines": [p.as_json() for p in self.pipelines]}

    def failures(self) -> str | None:
        """The line naming every failure: failed tasks, pipelines whose checks failed, and pipelines whose
        checks could not be evaluated."""
        named = [r.name for r in self.results if r.status == "failed"]
        named += [f"{p.name} (checks: {', '.join(c.name for c in p.checks if not c.ok)})"
                  for p in self.pipelines if not p.checks_ok]
        named += [f"{p.name} (not checked: its build failed)" for p in self.pipelines if p.unchecked]
        return f"accelbuild: failed: {'; '.join(named)}" if named else None

    def line(self, seconds: float) -> str:
        """The closing line: how many tasks did what, checks, and the time. "checks passed" only when every
        pipeline with checks was evaluated and passed."""
        return f"{self.head()} in {seconds:.1f} s"

    def head(self) -> str:
        """The closing line without its time."""
        counts = {status: sum(r.status == status for r in self.results)
                  for status in ("ran", "cached", "up-to-date", "failed", "skipped")}
        parts = [f"{n} {status}" for status, n in counts.items() if n or status in ("ran", "failed")]
        failed_checks = sum(not c.ok for p in self.pipelines for c in p.checks)
        unchecked = sum(p.unchecked for p in self.pipelines)
        if any(p.checks for p in self.pipelines) or unchecked:
            if failed_checks:
                parts.append(f"{failed_checks} check(s) failed")
            if unchecked:
                parts.append(f"{unchecked} pipeline(s) not checked")
            if not failed_checks and not unchecked:
                parts.append("checks passed")
        return f"accelbuild: {len(self.results)} tasks: {', '.join(parts)}"


def run(pipelines: list[PipelineSpec], options: RunOptions, until: str | None = None,
        stream: TextIO | None = None, quiet: bool = False, built: plan.Plan | None = None) -> RunSummary:
    """Build the pipelines (planned here unless ``built`` is their plan)."""
    built = built or plan.build_plan(pipelines, until)
    os.environ.setdefault(TOOLCHAINS_ENV, str(options.cache_dir / "toolchains"))  # where stages find them
    with locked(options.state_dir), _remote(options) as options, _executor(options.executor), _farms(pipelines):
        results = doit_backend.run_jobs(built.jobs, options, stream, quiet=quiet)
    benchmarked = {r.pipeline for r in results if r.stage == "benchmark" and r.status in ("ran", "up-to-date", "cached")}
    outcomes = [outcome(p, built.artifacts[p.name], p.name in benchmarked) for p in pipelines]
    out = stream or sys.stderr
    for result in results:  # figures measured elsewhere say so
        if result.stage == "benchmark" and result.status == "cached":
            machines = _host_machines(built.artifacts[result.pipeline].get("benchmark.json"))
            if machines:
                out.write(f"accelbuild: {result.pipeline}: host timings restored from the cache were measured on "
                          f"{', '.join(machines)}\n")
    notes = [f"accelbuild: warning: {line}\n" for pipeline, item in zip(pipelines, outcomes)
             for line in metrics_.accuracy_warnings(pipeline.name, item.metrics, pipeline.benchmark.warn_below,
                                                    item.artifacts)]
    notes += [metrics_.check_table(item.name, item.checks) + "\n" for item in outcomes
              if item.checks and not item.checks_ok]
    out.writelines(notes)
    return RunSummary(results, outcomes, notes)


@contextlib.contextmanager
def _executor(address: str | None) -> Iterator[Any]:
    """The Dask executor of a run with ``--executor`` (imported only then: the no-op path stays light)."""
    if address is None:
        yield None
        return
    from accelbuild.engine import dask_executor

    with dask_executor.session(address) as executor:
        yield executor


@contextlib.contextmanager
def _farms(pipelines: list[PipelineSpec]) -> Iterator[None]:
    """The device farms' connections of a run, closed at its end (none without ``benchmark.device``)."""
    if not any(p.benchmark.device is not None for p in pipelines):
        yield
        return
    from accelbuild.engine import devices

    with devices.farms_open():
        yield


def _host_machines(benchmark: Path | None) -> list[str]:
    import json

    try:
        models = json.loads(benchmark.read_text()).get("models", []) if benchmark else []
    except (OSError, ValueError):
        return []
    return sorted({m["host"]["measured_on"] for m in models if isinstance(m.get("host"), dict)
                   and "measured_on" in m["host"]})


def outcome(pipeline: PipelineSpec, artifacts: dict[str, Path], benchmarked: bool = True) -> PipelineOutcome:
    """A pipeline's figures from its artifacts (only when its benchmark is current), and its checks
    evaluated on them."""
    records = {m.name: artifacts[f"{m.name}/quantize.json"] for m in pipeline.models
               if f"{m.name}/quantize.json" in artifacts}
    figures = metrics_.read_metrics(artifacts["benchmark.json"], records) \
        if benchmarked and "benchmark.json" in artifacts else None
    checks = metrics_.evaluate(pipeline.checks, figures) if figures is not None and pipeline.checks else []
    return PipelineOutcome(pipeline.name, pipeline.variant, pipeline.target.family, figures, artifacts, checks,
                           bool(pipeline.checks))


@contextlib.contextmanager
def _remote(options: RunOptions) -> Iterator[RunOptions]:
    """The options for one run: without the remote cache if it cannot be reached now (one warning)."""
    spec = options.remote
    if spec is None or spec.down_marker is None:
        yield options
        return
    marker = Path(spec.down_marker)
    marker.unlink(missing_ok=True)
    try:
        yield options if remote_cache.open_store(spec).probe() else replace(options, remote_cache=None)
    finally:
        marker.unlink(missing_ok=True)


def explain(pipelines: list[PipelineSpec], options: RunOptions, until: str | None = None) -> list[Explanation]:
    """Which tasks would run and why; with a remote cache, which of them it could restore; with an
    executor, the cluster is checked (reachable, workers running this accelbuild)."""
    jobs = plan.plan(pipelines, until)
    with _executor(options.executor), _farms(pipelines):
        explanations = doit_backend.explain(jobs, options)
    if options.remote is not None:
        _note_remote_entries(jobs, explanations, remote_cache.open_store(options.remote))
    return explanations


def current_checks(pipelines: list[PipelineSpec]) -> list[PipelineOutcome]:
    """Each pipeline with checks evaluated on the figures its build holds now (metrics None where there is
    no benchmark.json yet): a threshold changed since the last run is judged as ``run`` will judge it."""
    built = plan.build_plan(pipelines)
    return [outcome(p, built.artifacts[p.name]) for p in pipelines if p.checks]


def _note_remote_entries(jobs: list[plan.Job], explanations: list[Explanation],
                         store: remote_cache.RemoteStore) -> None:
    """Add "restorable from the remote cache" to tasks that would run and whose entry it holds (only
    tasks whose inputs exist now can be keyed)."""
    if not store.probe():
        return
    for job, explanation in zip(jobs, explanations):
        if explanation.would_run and all(p.is_file() for p in job.inputs.values()) \
                and store.has_entry(worker.job_key(job)):
            explanation.reasons.append(f"restorable from the remote cache {store.url}")


def clean(pipelines: list[PipelineSpec], options: RunOptions, remove_cache: bool) -> list[Path]:
    """Remove the artifacts the pipelines produce (only those; user files in the output dir stay)."""
    removed: list[Path] = []
    with locked(options.state_dir):
        folders: set[Path] = set()
        for job in plan.plan(pipelines):
            for path in job.outputs.values():
                if path.is_dir():  # a folder output (closed-loop splits/)
                    shutil.rmtree(path)
                    removed.append(path)
                elif path.exists():
                    path.unlink()
                    removed.append(path)
                folders.add(path.parent)
        for pipeline in pipelines:
            folders.add(pipeline.output.dir)
            splits = pipeline.output.dir / "splits"  # closed-loop splits of a run with keep_splits since turned off
            if splits.is_dir():
                shutil.rmtree(splits)
                removed.append(splits)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            if folder.is_dir():
                worker.sweep_stale_staging(folder)
                if not any(folder.iterdir()):
                    folder.rmdir()
        if remove_cache and options.cache_dir.exists():
            shutil.rmtree(options.cache_dir)
            removed.append(options.cache_dir)
    return removed


def failures_text(summary: RunSummary) -> str:
    """The line naming every failure of a run (empty when none failed)."""
    failures = summary.failures()
    return f"{failures}\n" if failures else ""


def json_text(summary: RunSummary) -> str:
    """``run --json``'s output."""
    return json.dumps(summary.as_json(), indent=2) + "\n"


def as_replay(noop: RunSummary, jobs: list[plan.Job], log_lines: list[str], quiet: bool, as_json: bool) -> Replay:
    """What ``run`` prints for ``noop`` (a RunSummary with every task up to date), as the no-op fast path
    replays it (``stamp.Replay``)."""
    from accelbuild.engine.stamp import Replay

    width = doit_backend.name_width(jobs)
    tasks = [] if quiet else [doit_backend.task_line(r.name, width, r.status, r.seconds) for r in noop.results]
    return Replay(stderr="".join([*log_lines, *tasks, *noop.notes, failures_text(noop)]), closing=noop.head(),
                  stdout=json_text(noop) if as_json else "", exit_code=noop.exit_code)
