"""A build job by content: what travels to a machine that does not share this filesystem, and back.

``pack`` reads the job's input files (``Job.inputs``, the same list as doit's ``file_dep`` and the cache key)
into a ``Parcel``, keeping their layout relative to each other. On the worker, ``run_parcel`` checks that it runs
the same accelbuild (version and code digest), writes the files into a temp folder, verifies each
against its SHA-256, runs the stage there and returns every output's bytes with its SHA-256 and what
the stage logged, or what went wrong. ``unpack`` verifies the bytes again on arrival and writes them into the
job's staging paths, from where the worker publishes and caches them as for a local run.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import socket
import tempfile
import threading
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from accelbuild import __version__
from accelbuild.engine import read_guard
from accelbuild.engine.code_identity import code_digest
from accelbuild.engine.plan import Job
from accelbuild.errors import AccelbuildError, StageError, UserError, render_user_error
from accelbuild.stages.context import StageContext
from accelbuild.util.files import write_bytes_atomic

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def identity() -> tuple[str, str]:
    """This installation's accelbuild version and the digest of all its code (and package data)."""
    return __version__, code_digest(("accelbuild",))


def describe_identity(ident: tuple[str, str]) -> str:
    return f"accelbuild {ident[0]} (code {ident[1][:12]})"


class WorkerMismatch(Exception):
    """A worker runs another accelbuild than the build; it must not build anything for it."""


def check_identity(expected: tuple[str, str]) -> None:
    """Raise ``WorkerMismatch`` unless this process runs the accelbuild the build expects."""
    here = identity()
    if tuple(expected) != here:
        raise WorkerMismatch(f"worker {socket.gethostname()} runs {describe_identity(here)}, the build needs "
                             f"{describe_identity(tuple(expected))}; install the same accelbuild on the workers")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Parcel:
    """A job and the bytes of everything it reads, by path relative to the inputs' common folder."""

    job: Job
    inputs: dict[str, str]  # role -> relative path
    files: dict[str, bytes]  # relative path -> contents
    digests: dict[str, str]  # relative path -> SHA-256


@dataclass(frozen=True)
class Failure:
    kind: str  # "user" (exit 2), "stage" (exit 1, no traceback) or "internal"
    message: str
    traceback: str = ""


@dataclass(frozen=True)
class Returned:
    """What comes back: output bytes by cache-file name (a folder output's files as ``splits/00/x``)."""

    outputs: dict[str, bytes] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    folders: tuple[str, ...] = ()  # folder outputs the stage created (possibly empty)
    logs: tuple[tuple[int, str, str], ...] = ()  # (level, logger name, message) the stage logged
    failure: Failure | None = None
    host: str = ""


def pack(job: Job) -> Parcel:
    """The job with the bytes of every one of its inputs (``Job.inputs``: a stage reads nothing else)."""
    absolute = {role: Path(path).absolute() for role, path in job.inputs.items()}
    base = Path(os.path.commonpath([p.parent for p in absolute.values()])) if absolute else Path("/")
    relative = {role: p.relative_to(base).as_posix() for role, p in absolute.items()}
    files = {rel: absolute[role].read_bytes() for role, rel in relative.items()}
    return Parcel(job, relative, files, {rel: _sha(data) for rel, data in files.items()})


class RemoteUserError(UserError):
    """A user mistake found by a stage on a worker; the message is as the stage rendered it."""


class RemoteCrash(Exception):
    """A stage crashed on a worker; ``remote_traceback`` is the worker's traceback."""

    def __init__(self, message: str, remote_traceback: str) -> None:
        super().__init__(message)
        self.remote_traceback = remote_traceback


