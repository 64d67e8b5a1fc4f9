"""The project root and its state dir: where doit's DB lives, guarded by a lock so concurrent runs wait
instead of clashing.

The project root is the nearest folder at or above the current one that holds ``.accelbuild/`` or
``.git`` (else the current folder). The state dir defaults to ``<root>/.accelbuild`` and the state
records paths relative to the root, so a pipeline built from a subfolder and then from the root is the
same build, and a checkout moved elsewhere keeps its state."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_NAME = "lock"


STATE_NAME = ".accelbuild"


def project_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (the current folder) holding ``.accelbuild/`` or ``.git``."""
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if (folder / STATE_NAME).is_dir() or (folder / ".git").exists():
            return folder
    return here


def default_state_dir(root: Path | None = None) -> Path:
    env = os.environ.get("ACCELBUILD_STATE_DIR")
    return Path(env) if env else (root or project_root()) / STATE_NAME


@contextlib.contextmanager
def working_folder(folder: Path) -> Iterator[None]:
    """Run with ``folder`` as the current folder (doit resolves the state's relative paths against it)."""
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def conversions_dir(state_dir: Path | None = None) -> Path:
    """Where ``tensors``, ``init`` and ``validate`` keep TensorFlow's conversions of Keras and SavedModel
    models, by content (``frontends/tensorflow.py``), so the next command on the same model skips them."""
    return (state_dir or default_state_dir()) / "tensorflow_conversions"


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
