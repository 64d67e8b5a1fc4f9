"""A whole process timed as the bench scripts time it: wall-clock seconds, and the CPU seconds (user + system)
it and its own waited-for children spent. On a shared machine wall time measures the others' load too; CPU
time is the steadier figure."""

from __future__ import annotations

import resource
import subprocess
import time
from typing import Any


def timed_run(command: list[str], **run: Any) -> tuple[subprocess.CompletedProcess, float, float]:
    """``subprocess.run(command, capture_output=True, text=True, **run)`` with its wall and CPU seconds."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, **run)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
