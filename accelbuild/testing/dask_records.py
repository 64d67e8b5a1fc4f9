"""A worker's own record of the tasks it ran, for the device farm's tests: a worker plugin that appends
one line per task of ours that starts executing there (the worker's address, its resources, the key) to a
file every worker can see (the tests run on one machine)."""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin


class RecordTasks(WorkerPlugin):
    name = "accelbuild-record-tasks"

    def __init__(self, path: str) -> None:
        self.path = path
        self.worker: Any = None

    def setup(self, worker: Any) -> None:
        self.worker = worker

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        if finish != "executing" or not str(key).startswith("accelbuild-") or self.worker is None:
            return
        resources = ",".join(sorted(self.worker.state.total_resources)) or "-"
        with open(self.path, "a") as f:
            f.write(f"{self.worker.address} {resources} {key}\n")


def read(path: str) -> list[tuple[str, str, str]]:
    """(worker address, its resources, task key) per recorded task."""
    try:
        with open(path) as f:
            return [tuple(line.split()) for line in f if line.strip()]  # type: ignore[misc]
    except FileNotFoundError:
        return []
