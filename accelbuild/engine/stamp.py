"""The no-op fast path: a run with nothing to do is replayed from a stamp of everything its verdict rests on.

A ``run`` that finds every task up to date still loads and validates its configs, plans every job and asks
doit about each; over 100 pipelines that is most of half a second. After a run whose tasks all ended ran,
up-to-date or cached, the CLI records a *stamp* for that invocation in ``<state dir>/noop/``: what the same
command would print if run again (every task up-to-date), and a stat of every file and folder that could
change that verdict. The next identical command checks the stamp (stats, the configs' bytes) and, if
nothing moved, prints what the full run would have printed and exits with its code. On any doubt (no
stamp, an unreadable one, another invocation's, any entry moved) the full run happens and records anew.

What a stamp covers
    - the invocation: current folder, the command line, every ``ACCELBUILD_*`` environment variable, the
      interpreter and its ``sys.path``, accelbuild's version and folder (the key, ``task_key.invocation_key``;
      another ``-j`` is another stamp);
    - every file that loading the configs and planning opened for reading (configs, ``extends`` bases,
      profile files, models read for their inputs): stat taken when it was opened, before the read, and the
      SHA-256 of its bytes when it is at most ``HASH_AT_MOST`` (the configs are compared by content);
    - every folder listed then (a data folder, a model's external-data folder): an image added or removed
      changes its modification time;
    - every job input no job produces, stat taken after planning and before the run; every job output
      after the run (an absent optional output must stay absent; a folder output file by file);
    - doit's state DB, every file and folder of accelbuild's package and of plug-in families' code
      (``code_identity``), and the interpreter's ``sys.path`` folders (installing or removing a package
      changes them).

A stat is (size, modification time in ns, inode, is a folder): a file whose stat is unchanged is taken as
unchanged, as git and DVC do; its content is not read again (except the configs').

Settled entries only
    A stamp is written only when every entry was last modified at least ``SETTLE_NS`` before the run began:
    a file changed within the file system's timestamp granularity of being read could otherwise look
    unchanged (git's "racy clean" entries). Right after a build, the next run is a full one; later ones
    replay.

The recording window (``Watch``) sees Python-level opens and folder listings through a
``sys.addaudithook`` hook (the events ``open``, ``os.scandir``, ``os.listdir``), installed on first use
and idle outside a window. It does not see a plain existence test (``Path.exists``); every such test in
loading and planning is of a file that is then read or of a folder that is then listed, or else makes the
run fail (a missing model), which records no stamp.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import accelbuild
from accelbuild.engine.task_key import invocation_key

log = logging.getLogger(__name__)

FORMAT = 1
FOLDER = "noop"  # in the state dir
SETTLE_NS = 2_000_000_000  # entries modified later than this before the run began: no stamp
HASH_AT_MOST = 1 << 20  # files opened while loading, up to this size, are compared by content too
KEEP = 32  # stamps kept per state dir (the newest)

Stat = tuple[int, int, int, bool]  # size, mtime_ns, inode, is a folder


def stat_of(path: str) -> Stat | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino, (st.st_mode & 0o170000) == 0o040000)


def _absolute(path: os.PathLike[str] | str) -> str:
    name = os.fspath(path)
    return name if os.path.isabs(name) and "/." not in name else os.path.abspath(name)


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


@dataclass(frozen=True)
class Invocation:
    """One command line in one place: its key and where its stamp lives."""

    key: str
    state_dir: Path

    @property
    def path(self) -> Path:
        return self.state_dir / FOLDER / f"{self.key[:40]}.json"


def invocation(argv: Iterable[str], state_dir: Path) -> Invocation:
    """This process's invocation (``task_key.invocation_key``) and where its stamp lives."""
    key = invocation_key(os.getcwd(), list(argv),
                         {k: v for k, v in os.environ.items() if k.startswith("ACCELBUILD_")},
                         [sys.executable, sys.version, sys.path], os.path.dirname(os.path.abspath(accelbuild.__file__)))
    return Invocation(key, Path(os.path.abspath(state_dir)))


@dataclass
class Replay:
    """What the run printed, as a no-op run of the same command prints it."""

    stderr: str  # everything before the closing line: log lines, task lines, warnings, the failures line
    closing: str  # the closing line without its time (" in X s" is appended when replayed)
    stdout: str  # the JSON summary with ``--json``
    exit_code: int

    def print(self, out: TextIO, err: TextIO, seconds: float) -> int:
        err.write(self.stderr)
        err.write(f"{self.closing} in {seconds:.1f} s\n")
        err.flush()
        out.write(self.stdout)
        out.flush()
        return self.exit_code


