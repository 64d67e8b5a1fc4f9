"""The state dir: where doit's DB lives, guarded by a lock so concurrent runs wait instead of clashing."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)

LOCK_NAME = "lock"


def default_state_dir() -> Path:
    return Path(os.environ.get("ACCELBUILD_STATE_DIR") or ".accelbuild")


def default_cache_dir(state_dir: Path) -> Path:
    env = os.environ.get("ACCELBUILD_CACHE_DIR")
    return Path(env) if env else state_dir / "cache"


@contextlib.contextmanager
def locked(state_dir: Path) -> Iterator[None]:
    """Hold the state dir's lock; if another run holds it, say so and wait for it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("another accelbuild run is using %s; waiting for it to finish", state_dir)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
