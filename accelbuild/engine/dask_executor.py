"""Builds on a Dask distributed cluster: ``--executor dask://HOST:PORT`` (``ACCELBUILD_EXECUTOR``).

The build stays here: doit decides what is up to date and in which order, the artifact cache (local and
remote) is read and written here, outputs are published here. What goes to the cluster is the work of
each task that misses the cache: its inputs travel by content (``accelbuild.engine.shipping``), the stage
runs in a temp folder on a worker, and its outputs come back with their SHA-256, verified on arrival.
A stage that fans out work of its own (a family's closed loop) runs here and maps that work over the cluster
(``accelbuild.engine.executor``), so its per-split cache keeps working.

Workers must run the same accelbuild: on connecting (and whenever a new worker joins) each worker reports
its version and the digest of its accelbuild code; one that differs is refused with a warning and gets no
work, and a build with no acceptable worker stops with a clear message (exit 2). Each task checks again on
the worker before it runs. A task whose worker dies is rescheduled on another worker by the scheduler
(up to its ``distributed.scheduler.allowed-failures``, 3 by default); a task that raises is retried once.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import pickle
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbuild.engine import executor as executors
from accelbuild.engine import shipping
from accelbuild.errors import StageError, UserError

if TYPE_CHECKING:
    from distributed import Client, Future

    from accelbuild.engine.plan import Job

log = logging.getLogger(__name__)

ENV = "ACCELBUILD_EXECUTOR"
SCHEME = "dask://"
WORKER_WAIT = 60  # seconds to wait for a first worker on a cluster that has none yet


class ExecutorError(UserError):
    """The cluster cannot be used for this build: unreachable, no workers, or none running this accelbuild."""


def parse(text: str | None, source: str = "--executor") -> str | None:
    """The executor address from ``--executor`` / ``ACCELBUILD_EXECUTOR`` (``source``): None for a local
    build (unset, empty or ``local``), else ``dask://HOST:PORT``; anything else is a ``UserError`` (exit 2)."""
    if text is None or text.strip() in ("", "local"):
        return None
    text = text.strip().rstrip("/")
    if not text.startswith(SCHEME):
        raise UserError(f"{source} {text}: unknown executor (expected dask://HOST:PORT, or local)")
    host, sep, port = text[len(SCHEME):].rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"{source} {text}: expected dask://HOST:PORT (the Dask scheduler's address)")
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UserError(f"{source} {text}: the Dask executor needs distributed: pip install 'accelbuild[dask]'") from None
    return text


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class DaskExecutor:
    """A connection to one Dask scheduler for the length of a run (see the module docstring)."""

    def __init__(self, address: str, client: Client) -> None:
        self.address = address
        self.client = client
        self.identity = shipping.identity()
        self.accepted: set[str] = set()
        self.refused: dict[str, str] = {}
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, address: str) -> DaskExecutor:
        import dask.config
        from distributed import Client

        timeout = dask.config.get("distributed.comm.timeouts.connect")  # DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT
        try:
            client = Client("tcp://" + address[len(SCHEME):], timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ExecutorError(f"{address}: cannot reach the Dask scheduler ({_short(exc)})") from None
        self = cls(address, client)
        try:
            self._first_workers()
        except BaseException:
            client.close()
            raise
        return self

    def _first_workers(self) -> None:
        if not self.client.scheduler_info(n_workers=-1)["workers"]:
            log.info("%s: waiting for a worker to join", self.address)
            try:
                self.client.wait_for_workers(1, timeout=WORKER_WAIT)
            except TimeoutError:
                raise ExecutorError(f"{self.address}: the cluster has no workers") from None
        if not self.workers():
            refused = "; ".join(f"{a}: {why}" for a, why in sorted(self.refused.items()))
            raise ExecutorError(f"{self.address}: no worker runs this build's "
                                f"{shipping.describe_identity(self.identity)} ({refused}); install the same "
                                "accelbuild on the workers")
        log.info("%s: %d worker(s), %d thread(s), running %s", self.address, len(self.accepted), self.slots,
                 shipping.describe_identity(self.identity))

    def workers(self) -> list[str]:
        """Addresses of the live workers that run this accelbuild (new workers are checked first)."""
        with self._lock:
            live = set(self.client.scheduler_info(n_workers=-1)["workers"])
            new = sorted(live - self.accepted - set(self.refused))
            if new:
                found = self.client.run(_worker_identity, workers=new, on_error="return")
                refused = [addr for addr in new if not self._judge(addr, found.get(addr, RuntimeError("no answer")))]
                for addr in refused if self.accepted else ():  # with none accepted, the build stops instead
                    log.warning("refusing Dask worker %s: it %s, this build is %s; install the same accelbuild "
                                "there", addr, self.refused[addr], shipping.describe_identity(self.identity))
            return sorted(self.accepted & live)

    def _judge(self, addr: str, ident: Any) -> bool:
        """Accept the worker if it runs this build's accelbuild; else record why not."""
        if isinstance(ident, BaseException):
            self.refused[addr] = f"cannot run accelbuild ({_short(ident)})"
        elif tuple(ident) != self.identity:
            self.refused[addr] = f"runs {shipping.describe_identity(tuple(ident))}"
        else:
            self.accepted.add(addr)
        return addr in self.accepted

    @property
    def slots(self) -> int:
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return max(1, sum(int(info[a].get("nthreads", 1)) for a in self.accepted if a in info))

    def _submit(self, fn: Callable[..., Any], *args: Any, name: str) -> Future:
        workers = self.workers()
        return self.client.submit(fn, *args, key=f"accelbuild-{name}-{uuid.uuid4().hex}", pure=False, retries=1,
                                  workers=workers or None, allow_other_workers=bool(workers))

    def _result(self, future: Future, what: str, timeout: float | None = None) -> Any:
        """The future's result (``TimeoutError`` after ``timeout`` seconds, if given); the cluster's failures
        as accelbuild's errors naming ``what``."""
        from distributed.client import CancelledError
        from distributed.comm.core import CommClosedError
        from distributed.scheduler import KilledWorker

        try:
            return future.result(timeout=timeout)
        except shipping.WorkerMismatch as exc:
            raise ExecutorError(f"{what}: {exc}") from None
        except KilledWorker as exc:
            raise StageError(f"{what}: every worker that ran it died ({_short(exc)})") from None
        except (CancelledError, CommClosedError) as exc:
            raise StageError(f"{what}: lost the Dask scheduler at {self.address} ({_short(exc)})") from None

    def run_job(self, job: Job, staged: dict[str, Path]) -> None:
        """Run ``job``'s stage on the cluster; its outputs land (verified) in ``staged``."""
        future = self._submit(shipping.run_parcel, shipping.pack(job), self.identity, name=job.stage)
        try:
            shipping.unpack(self._result(future, job.name), staged)
        finally:
            future.release()

    def map(self, fn: Callable[[Any, Any], Any], items: Sequence[Any], shared: Any) -> Iterator[Any]:
        """``fn(item, shared)`` on the cluster for every item; ``shared`` goes to each worker once. Results
        come back pickled with their SHA-256 and are verified; yielded in completion order."""
        from distributed import as_completed

        if not items:
            return
        workers = self.workers()
        [shared_future] = self.client.scatter([shared], broadcast=True, hash=False, workers=workers or None)
        futures = [self._submit(_verified_call, fn, item, shared_future, self.identity, name=fn.__name__)
                   for item in items]
        try:
            for future in as_completed(futures, loop=self.client.loop):
                data, digest = self._result(future, f"{fn.__name__} on the cluster")
                if _sha(data) != digest:
                    raise OSError(f"a result of {fn.__name__} arrived altered")
                yield pickle.loads(data)
        finally:
            self.client.cancel([f for f in futures if not f.done()])
            for f in futures:
                f.release()
            shared_future.release()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()


def _worker_identity() -> tuple[str, str]:
    return shipping.identity()


def _verified_call(fn: Callable[[Any, Any], Any], item: Any, shared: Any,
                   expected: tuple[str, str]) -> tuple[bytes, str]:
    """Worker side of ``map``: the result pickled, with its SHA-256."""
    shipping.check_identity(expected)
    data = pickle.dumps(fn(item, shared), protocol=pickle.HIGHEST_PROTOCOL)
    return data, _sha(data)


@contextlib.contextmanager
def session(address: str | None) -> Iterator[DaskExecutor | None]:
    """The executor for one run, registered for the worker (None: a local build)."""
    if address is None:
        yield None
        return
    ex = DaskExecutor.connect(address)
    executors.register(ex)
    try:
        yield ex
    finally:
        executors.unregister(ex)
        ex.close()
