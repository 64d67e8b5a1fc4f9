"""A test-only guard: a stage opens for reading only its declared inputs and its own files.

``Job.inputs`` is the one list behind doit's ``file_dep``, the artifact-cache key and what travels to a
Dask worker, so a file a stage reads without declaring it would be missed by all three (a stale build, a
wrong cache hit, a failure on a remote worker). With ``ACCELBUILD_READ_GUARD=1`` in the environment (the
test suite sets it), the worker runs each stage under a ``sys.addaudithook`` hook on the ``open`` event:
opening for reading a file under the job's folders (``Job.folders``: the pipeline's folder and its output
folder; on a Dask worker also the folder its inputs arrived in) that is neither a declared input, one of
the job's outputs, nor in its staging folder or the artifact cache raises ``UndeclaredRead``, and the stage
fails with that message even if it caught the exception.

What it sees: Python-level opens (``open``, ``io.open``, ``os.open``; so ``onnx.load``, ``numpy.load``,
Pillow, ``Path.read_bytes``) in the thread that runs the stage, and in processes that thread forks. Files a
C++ library opens by itself (onnxruntime given a path, a Vela subprocess) are not seen. Without the
environment variable nothing is installed.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV = "ACCELBUILD_READ_GUARD"

_local = threading.local()
_install_lock = threading.Lock()
_installed = False


class UndeclaredRead(RuntimeError):
    """A stage opened a file it did not declare as an input."""


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


def _real(path: Path | str) -> str:
    return os.path.realpath(os.fspath(path))


def _under(path: str, folders: Iterable[str]) -> bool:
    return any(path == f or path.startswith(f + os.sep) for f in folders)


@dataclass
class _Guard:
    job: str
    roots: tuple[str, ...]  # folders where every read must be declared
    files: frozenset[str]  # declared inputs and outputs
    folders: tuple[str, ...]  # the stage's own folders (staging, folder outputs, the artifact cache)
    violations: list[str] = field(default_factory=list)
    busy: bool = False

    def check(self, path: Any) -> None:
        real = _real(os.fsdecode(path))
        if not _under(real, self.roots) or real in self.files or _under(real, self.folders):
            return
        message = (f"{self.job}: the stage opened {real} for reading, which is not one of its declared inputs "
                   "(add it to the stage's inputs so doit, the cache key and Dask shipping see it)")
        self.violations.append(message)
        raise UndeclaredRead(message)


def _reading(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return "r" in mode or "+" in mode
    return isinstance(flags, int) and (flags & os.O_ACCMODE) != os.O_WRONLY


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "open":
        return
    guard = getattr(_local, "guard", None)
    if guard is None or guard.busy or len(args) < 3:
        return
    path, mode, flags = args[:3]
    if path is None or isinstance(path, int) or not _reading(mode, flags):
        return
    if not os.path.isabs(os.fsdecode(path)):  # relative to a dir_fd the event does not name (shutil.rmtree's
        return                                 # os.open); a stage's files come as absolute paths
    guard.busy = True
    try:
        guard.check(path)
    finally:
        guard.busy = False


def _install() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            sys.addaudithook(_hook)  # for the life of the process: audit hooks cannot be removed
            _installed = True


@contextmanager
def guarding(job: Any, inputs: Mapping[str, Path], own: Iterable[Path], roots: Iterable[Path] = ()) -> Iterator[None]:
    """Run the body (one stage of ``job``) under the guard when ``ACCELBUILD_READ_GUARD=1``.

    ``inputs`` are the files the stage was given; ``own`` the folders it writes or reads its own files in
    (staging, the artifact cache); ``roots`` folders watched besides ``job.folders``.
    """
    if not enabled():
        yield
        return
    _install()
    outputs = [Path(p) for p in job.outputs.values()]
    guard = _Guard(
        job=job.name,
        roots=tuple(_real(p) for p in [*job.folders, *roots]),
        files=frozenset(_real(p) for p in [*inputs.values(), *outputs]),
        folders=tuple(_real(p) for p in [*own, *(p for n, p in zip(job.outputs, outputs) if n.endswith("/"))]),
    )
    previous = getattr(_local, "guard", None)
    _local.guard = guard
    try:
        yield
    except BaseException:
        if guard.violations:  # the stage may have turned it into another error: say what happened
            raise UndeclaredRead(guard.violations[0]) from None
        raise
    finally:
        _local.guard = previous
    if guard.violations:  # the stage caught the exception and went on
        raise UndeclaredRead(guard.violations[0])