def replay(inv: Invocation) -> Replay | None:
    """The stamped run of ``inv`` if nothing it rests on has moved since, else None (run in full)."""
    try:
        data = json.loads(inv.path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != inv.key:
        return None
    from accelbuild.engine.state import locked

    with locked(inv.state_dir):  # a run in progress may be changing the very files checked
        moved = _first_moved(data)
        if moved is not None:
            log.debug("no-op fast path: %s moved since the last run; checking in full", moved)
            return None
    return Replay(**data["replay"])


def _first_moved(data: dict[str, Any]) -> str | None:
    for path, recorded in data["stats"].items():
        if stat_of(path) != (tuple(recorded) if recorded is not None else None):
            return path
    for path, digest in data["hashes"].items():
        if _sha256(path) != digest:
            return path
    return None


def drop(inv: Invocation) -> None:
    """Remove the invocation's stamp (a full run is about to change what it describes)."""
    try:
        inv.path.unlink(missing_ok=True)
    except OSError:
        pass


# -- the recording window --------------------------------------------------------------------------------

_active: Watch | None = None
_installed = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    watch = _active
    if watch is None:
        return
    if event == "open":
        if len(args) >= 3 and args[0] is not None and not isinstance(args[0], int) and _reading(args[1], args[2]):
            watch.opened(args[0])
    elif event in ("os.scandir", "os.listdir") and args and not isinstance(args[0], int):
        watch.listed("." if args[0] is None else args[0])


def _reading(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return "r" in mode and "+" not in mode
    return isinstance(flags, int) and (flags & os.O_ACCMODE) == os.O_RDONLY


class Watch:
    """Records what loading and planning read (``with Watch(...)``), then the jobs' files (``planned``), then
    after the run writes the stamp (``record``)."""

    def __init__(self, inv: Invocation) -> None:
        self.inv = inv
        self.started_ns = time.time_ns()
        self.stats: dict[str, Stat | None] = {}  # path -> the first stat taken
        self.small: set[str] = set()  # files opened while loading, compared by content
        self.outputs: list[tuple[str, bool]] = []  # (path, is a folder output)
        self.log_lines: list[str] = []
        package = os.path.dirname(os.path.abspath(accelbuild.__file__))
        self._skip = tuple(os.path.abspath(p) + os.sep for p in
                           {package, sys.prefix, sys.base_prefix, sys.exec_prefix, str(inv.state_dir)}) + \
            ("/proc/", "/dev/", "/sys/")
        for folder, subfolders, files in os.walk(package):  # accelbuild's own code and package data
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            self._stat(folder)
            for name in files:
                self._stat(os.path.join(folder, name))
        for entry in sys.path:  # the environment: a package installed or removed changes these folders
            if entry and os.path.isdir(entry):
                self._stat(os.path.abspath(entry))

    def _stat(self, path: str) -> None:
        if path not in self.stats:
            self.stats[path] = stat_of(path)

    def __enter__(self) -> Watch:
        global _active, _installed
        if not _installed:
            sys.addaudithook(_hook)  # for the life of the process (hooks cannot be removed): idle outside
            _installed = True
        root = logging.getLogger()
        self._capture = _Capture(self.log_lines, root.handlers[0].formatter if root.handlers else None)
        root.addHandler(self._capture)
        _active = self
        return self

    def __exit__(self, *exc: Any) -> None:
        global _active
        _active = None
        logging.getLogger().removeHandler(self._capture)

    def opened(self, path: Any) -> None:  # (os.stat raises no audit event: nothing here re-enters the hook)
        name = os.path.abspath(os.fsdecode(path))
        if not name.endswith((".py", ".pyc")) and not name.startswith(self._skip) and name not in self.stats:
            self.stats[name] = stat_of(name)
            self.small.add(name)

    def listed(self, path: Any) -> None:
        name = os.path.abspath(os.fsdecode(path))
        if not name.startswith(self._skip) and "__pycache__" not in name:
            self._stat(name)

    def planned(self, jobs: Iterable[Any]) -> None:
        """The jobs' own files: stat the inputs no job produces now (before the run reads them); remember
        the outputs for ``record``."""
        jobs = list(jobs)
        produced = {_absolute(p) for job in jobs for p in job.outputs.values()}
        for job in jobs:
            for path in job.inputs.values():
                name = _absolute(path)
                if name not in produced:
                    self._stat(name)
        self.outputs = sorted({(_absolute(p), name.endswith("/")) for job in jobs for name, p in job.outputs.items()})

    def record(self, replayed: Replay, db: Path) -> bool:
        """Write the stamp, if every entry is settled and the files read while loading are as they were
        when read. Returns whether it was written."""
        from accelbuild.engine.code_identity import hashed_files
        from accelbuild.util.files import write_bytes_atomic

        stats = dict(self.stats)
        for path in self.small:  # as when it was read, or the run saw another version than the stamp would
            if stat_of(path) != stats[path]:
                return False
        for path, folder in self.outputs:
            stats[path] = stat_of(path)
            if folder and stats[path] is not None:
                for parent, subfolders, files in os.walk(path):
                    subfolders.sort()
                    stats[parent] = stat_of(parent)
                    stats.update((os.path.join(parent, f), stat_of(os.path.join(parent, f))) for f in files)
        for path in map(_absolute, [*hashed_files(), db]):
            stats.setdefault(path, stat_of(path))
        unsettled = [p for p, s in stats.items() if s is not None and s[1] > self.started_ns - SETTLE_NS]
        if unsettled:
            log.debug("no-op fast path: %d file(s) changed too recently to stamp (%s)", len(unsettled),
                      unsettled[0])
            return False
        hashes = {}
        for path in sorted(self.small):
            if stats[path] is not None and stats[path][0] <= HASH_AT_MOST:
                hashes[path] = _sha256(path)
        data = {"format": FORMAT, "key": self.inv.key, "stats": stats, "hashes": hashes,
                "replay": replayed.__dict__}
        try:
            write_bytes_atomic(self.inv.path, json.dumps(data, separators=(",", ":")).encode("utf-8"))
            _prune(self.inv.path.parent)
        except OSError as exc:
            log.debug("no-op fast path: could not write %s: %s", self.inv.path, exc)
            return False
        return True


class _Capture(logging.Handler):
    """The log lines a run prints while loading (a no-op replay prints them again)."""

    def __init__(self, lines: list[str], formatter: logging.Formatter | None) -> None:
        super().__init__()
        self.lines = lines
        if formatter is not None:
            self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record) + "\n")


def _prune(folder: Path) -> None:
    stamps = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in stamps[KEEP:]:
        old.unlink(missing_ok=True)
