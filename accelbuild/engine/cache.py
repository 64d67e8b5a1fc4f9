"""Content-addressed artifact cache.

Layout under the cache root::

    objects/ab/abcdef...      file contents, named by their SHA-256
    entries/12/1234ab....json one per build key: {"files": {name: {"sha256", "size"}}}

A key digests the stage, its parameter digest, the contents of its inputs and the tool version, never a
path, so a cache copied to another checkout (CI) still hits. Objects are written before the entry that
names them, each atomically, so a killed build never leaves an entry pointing at a partial object. On
restore every object is re-hashed: an entry whose objects were edited or truncated is dropped (and the
stage rebuilt), never served.

With a ``remote`` store (``accelbuild.engine.remote_cache``, a shared cache at an fsspec URL) a local miss
is looked up there and copied in (verified), and every stored entry is written back to it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbuild.util.files import copy_atomic, file_sha256, json_digest, write_json_atomic

if TYPE_CHECKING:
    from accelbuild.engine.remote_cache import RemoteStore

log = logging.getLogger(__name__)

ENTRY_FORMAT = 1


@dataclass(frozen=True)
class CacheUsage:
    entries: int
    objects: int
    bytes: int


@dataclass(frozen=True)
class GcResult:
    entries_removed: int
    objects_removed: int
    left: CacheUsage


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass  # a read-only cache is still a cache


def cache_key(stage: str, param_digest: str, input_digests: Mapping[str, str], version: str) -> str:
    """The build key of one stage run: what it does, with what, on which inputs, by which tool."""
    return json_digest({
        "format": ENTRY_FORMAT,
        "stage": stage,
        "params": param_digest,
        "inputs": dict(sorted(input_digests.items())),
        "version": version,
    })


class ArtifactCache:
    def __init__(self, root: Path, remote: RemoteStore | None = None) -> None:
        self.root = Path(root)
        self.remote = remote  # a shared cache behind this one: read on a local miss, written back

    def _entry_path(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / f"{key}.json"

    def _object_path(self, sha: str) -> Path:
        return self.root / "objects" / sha[:2] / sha

    def store(self, key: str, files: Mapping[str, Path]) -> None:
        """Record ``files`` (name -> produced file) under ``key``."""
        listing = {}
        for name, path in sorted(files.items()):
            sha = file_sha256(path)
            obj = self._object_path(sha)
            if not (obj.is_file() and file_sha256(obj) == sha):
                copy_atomic(path, obj)
            listing[name] = {"sha256": sha, "size": path.stat().st_size}
        entry = {"format": ENTRY_FORMAT, "key": key, "files": listing}
        write_json_atomic(self._entry_path(key), entry)
        if self.remote is not None:
            self.remote.publish(key, entry, {meta["sha256"]: self._object_path(meta["sha256"])
                                             for meta in listing.values()})

    def listing(self, key: str) -> dict[str, str] | None:
        """The SHA-256 of each file of ``key`` if its entry and objects are present (sizes checked, not
        contents: a cheap look for ``status``; a restore still verifies every byte)."""
        try:
            entry = json.loads(self._entry_path(key).read_text(encoding="utf-8"))
            files = entry["files"]
            listing = {}
            for name, meta in files.items():
                if self._object_path(meta["sha256"]).stat().st_size != meta["size"]:
                    return None
                listing[name] = meta["sha256"]
            return listing
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def lookup(self, key: str) -> dict[str, Path] | None:
        """The verified objects of ``key`` by file name, or None on a miss or a damaged entry; a local
        miss is fetched from the remote store, if there is one."""
        found = self.lookup_local(key)
        if found is None and self.remote is not None and self.remote.fetch(key, self):
            found = self.lookup_local(key)
        return found

    def lookup_local(self, key: str) -> dict[str, Path] | None:
        """As ``lookup``, in this cache only."""
        entry_path = self._entry_path(key)
        try:
            entry = json.loads(entry_path.read_text(encoding="utf-8"))
            files = entry["files"]
            if entry.get("key") != key or entry.get("format") != ENTRY_FORMAT or not isinstance(files, dict):
                raise ValueError("entry does not describe this key")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("cache entry %s is unreadable (%s); rebuilding", entry_path.name, exc)
            self._drop(entry_path)
            return None
        found = {}
        for name, meta in files.items():
            obj = self._object_path(str(meta.get("sha256", "")))
            try:
                intact = obj.stat().st_size == meta["size"] and file_sha256(obj) == meta["sha256"]
            except (OSError, KeyError, TypeError):
                intact = False
            if not intact:
                log.warning("cache object for %s of entry %s is missing or altered; rebuilding", name, key[:12])
                self._drop(entry_path)
                self._drop(obj)
                return None
            found[name] = obj
        _touch(entry_path)  # last use, for `cache gc`'s least-recently-used order
        return found

    def restore(self, key: str, targets: Mapping[str, Path]) -> bool:
        """Copy the entry's files to ``targets`` (name -> destination); False on a miss.

        Targets the entry does not hold are removed, so an optional output of an older build cannot
        linger beside a restored set.
        """
        objects = self.lookup(key)
        if objects is None:
            return False
        if not set(objects) <= set(targets):
            log.warning("cache entry %s holds unexpected files; rebuilding", key[:12])
            return False
        for name, destination in targets.items():
            if name in objects:
                copy_atomic(objects[name], destination)
            elif destination.exists():
                destination.unlink()
        return True

    def usage(self) -> CacheUsage:
        """Entries, objects and bytes on disk."""
        entries = list(self._entries())
        objects = [p for p in (self.root / "objects").glob("*/*") if p.is_file()]
        size = sum(_size(p) for p in entries) + sum(_size(p) for p in objects)
        return CacheUsage(len(entries), len(objects), size)

    def gc(self, max_size: int | None = None, older_than_seconds: float | None = None,
           now: float | None = None) -> GcResult:
        """Evict entries unused for ``older_than_seconds``, then the least recently used until the cache
        holds at most ``max_size`` bytes; objects no remaining entry names go with them."""
        now = time.time() if now is None else now
        entries = sorted(self._entries(), key=lambda p: (_mtime(p), p.name))  # least recently used first
        keep: list[Path] = []
        removed = 0
        for entry in entries:
            if older_than_seconds is not None and now - _mtime(entry) > older_than_seconds:
                self._drop(entry)
                removed += 1
            else:
                keep.append(entry)
        referenced = {entry: self._objects_of(entry) for entry in keep}
        sizes = {obj: _size(obj) for objs in referenced.values() for obj in objs}
        total = sum(sizes.values()) + sum(_size(e) for e in keep)
        while max_size is not None and keep and total > max_size:
            entry = keep.pop(0)
            still = {obj for e in keep for obj in referenced[e]}
            total -= _size(entry) + sum(sizes[obj] for obj in referenced.pop(entry) if obj not in still)
            self._drop(entry)
            removed += 1
        live = {obj for objs in referenced.values() for obj in objs}
        freed_objects = 0
        for obj in (self.root / "objects").glob("*/*"):
            if obj.is_file() and obj not in live:
                self._drop(obj)
                freed_objects += 1
        return GcResult(removed, freed_objects, self.usage())

    def _entries(self) -> Iterator[Path]:
        return (p for p in (self.root / "entries").glob("*/*.json") if p.is_file())

    def _objects_of(self, entry: Path) -> set[Path]:
        try:
            files = json.loads(entry.read_text(encoding="utf-8"))["files"]
            return {self._object_path(str(meta["sha256"])) for meta in files.values()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return set()

    def object_path(self, sha: str) -> Path:
        """Where the object with this SHA-256 is kept (whether or not it is there)."""
        return self._object_path(sha)

    def add_entry(self, key: str, entry: dict[str, Any]) -> None:
        """Record an entry whose objects are already in place (copied in from a remote store)."""
        write_json_atomic(self._entry_path(key), entry)

    def keys(self) -> list[str]:
        """Every key with an entry (not verified)."""
        return sorted(p.stem for p in (self.root / "entries").glob("*/*.json"))

    def entry(self, key: str) -> dict[str, Any] | None:
        """The entry of ``key`` if all its objects verify (else None, and it is dropped)."""
        if self.lookup_local(key) is None:
            return None
        try:
            return json.loads(self._entry_path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # dropped meanwhile by a concurrent run
            return None

    @staticmethod
    def _drop(path: Path) -> None:
        try:
            os.unlink(path)
        except OSError:
            pass