def run_parcel(parcel: Parcel, expected: tuple[str, str]) -> Returned:
    """Worker side: run the parcel's stage in a temp folder; never raises for the stage's own errors."""
    check_identity(expected)
    job = parcel.job
    with tempfile.TemporaryDirectory(prefix="accelbuild-task-") as tmp, _CapturedLogs() as captured:
        inputs_dir, staging = Path(tmp) / "in", Path(tmp) / "out"
        for rel, data in parcel.files.items():
            if _sha(data) != parcel.digests[rel]:
                raise OSError(f"input {rel} arrived altered")  # Dask retries the task
            write_bytes_atomic(inputs_dir / rel, data)
        staging.mkdir()
        staged = {name: staging / name.rstrip("/").replace("/", "_") for name in job.outputs}
        inputs = {role: inputs_dir / rel for role, rel in parcel.inputs.items()}
        failure = _run_stage(job, inputs, staged, Path(tmp))
        outputs = {} if failure else _collect(staged)
        folders = tuple(name for name, path in staged.items() if name.endswith("/") and path.is_dir())
    return Returned(outputs, {n: _sha(d) for n, d in outputs.items()}, folders, tuple(captured.records), failure,
                    socket.gethostname())


def _run_stage(job: Job, inputs: dict[str, Path], staged: dict[str, Path], tmp: Path) -> Failure | None:
    try:
        module = importlib.import_module(job.module)
        with read_guard.guarding(job, inputs, {p.parent for p in staged.values()}, roots=(tmp,)):
            module.run(StageContext(job.params, inputs, staged, job.locate, None, job.jobs))
    except UserError as exc:
        return Failure("user", render_user_error(exc))
    except AccelbuildError as exc:
        return Failure("stage", str(exc))
    except Exception as exc:
        return Failure("internal", f"{exc.__class__.__name__}: {exc}", "".join(traceback.format_exception(exc)))
    return None


def _collect(staged: dict[str, Path]) -> dict[str, bytes]:
    outputs = {}
    for name, path in staged.items():
        if name.endswith("/") and path.is_dir():
            for p in sorted(path.rglob("*")):
                if p.is_file():
                    outputs[name + p.relative_to(path).as_posix()] = p.read_bytes()
        elif path.is_file():
            outputs[name] = path.read_bytes()
    return outputs


def unpack(returned: Returned, staged: dict[str, Path]) -> None:
    """Client side: replay what the stage logged, raise its failure, or write its outputs (verified) into
    the staging paths."""
    for level, name, message in returned.logs:
        logging.getLogger(name).log(level, "%s", message)
    failure = returned.failure
    if failure is not None:
        if failure.kind == "user":
            raise RemoteUserError(failure.message)
        if failure.kind == "stage":
            raise StageError(failure.message)
        raise RemoteCrash(f"{failure.message} (on worker {returned.host})", failure.traceback)
    for name in returned.folders:
        staged[name].mkdir(parents=True, exist_ok=True)
    folders = [name for name in staged if name.endswith("/")]
    for name, data in returned.outputs.items():
        if _sha(data) != returned.digests.get(name):
            raise OSError(f"output {name} from worker {returned.host} arrived altered")
        folder = next((f for f in folders if name.startswith(f)), None)
        if folder is not None:
            write_bytes_atomic(staged[folder] / name[len(folder):], data)
        elif name in staged:
            write_bytes_atomic(staged[name], data)
        else:
            raise OSError(f"worker {returned.host} returned an undeclared output {name}")


class _CapturedLogs(logging.Handler):
    """What accelbuild logs (INFO and up) in this thread while a stage runs, to replay on the client (which
    shows it as a local run would)."""

    _lock = threading.Lock()
    _users = 0
    _level_before = logging.NOTSET

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.thread = threading.get_ident()
        self.records: list[tuple[int, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.records.append((record.levelno, record.name, record.getMessage()))

    def __enter__(self) -> _CapturedLogs:
        logger = logging.getLogger("accelbuild")
        with self._lock:
            if _CapturedLogs._users == 0:
                _CapturedLogs._level_before = logger.level
                if logger.getEffectiveLevel() > logging.INFO:
                    logger.setLevel(logging.INFO)
            _CapturedLogs._users += 1
        logger.addHandler(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        logger = logging.getLogger("accelbuild")
        logger.removeHandler(self)
        with self._lock:
            _CapturedLogs._users -= 1
            if _CapturedLogs._users == 0:
                logger.setLevel(_CapturedLogs._level_before)
