"""Where build work runs when it does not run here: the executor a run was started with, and the hook
through which a stage's own parallel work (a closed loop's splits) reaches it.

An executor (``accelbuild.engine.dask_executor``) is opened by the build for the whole run and registered
by its address; the worker looks it up to run a task elsewhere. A stage that fans out work of its own
runs in the build's process and gets the executor as ``ctx.fan_out`` (``stages.context.FanOut``), and maps
that work over the cluster instead of a local process pool. Without an executor nothing changes: ``-j``
means local processes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from accelbuild.engine.plan import Job


class Executor(Protocol):
    address: str
    slots: int  # tasks it runs at once (the cluster's worker threads)

    def run_job(self, job: Job, staged: dict[str, Path]) -> None:
        """Run ``job``'s stage elsewhere; its outputs land (verified) in the ``staged`` paths."""

    def map(self, fn: Callable[[Any, Any], Any], items: Sequence[Any], shared: Any) -> Iterator[Any]:
        """``fn(item, shared)`` for every item, elsewhere; results in completion order."""


_OPEN: dict[str, Executor] = {}


def register(executor: Executor) -> None:
    _OPEN[executor.address] = executor


def unregister(executor: Executor) -> None:
    _OPEN.pop(executor.address, None)


def get(address: str) -> Executor:
    try:
        return _OPEN[address]
    except KeyError:
        raise RuntimeError(f"executor {address} is not open in this process") from None
