"""Atomic file writes and content digests.

Every file accelbuild writes goes through a temp file in the same folder and ``os.replace``, so a killed
build leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

_CHUNK = 1 << 20


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_current_umask()  # what open() would give; mkstemp alone gives 0600
_SCRATCH: list[Path] = []  # folders whose files are thrown away when the command ends: never fsync'ed


@contextlib.contextmanager
def scratch(folder: Path) -> Iterator[Path]:
    """Writes under ``folder`` (a temporary folder of the command, removed when it ends: ``validate``'s and
    ``tensors``' stage outputs) skip the fsync a durable write does; they stay atomic. A power cut loses the
    folder anyway, and each fsync costs the command a disk flush (a tenth of a second for a small model's
    fourteen files on a busy disk)."""
    folder = Path(folder).absolute()
    _SCRATCH.append(folder)
    try:
        yield folder
    finally:
        _SCRATCH.remove(folder)


def _in_scratch(path: Path) -> bool:
    return any(path.absolute().is_relative_to(folder) for folder in _SCRATCH)


@contextlib.contextmanager
def atomic_writer(path: Path, durable: bool = True) -> Iterator[BinaryIO]:
    """Open a temp file next to ``path``; on success it replaces ``path``, else it vanishes. ``durable``:
    fsync'ed before the rename (a power cut cannot leave it empty); the artifact cache, which checks every
    byte it reads back, does without."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            if durable and not (_SCRATCH and _in_scratch(path)):
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bytes_atomic(path: Path, data: bytes, durable: bool = True) -> None:
    with atomic_writer(path, durable) as handle:
        handle.write(data)


def json_bytes(value: Any) -> bytes:
    """JSON with sorted keys and a trailing newline: the same value gives the same bytes."""
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def write_json_atomic(path: Path, value: Any, durable: bool = True) -> None:
    """Write ``json_bytes(value)`` atomically."""
    write_bytes_atomic(path, json_bytes(value), durable)


def copy_atomic(source: Path, target: Path, durable: bool = True) -> None:
    with open(source, "rb") as src, atomic_writer(target, durable) as dst:
        shutil.copyfileobj(src, dst, _CHUNK)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def json_digest(value: Any) -> str:
    """SHA-256 of a value's canonical JSON form."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()
