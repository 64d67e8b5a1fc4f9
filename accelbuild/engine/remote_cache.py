"""A shared artifact cache at an fsspec URL (``s3://bucket/prefix``, ``gs://…``, ``file:///…``), behind the
local ``ArtifactCache``.

The remote keeps the local layout (``objects/ab/<sha256>``, ``entries/12/<key>.json``, both named by
``engine/task_key.py``: an entry by its task key, the same key as locally). Reads go local
first: a local miss fetches the entry, downloads each object it names into the local cache, verifying its
SHA-256 and size, and records the entry locally last. Writes go back after a task succeeds: each object
is uploaded once (skipped when the remote already holds one of that size), then the entry, so a reader
never sees an entry whose objects are not all there. Objects are named by their content and entries by
their key, so concurrent writers of the same entry write the same bytes; an object store's PUT is
atomic, and other filesystems get a temp name and a rename. A store may still fail one of two PUTs
of the same name at once: a failed write whose name the remote then holds at the right size is done,
any other is retried. An object whose bytes do not match its name is dropped from the remote and the
task rebuilt (its write-back uploads a good copy).

The remote never fails a build: any error reaching it (network, credentials, a missing bucket) logs one
warning and the run carries on with the local cache only. Credentials and endpoints come from where
fsspec and the storage library look for them (for S3: the AWS environment variables, ``~/.aws``,
instance roles; ``AWS_ENDPOINT_URL`` or ``FSSPEC_S3_ENDPOINT_URL`` for S3-compatible servers), never
from a pipeline file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbuild.engine.cache import ENTRY_FORMAT, objects_in
from accelbuild.engine.task_key import entry_name, object_name
from accelbuild.errors import AccelbuildError, UserError
from accelbuild.util.files import atomic_writer

if TYPE_CHECKING:
    from accelbuild.engine.cache import ArtifactCache

log = logging.getLogger(__name__)

ENV = "ACCELBUILD_REMOTE_CACHE"
REMOTE_DOWN_MARKER = "remote-cache-down"  # in the state dir, for the length of a run
_CHUNK = 1 << 20
_WRITE_ATTEMPTS = 3  # a write that fails this often means the remote is down for this run
# object stores whose PUT makes the whole object visible at once (no temp name + rename needed)
_ATOMIC_PUT = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "memory"})
# the package each protocol needs, named in the error when it is missing
_EXTRAS = {"s3": "s3fs (pip install 'accelbuild[remote]')", "s3a": "s3fs (pip install 'accelbuild[remote]')",
           "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs", "abfs": "adlfs", "abfss": "adlfs"}


class RemoteCacheError(AccelbuildError):
    """``cache push`` / ``cache pull`` could not reach the remote (exit 1)."""


@dataclass(frozen=True)
class RemoteSpec:
    """Where the remote cache is; picklable, so ``-j N`` worker processes open their own connection.

    ``down_marker`` is a file in the state dir: the first process of a run that finds the remote
    unreachable creates it (and is the one that warns); the others see it and stop trying.
    """

    url: str
    down_marker: str | None = None


def parse_url(text: str, source: str = "--remote-cache") -> str:
    """The URL, checked: a known fsspec protocol whose package is installed and a location; else a
    ``UserError`` (exit 2) naming ``source`` (the option or variable it came from). A plain path is a local
    (or mounted shared) folder."""
    import_fsspec(source)
    import fsspec

    text = text.strip()
    if not text:
        raise UserError(f"{source}: empty URL")
    protocol, _, rest = text.partition("://") if "://" in text else ("file", "", text)
    protocol = protocol.lower()
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise UserError(f"{source} {text}: unknown storage protocol {protocol!r} "
                        f"(use s3://bucket/prefix, gs://…, file:///path or another fsspec URL)") from None
    except ImportError:
        need = _EXTRAS.get(protocol, f"the fsspec implementation of {protocol}")
        raise UserError(f"{source} {text}: the remote cache needs {need}") from None
    if not rest.strip("/"):
        raise UserError(f"{source} {text}: the URL names no bucket or folder")
    if protocol in ("file", "local"):
        return "file://" + str(Path(rest).expanduser().absolute())
    return f"{protocol}://{rest.rstrip('/')}"


def import_fsspec(source: str = "--remote-cache") -> None:
    try:
        import fsspec  # noqa: F401
    except ImportError:
        raise UserError(f"{source}: the remote cache needs fsspec: pip install 'accelbuild[remote]'") from None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


class RemoteStore:
    """The remote side of the cache: entries and objects at ``spec.url``. Every method swallows errors
    reaching the remote (after the first, it stops trying) except ``push_all`` / ``pull_all``."""

    def __init__(self, spec: RemoteSpec) -> None:
        from fsspec.core import url_to_fs

        self.spec = spec
        self.url = spec.url
        self.down = False
        self.fs: Any = None
        self.root, self.atomic_put = "", False
        try:
            self.fs, self.root = url_to_fs(spec.url, **_storage_defaults(spec.url))
        except Exception as exc:  # a storage library that cannot even start: build without it
            self._failed("opening it", exc)
            return
        protocol = self.fs.protocol
        protocol = protocol[0] if isinstance(protocol, (tuple, list)) else protocol
        self.atomic_put = protocol in _ATOMIC_PUT

    # layout
    def _entry(self, key: str) -> str:
        return f"{self.root}/{entry_name(key)}"

    def _object(self, sha: str) -> str:
        return f"{self.root}/{object_name(sha)}"

    # health
    def available(self) -> bool:
        if self.down:
            return False
        if self.spec.down_marker and os.path.exists(self.spec.down_marker):
            self.down = True  # another process of this run found it unreachable (and warned)
        return not self.down

    def _failed(self, doing: str, exc: BaseException) -> None:
        self.down = True
        if self._claim_warning():
            log.warning("remote cache %s is unreachable (%s while %s); building with the local cache only",
                        self.url, _short(exc), doing)
        else:
            log.debug("remote cache %s: %s while %s", self.url, _short(exc), doing)

    def _claim_warning(self) -> bool:
        """True for the first process of the run to find the remote down (it warns, the rest stay quiet)."""
        if not self.spec.down_marker:
            return True
        try:
            os.close(os.open(self.spec.down_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return False
        except OSError:
            return True
        return True

    def probe(self) -> bool:
        """Reach the remote once (at the start of a run); False (after the warning) if it cannot be."""
        if not self.available():
            return False
        try:
            self.fs.exists(self.root)
        except Exception as exc:  # any failure to reach the store: build without it
            self._failed("connecting", exc)
            return False
        return True

    def has_entry(self, key: str) -> bool:
        if not self.available():
            return False
        try:
            return bool(self.fs.exists(self._entry(key)))
        except Exception as exc:
            self._failed("looking up an entry", exc)
            return False

    # read through
    def fetch(self, key: str, local: ArtifactCache) -> bool:
        """Copy the entry of ``key`` and its objects into ``local`` (each object verified); False on a
        miss, a damaged remote entry or object (dropped), or an unreachable remote."""
        if not self.available():
            return False
        try:
            return self._fetch(key, local)
        except Exception as exc:
            self._failed(f"fetching entry {key[:12]}", exc)
            return False

    def _fetch(self, key: str, local: ArtifactCache) -> bool:
        try:
            raw = self.fs.cat_file(self._entry(key))
        except FileNotFoundError:
            return False
        entry = self._parse_entry(key, raw)
        if entry is None:
            return False
        for sha, size in sorted(objects_in(entry).items()):
            target = local.object_path(sha)
            if target.is_file() and target.stat().st_size == size:
                continue  # verified (with everything else) by the local lookup that follows
            if not self._download(sha, size, target, f"an object of entry {key[:12]}"):
                return False
        local.add_entry(key, entry)  # last: the local entry names only objects already in place
        log.debug("remote cache: fetched entry %s", key[:12])
        return True

    def _parse_entry(self, key: str, raw: bytes) -> dict[str, Any] | None:
        try:
            entry = json.loads(raw)
            files = entry["files"]
            if entry.get("key") != key or entry.get("format") != ENTRY_FORMAT or not isinstance(files, dict):
                raise ValueError("it does not describe this key")
            for meta in [*files.values(), *(p for m in files.values() for p in m.get("parts", ()))]:
                if not (isinstance(meta["sha256"], str) and len(meta["sha256"]) == 64
                        and isinstance(meta["size"], int)):
                    raise ValueError("a file record is malformed")
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("remote cache entry %s is unreadable (%s); dropped it, rebuilding", key[:12], exc)
            self._remove(self._entry(key))
            return None
        return entry

    def _download(self, sha: str, size: int, target: Path, what: str) -> bool:
        """Stream one object into ``target`` (atomically), hashing as it comes; a mismatch drops the
        remote object and leaves nothing locally."""
        digest, received = hashlib.sha256(), 0
        try:
            with self.fs.open(self._object(sha), "rb") as src, atomic_writer(target) as dst:
                for block in iter(lambda: src.read(_CHUNK), b""):
                    digest.update(block)
                    received += len(block)
                    dst.write(block)
                if received != size or digest.hexdigest() != sha:
                    raise _Altered()
        except FileNotFoundError:
            log.debug("remote cache: object for %s is missing", what)
            return False
        except _Altered:
            log.warning("remote cache object for %s does not match its SHA-256 (%d bytes, expected %d); "
                        "dropped it, rebuilding", what, received, size)
            self._remove(self._object(sha))
            return False
        return True

    def _remove(self, path: str) -> None:
        with contextlib.suppress(Exception):
            self.fs.rm_file(path)

    # write back
    def publish(self, key: str, entry: Mapping[str, Any], objects: Mapping[str, Path]) -> None:
        """Upload ``objects`` (sha -> local file) that the remote lacks, then the entry."""
        if not self.available():
            return
        try:
            self._publish(key, entry, objects)
        except Exception as exc:
            self._failed(f"writing back entry {key[:12]}", exc)

    def _publish(self, key: str, entry: Mapping[str, Any], objects: Mapping[str, Path]) -> int:
        uploaded = 0
        for sha, path in sorted(objects.items()):
            size = path.stat().st_size
            if self._remote_size(self._object(sha)) != size:
                self._write_once(lambda sha=sha, path=path: self._put(path, self._object(sha)),
                                 self._object(sha), size)
                uploaded += size
        if not self.fs.exists(self._entry(key)):
            data = (json.dumps(entry, indent=2, sort_keys=True) + "\n").encode("utf-8")
            self._write_once(lambda: self._put_bytes(data, self._entry(key)), self._entry(key), len(data))
        log.debug("remote cache: wrote back entry %s (%d bytes uploaded)", key[:12], uploaded)
        return uploaded

    def _write_once(self, write: Callable[[], None], remote: str, size: int) -> None:
        """Run ``write`` (an upload of ``size`` bytes to ``remote``), retrying a failure.

        Objects are named by their content and entries by their key, so when two builds write the same
        name at once, whichever lands is right; a store may still fail one of the two requests (seen as
        HTTP 500 from S3-compatible servers). A failed write whose name the remote now holds at the right
        size has done its job; any other failure is retried, and the last one raised.
        """
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                write()
                return
            except Exception as exc:
                with contextlib.suppress(Exception):
                    if self._remote_size(remote) == size:
                        log.debug("remote cache: %s written by another build (%s)", remote, _short(exc))
                        return
                if attempt + 1 == _WRITE_ATTEMPTS:
                    raise
                log.debug("remote cache: retrying %s after %s", remote, _short(exc))
                time.sleep(0.2 * (attempt + 1))

    def _remote_size(self, path: str) -> int | None:
        try:
            return int(self.fs.info(path)["size"])
        except FileNotFoundError:
            return None

    def _put(self, local: Path, remote: str) -> None:
        if self.atomic_put:
            self.fs.put_file(str(local), remote)
            return
        temp = f"{remote}.tmp-{uuid.uuid4().hex}"
        self.fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
        try:
            self.fs.put_file(str(local), temp)
            self.fs.mv(temp, remote)
        finally:
            self._remove(temp)

    def _put_bytes(self, data: bytes, remote: str) -> None:
        if self.atomic_put:
            self.fs.pipe_file(remote, data)
            return
        temp = f"{remote}.tmp-{uuid.uuid4().hex}"
        self.fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
        try:
            self.fs.pipe_file(temp, data)
            self.fs.mv(temp, remote)
        finally:
            self._remove(temp)

    # explicit seeding: errors are errors here
    def push_all(self, local: ArtifactCache) -> tuple[int, int]:
        """Upload every intact local entry the remote lacks: (entries, bytes uploaded)."""
        self._usable_for_seeding()
        entries = uploaded = 0
        try:
            for key in local.keys():
                entry = local.entry(key)
                if entry is None:
                    continue
                objects = {sha: local.object_path(sha) for sha in objects_in(entry)}
                uploaded += self._publish(key, entry, objects)
                entries += 1
        except Exception as exc:
            raise RemoteCacheError(f"remote cache {self.url}: {_short(exc)}") from exc
        return entries, uploaded

    def pull_all(self, local: ArtifactCache) -> tuple[int, int]:
        """Fetch every remote entry the local cache lacks: (entries fetched, entries skipped as damaged)."""
        self._usable_for_seeding()
        fetched = damaged = 0
        try:
            paths = self.fs.find(f"{self.root}/entries") if self.fs.exists(f"{self.root}/entries") else []
            for path in sorted(paths):
                key = path.rsplit("/", 1)[-1].removesuffix(".json")
                if len(key) != 64 or local.lookup_local(key) is not None:
                    continue
                if self._fetch(key, local) and local.lookup_local(key) is not None:
                    fetched += 1
                else:
                    damaged += 1
        except Exception as exc:
            raise RemoteCacheError(f"remote cache {self.url}: {_short(exc)}") from exc
        return fetched, damaged


    def _usable_for_seeding(self) -> None:
        if self.fs is None:
            raise RemoteCacheError(f"remote cache {self.url}: cannot be opened")


class _Altered(Exception):
    """A downloaded object does not match its name."""


def _storage_defaults(url: str) -> dict[str, Any]:
    """Storage options we add where the user's fsspec configuration says nothing: for S3, a short
    connect timeout, so an unreachable endpoint degrades to a local build quickly."""
    import fsspec.config

    if not url.startswith(("s3://", "s3a://")):
        return {}
    configured = fsspec.config.conf.get("s3", {})
    if "config_kwargs" in configured:
        return {}
    return {"config_kwargs": {"connect_timeout": 10}}


_STORES: dict[tuple[int, RemoteSpec], RemoteStore] = {}


def open_store(spec: RemoteSpec) -> RemoteStore:
    """This process's store for ``spec`` (one per process: it remembers that the remote is down)."""
    key = (os.getpid(), spec)
    store = _STORES.get(key)
    if store is None:
        store = _STORES[key] = RemoteStore(spec)
    return store
