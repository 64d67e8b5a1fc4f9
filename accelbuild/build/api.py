"""What the CLI calls: run, explain (status / dry run) and clean, on loaded pipeline specs."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from accelbuild.build import dask_executor, doit_backend, plan, remote_cache, worker
from accelbuild.build.doit_backend import Explanation, RunOptions, TaskResult
from accelbuild.build.state import locked
from accelbuild.config.spec import PipelineSpec


@dataclass
class RunSummary:
    results: list[TaskResult]

    @property
    def ok(self) -> bool:
        return all(r.status in ("ran", "up-to-date", "cached") for r in self.results)

    @property
    def exit_code(self) -> int:
        failed = [r for r in self.results if r.status == "failed"]
        if not failed and self.ok:
            return 0
        if failed and all(r.user_error for r in failed):
            return 2
        return 1

    def as_json(self) -> dict:
        return {"ok": self.ok, "tasks": [r.as_json() for r in self.results]}


def run(pipelines: list[PipelineSpec], options: RunOptions, until: str | None = None,
        stream: TextIO | None = None) -> RunSummary:
    jobs = plan.plan(pipelines, until)
    with locked(options.state_dir), _remote(options) as options, dask_executor.session(options.executor):
        return RunSummary(doit_backend.run_jobs(jobs, options, stream))


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
    with dask_executor.session(options.executor):
        explanations = doit_backend.explain(jobs, options)
    if options.remote is not None:
        _note_remote_entries(jobs, explanations, remote_cache.open_store(options.remote))
    return explanations


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
