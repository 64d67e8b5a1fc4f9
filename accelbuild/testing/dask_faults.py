"""Fault injection for the Dask executor's tests: a worker plugin that kills its own worker process the
first time a task of ours starts there, so the test can see the scheduler run it again elsewhere."""

from __future__ import annotations

import os
import signal
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin


class KillWorkerOnce(WorkerPlugin):
    """SIGKILL the worker that starts executing the first task whose key starts with ``key_prefix``.

    ``marker`` is a file path every worker can see (the tests run on one machine): the first worker to
    create it is the one that dies, so exactly one worker is killed, whichever gets the task.
    """

    name = "accelbuild-kill-worker-once"

    def __init__(self, marker: str, key_prefix: str) -> None:
        self.marker = marker
        self.key_prefix = key_prefix

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        if finish != "executing" or not str(key).startswith(self.key_prefix):
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return
        os.write(fd, f"{os.getpid()} {key}\n".encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)
