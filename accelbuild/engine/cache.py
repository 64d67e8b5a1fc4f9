"""Content-addressed artifact cache.

Layout under the cache root::

    objects/ab/abcdef...      file contents (or parts of files), named by their SHA-256
    entries/12/1234ab....json one per build key: {"files": {name: {"sha256", "size"[, "parts"]}}}

A file of at least ``file_parts.MIN_FILE`` bytes whose format has shared regions (ONNX weight tensors, a
family's program-file sections) is stored as ``parts``: each ``{"sha256", "size"}`` is an object, or
``"data"`` (hex, a small part kept in the entry), or ``"input": role, "offset"`` (the same bytes lie in
that input of the task: the key pins the input's content, so they are there whenever the entry is used).
32 closed-loop splits then share one weights section, and an imported model shares its tensors with the
user's file. ``usage`` tells the bytes stored from the logical size (every entry's files as restored).

An entry's key is the task key (``engine/task_key.py``: the stage's definition, the contents of its inputs
and accelbuild's version), never a path, so a cache copied to another checkout (CI) still hits. Objects are written before the entry that
names them, each atomically, so a killed build never leaves an entry pointing at a partial object. On
restore every object is re-hashed: an entry whose objects were edited or truncated is dropped (and the
stage rebuilt), never served.

With a ``remote`` store (``accelbuild.engine.remote_cache``, a shared cache at an fsspec URL) a local miss
is looked up there and copied in (verified), and every stored entry is written back to it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbuild.engine import file_parts
from accelbuild.engine.task_key import entry_name, object_name
from accelbuild.util.files import (
    atomic_writer,
    copy_atomic,
    file_sha256,
    write_bytes_atomic,
    write_json_atomic,
)

if TYPE_CHECKING:
    from accelbuild.engine.remote_cache import RemoteStore

log = logging.getLogger(__name__)

ENTRY_FORMAT = 2  # 2: files may be stored as parts
INLINE_PART = 4096  # a part this small is kept in the entry itself (hex)


@dataclass(frozen=True)
class CacheUsage:
    entries: int
    objects: int
    bytes: int  # stored: entries and objects on disk
    logical: int = 0  # every entry's files at their full size (what a restore writes)


class CacheDamaged(Exception):
    """A cache object changed under a restore that had verified it (another process altered the cache)."""


@dataclass(frozen=True)
class CachedFile:
    """One file of a verified cache entry: a whole object, or parts to concatenate."""

    sha256: str
    size: int
    object: Path | None = None  # the whole file, when it is stored whole
    parts: tuple[tuple[Path | bytes, int, int], ...] = ()  # (object file or bytes, offset, length)

    def chunks(self) -> Iterator[bytes]:
        if self.object is not None:
            with open(self.object, "rb") as handle:
                yield from iter(lambda: handle.read(1 << 20), b"")
            return
        for source, offset, length in self.parts:
            if isinstance(source, bytes):
                yield source
            else:
                with open(source, "rb") as handle:
                    handle.seek(offset)
                    yield handle.read(length)

    def read_bytes(self) -> bytes:
        return b"".join(self.chunks())

    def copy_to(self, destination: Path) -> None:
        """Write the file to ``destination`` atomically (parts: checked against the file's SHA-256)."""
        if self.object is not None:
            copy_atomic(self.object, destination)
            return
        digest = hashlib.sha256()
        with atomic_writer(destination) as handle:
            for chunk in self.chunks():
                digest.update(chunk)
                handle.write(chunk)
            if digest.hexdigest() != self.sha256:
                raise CacheDamaged(f"the parts of {destination.name} no longer give the file cached")


def objects_in(entry: Mapping[str, Any]) -> dict[str, int]:
    """The objects an entry names (SHA-256 -> size): whole files and stored parts."""
    found = {}
    for meta in entry["files"].values():
        if "parts" not in meta:
            found[meta["sha256"]] = meta["size"]
        for part in meta.get("parts", ()):
            if "data" not in part and "input" not in part:
                found[part["sha256"]] = part["size"]
    return found


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


class ArtifactCache:
    def __init__(self, root: Path, remote: RemoteStore | None = None) -> None:
        self.root = Path(root)
        self.remote = remote  # a shared cache behind this one: read on a local miss, written back

    def _entry_path(self, key: str) -> Path:
        return self.root / entry_name(key)

    def _object_path(self, sha: str) -> Path:
        return self.root / object_name(sha)

    def store(self, key: str, files: Mapping[str, Path | bytes], inputs: Mapping[str, Path] | None = None,
              family: str | None = None) -> None:
        """Record ``files`` (name -> produced file, or its bytes) under ``key``; large ones as parts, of
        which those found in ``inputs`` (role -> the task's input file) are recorded as references to them
        (the inputs are read for that only when an output has parts). ``family``: the family whose stage
        wrote them (only its program files are looked for: ``file_parts.regions``)."""
        shared: dict[str, tuple[str, int]] | None = None
        listing = {}
        for name, source in sorted(files.items()):
            path = source if isinstance(source, Path) else None
            size = path.stat().st_size if path is not None else len(source)
            data = source if isinstance(source, bytes) else path.read_bytes() if size >= file_parts.MIN_FILE else None
            found = file_parts.regions(path or name, data, family) if data is not None else []
            if not found:
                sha = file_sha256(path) if data is None else hashlib.sha256(data).hexdigest()
                self._put_object(sha, path, data)
                listing[name] = {"sha256": sha, "size": size}
            else:
                if shared is None:
                    shared = self._input_parts(inputs or {})
                listing[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                                 "parts": [self._part(data[a:b], shared) for a, b in file_parts.cover(found, len(data))]}
        entry = {"format": ENTRY_FORMAT, "key": key, "files": listing}
        write_json_atomic(self._entry_path(key), entry, durable=False)  # an unreadable entry is a miss
        if self.remote is not None:
            self.remote.publish(key, entry, {sha: self._object_path(sha) for sha in objects_in(entry)})

    def _put_object(self, sha: str, path: Path | None, data: bytes | None = None) -> None:
        """Write an object unless one of that size is there: its bytes are checked on every restore (a
        damaged one is dropped then, never served), and here too when it is about to go to a remote store."""
        obj = self._object_path(sha)
        size = len(data) if data is not None else _size(path) if path is not None else -1
        if _size(obj) == size and obj.is_file() and (self.remote is None or file_sha256(obj) == sha):
            return
        if data is not None:
            write_bytes_atomic(obj, data, durable=False)  # not fsync'ed: every restore checks the bytes
        elif path is not None:
            copy_atomic(path, obj, durable=False)

    def _part(self, chunk: bytes, shared: Mapping[str, tuple[str, int]]) -> dict[str, Any]:
        sha = hashlib.sha256(chunk).hexdigest()
        if sha in shared:
            role, offset = shared[sha]
            return {"sha256": sha, "size": len(chunk), "input": role, "offset": offset}
        if len(chunk) <= INLINE_PART:
            return {"sha256": sha, "size": len(chunk), "data": chunk.hex()}
        self._put_object(sha, None, chunk)
        return {"sha256": sha, "size": len(chunk)}

    @staticmethod
    def _input_parts(inputs: Mapping[str, Path]) -> dict[str, tuple[str, int]]:
        """SHA-256 of each shareable region of the inputs -> (role, offset)."""
        shared: dict[str, tuple[str, int]] = {}
        for role, path in sorted(inputs.items()):
            try:
                if path.stat().st_size < file_parts.MIN_FILE:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            for a, b in file_parts.regions(path, data):
                shared.setdefault(hashlib.sha256(data[a:b]).hexdigest(), (role, a))
        return shared

    def listing(self, key: str) -> dict[str, str] | None:
        """The SHA-256 of each file of ``key`` if its entry and objects are present (sizes checked, not
        contents: a cheap look for ``status``; a restore still verifies every byte)."""
        try:
            entry = json.loads(self._entry_path(key).read_text(encoding="utf-8"))
            for sha, size in objects_in(entry).items():
                if self._object_path(sha).stat().st_size != size:
                    return None
            return {name: meta["sha256"] for name, meta in entry["files"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def lookup(self, key: str, inputs: Mapping[str, Path] | None = None) -> dict[str, CachedFile] | None:
        """The verified files of ``key`` by name, or None on a miss or a damaged entry; a local miss is
        fetched from the remote store, if there is one. ``inputs`` (role -> file) are the task's inputs,
        needed for files with parts taken from them."""
        found = self.lookup_local(key, inputs)
        if found is None and self.remote is not None and self.remote.fetch(key, self):
            found = self.lookup_local(key, inputs)
        return found

    def lookup_local(self, key: str, inputs: Mapping[str, Path] | None = None) -> dict[str, CachedFile] | None:
        """As ``lookup``, in this cache only. Without ``inputs``, parts taken from inputs are not checked
        (nor can such files be read)."""
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
            try:
                found[name] = self._verified(meta, inputs)
            except _Damaged as damaged:
                log.warning("cache object for %s of entry %s is missing or altered; rebuilding", name, key[:12])
                self._drop(entry_path)
                if damaged.object is not None:
                    self._drop(damaged.object)
                return None
            except _InputMoved:
                log.debug("cache entry %s: a part taken from an input no longer matches it", key[:12])
                return None
        _touch(entry_path)  # last use, for `cache gc`'s least-recently-used order
        return found

    def _verified(self, meta: dict[str, Any], inputs: Mapping[str, Path] | None) -> CachedFile:
        """One file record, every byte checked (raises _Damaged, _InputMoved)."""
        try:
            sha, size, parts = str(meta["sha256"]), int(meta["size"]), meta.get("parts")
        except (KeyError, TypeError, ValueError):
            raise _Damaged(None) from None
        if parts is None:
            obj = self._object_path(sha)
            if not _intact(obj, sha, size):
                raise _Damaged(obj)
            return CachedFile(sha, size, object=obj)
        sources: list[tuple[Path | bytes, int, int]] = []
        try:
            for part in parts:
                part_sha, length = str(part["sha256"]), int(part["size"])
                if "data" in part:
                    data = bytes.fromhex(part["data"])
                    if len(data) != length or hashlib.sha256(data).hexdigest() != part_sha:
                        raise _Damaged(None)
                    sources.append((data, 0, length))
                elif "input" in part:
                    path = (inputs or {}).get(part["input"])
                    if inputs is not None and (path is None or not _range_intact(path, int(part["offset"]),
                                                                                  length, part_sha)):
                        raise _InputMoved()
                    sources.append((path or Path(), int(part["offset"]), length))
                else:
                    obj = self._object_path(part_sha)
                    if not _intact(obj, part_sha, length):
                        raise _Damaged(obj)
                    sources.append((obj, 0, length))
        except (KeyError, TypeError, ValueError):
            raise _Damaged(None) from None
        if sum(length for _, _, length in sources) != size:
            raise _Damaged(None)
        return CachedFile(sha, size, parts=tuple(sources))

    def restore(self, key: str, targets: Mapping[str, Path], inputs: Mapping[str, Path] | None = None) -> bool:
        """Copy the entry's files to ``targets`` (name -> destination); False on a miss.

        Targets the entry does not hold are removed, so an optional output of an older build cannot
        linger beside a restored set.
        """
        files = self.lookup(key, inputs)
        if files is None:
            return False
        if not set(files) <= set(targets):
            log.warning("cache entry %s holds unexpected files; rebuilding", key[:12])
            return False
        for name, destination in targets.items():
            if name in files:
                files[name].copy_to(destination)
            elif destination.exists():
                destination.unlink()
        return True

    def usage(self) -> CacheUsage:
        """Entries, objects and bytes on disk, and the logical size of every entry's files."""
        entries = list(self._entries())
        objects = [p for p in (self.root / "objects").glob("*/*") if p.is_file()]
        size = sum(_size(p) for p in entries) + sum(_size(p) for p in objects)
        logical = 0
        for entry in entries:
            try:
                logical += sum(int(m["size"]) for m in json.loads(entry.read_text(encoding="utf-8"))["files"].values())
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
        return CacheUsage(len(entries), len(objects), size, logical)

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
            return {self._object_path(str(sha)) for sha in objects_in(json.loads(entry.read_text(encoding="utf-8")))}
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


class _Damaged(Exception):
    def __init__(self, obj: Path | None) -> None:
        super().__init__()
        self.object = obj


class _InputMoved(Exception):
    """A part taken from an input does not match it (the input is not the one the key was made with)."""


def _intact(obj: Path, sha: str, size: int) -> bool:
    try:
        return obj.stat().st_size == size and file_sha256(obj) == sha
    except OSError:
        return False


def _range_intact(path: Path, offset: int, length: int, sha: str) -> bool:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read(length)
    except OSError:
        return False
    return len(data) == length and hashlib.sha256(data).hexdigest() == sha
