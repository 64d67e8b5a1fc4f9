"""What the CLI calls: run, explain (status / dry run) and clean, on loaded pipeline specs."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from accelbuild.build import doit_backend, plan, worker
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
    with locked(options.state_dir):
        return RunSummary(doit_backend.run_jobs(jobs, options, stream))


def explain(pipelines: list[PipelineSpec], options: RunOptions, until: str | None = None) -> list[Explanation]:
    return doit_backend.explain(plan.plan(pipelines, until), options)


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
