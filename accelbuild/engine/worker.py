"""Runs one job: restore it from the artifact cache, or run its stage and publish and cache the result.

This is the body of every doit action, executed in a worker process with ``-j N``. A stage writes into
a private staging folder; only a stage that finished has its files cached and moved into place (each
with an atomic rename), so a killed or failed stage never leaves a partial artifact behind. A folder
output (a name ending in ``/``, e.g. the closed loop's ``splits/``) is cached file by file and replaced
as a whole.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from doit.exceptions import TaskFailed

from accelbuild import families
from accelbuild.engine import executor as executors
from accelbuild.engine import read_guard, task_key
from accelbuild.engine.cache import ArtifactCache
from accelbuild.engine.code_identity import code_digest
from accelbuild.engine.plan import Job
from accelbuild.engine.remote_cache import RemoteSpec, open_store
from accelbuild.errors import AccelbuildError, InputFileError, StageError, UserError, render_user_error
from accelbuild.stages.context import StageContext
from accelbuild.util.files import file_sha256

log = logging.getLogger(__name__)

STAGING_PREFIX = ".accelbuild-staging-"


class UserFailure(TaskFailed):
    """A stage stopped on the user's input (exit 2); ``message`` is the full user-facing text."""


class StageFailure(TaskFailed):
    """A stage could not do its job on valid input (exit 1); ``message`` says why."""


class InternalFailure(TaskFailed):
    """A stage crashed (exit 1); the traceback is kept for the log."""


def execute(job: Job, cache_dir: str, force: bool = False, remote: RemoteSpec | None = None,
            executor: str | None = None) -> dict[str, Any] | TaskFailed:
    """doit action: returns the values doit keeps for this task, or a failure. ``remote`` is the shared
    cache behind the local one; ``executor`` the address of the (open) executor that runs the stage."""
    started = time.monotonic()
    try:
        inputs = input_record(job.inputs)
        if inputs is None:
            raise StageError(f"an input is missing: {', '.join(_missing(job))}")
        key = task_key.job_key(job, digests_of(inputs))
        cache = ArtifactCache(Path(cache_dir), open_store(remote) if remote is not None else None)
        status = _build(job, key, cache, force, executors.get(executor) if executor else None)
    except UserError as exc:
        return UserFailure(render_user_error(exc))
    except AccelbuildError as exc:  # a stage that cannot do its job on valid input: say why, no traceback
        return StageFailure(f"{job.name}: {exc}")
    except Exception as exc:  # a bug in a stage: report it, keep the run going with --keep-going
        failure = InternalFailure(f"{job.name}: internal error: {exc.__class__.__name__}: {exc}")
        failure.traceback = getattr(exc, "remote_traceback", None) or traceback.format_exception(exc)
        return failure
    return {
        "status": status,
        "seconds": round(time.monotonic() - started, 3),
        "params": job.params_json,
        "code": job.code,
        "key": key,
        "inputs": inputs,
        "outputs": output_record(job.outputs.values()),
    }


def _build(job: Job, key: str, cache: ArtifactCache, force: bool,
           executor: executors.Executor | None = None) -> str:
    """Restore the outputs of task key ``key`` or run the stage into a staging folder, then move its files
    into place.

    A restore goes through the staging folder too, so a kill mid-copy leaves nothing in the build dir
    but a staging folder, which the next build that touches this folder sweeps (restored or not).
    """
    folder = next(iter(job.outputs.values())).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # the output folder went bad after validation (a file put in its way, permissions)
        raise InputFileError(folder, f"cannot create the output folder: {exc.strerror or exc}") from None
    sweep_stale_staging(folder)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=folder))
    try:
        staged = {name: staging / name.rstrip("/").replace("/", "_") for name in job.outputs}
        if not force and _restore(cache, key, staged, job.inputs):
            status = "cached"
        else:
            _run_stage(job, staged, None if force else cache, executor)
            status = "ran"
        produced = {name: path for name, path in staged.items() if path.exists()}
        missing = [n for n in job.outputs if n not in produced and n not in job.optional_outputs]
        if missing:
            raise RuntimeError(f"stage {job.stage} did not write {', '.join(missing)}")
        if status == "ran":
            cache.store(key, _cache_files(produced), job.inputs, families.family_of_module(job.module))
        for name, final in job.outputs.items():
            _publish(produced.get(name), final, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return status


def job_key(job: Job) -> str:
    """The job's task key (hashes its input files, which must exist)."""
    return task_key.job_key(job, _input_digests(job))


def _run_stage(job: Job, staged: dict[str, Path], cache: ArtifactCache | None,
               executor: executors.Executor | None) -> None:
    """Run the stage here, or on the executor; a stage with parallel work of its own (``Job.fans_out``)
    runs here and sends that work to the executor; a benchmark measured on a device runs there."""
    fan_out: Any = executor
    if job.device is not None:
        from accelbuild.engine import devices

        if not job.fans_out:
            devices.run_job(job, staged)
            return
        fan_out = devices.DeviceFanOut(*job.device)  # the stage's measurements go to the device
    elif executor is not None and not job.fans_out:
        executor.run_job(job, staged)
        return
    module = importlib.import_module(job.module)
    ctx = StageContext(job.params, job.inputs, staged, job.locate, cache, job.jobs, fan_out, code_digest)
    own = {p.parent for p in staged.values()} | ({cache.root} if cache is not None else set())
    with read_guard.guarding(job, job.inputs, own):
        module.run(ctx)


def _cache_files(produced: dict[str, Path]) -> dict[str, Path]:
    """Produced outputs as cache file names: a folder output contributes each of its files."""
    files = {}
    for name, path in produced.items():
        if name.endswith("/"):
            files.update({name + p.relative_to(path).as_posix(): p for p in sorted(path.rglob("*")) if p.is_file()})
        else:
            files[name] = path
    return files


def _restore(cache: ArtifactCache, key: str, staged: dict[str, Path], inputs: dict[str, Path]) -> bool:
    """Copy a cache entry into the staging paths (folder outputs file by file); False on a miss."""
    files = cache.lookup(key, inputs)
    if files is None:
        return False
    folders = [name for name in staged if name.endswith("/")]
    for name, cached in files.items():
        folder = next((f for f in folders if name.startswith(f)), None)
        if folder is not None:
            cached.copy_to(staged[folder] / name[len(folder):])
        elif name in staged:
            cached.copy_to(staged[name])
        else:
            log.warning("cache entry %s holds unexpected files; rebuilding", key[:12])
            return False
    return True


def _publish(produced: Path | None, final: Path, staging: Path) -> None:
    """Move a produced output into place (a folder replaces the old folder whole), or remove a stale one."""
    if produced is not None and produced.is_dir():
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():  # aside first: os.replace cannot replace a non-empty folder
            os.replace(final, staging / f".old-{final.name}")
        os.replace(produced, final)
    elif produced is not None:
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(produced, final)
    elif final.is_dir():
        shutil.rmtree(final, ignore_errors=True)
    else:  # missing_ok: a run on another state dir may be publishing the same folder
        final.unlink(missing_ok=True)


def output_record(paths: Iterable[Path]) -> dict[str, list]:
    """``[size, mtime_ns, sha256]`` of each output that exists, by path relative to the current folder
    (the project root while doit runs), as the run leaves them.

    Kept in doit's values for the task, so the next run can tell an output edited by hand
    (``edited_outputs``) although doit itself only checks that targets exist.
    """
    record = {}
    for path in _files_of(paths):
        try:
            st = os.stat(path)
        except FileNotFoundError:  # an optional output this run did not write
            continue
        record[os.path.relpath(path)] = [st.st_size, st.st_mtime_ns, file_sha256(path)]
    return record


def _files_of(paths: Iterable[Path | str]) -> list[Path]:
    """The paths, with each folder replaced by the files in it."""
    files = []
    for path in map(Path, paths):
        if path.is_dir():
            files.extend(p for p in sorted(path.rglob("*")) if p.is_file())
        else:
            files.append(path)
    return files


def edited_outputs(paths: Iterable[str], record: Any) -> list[str] | None:
    """Outputs that are gone or whose bytes differ from ``record``; None if there is no record.

    Cheap on a no-op: an output whose size and mtime are as recorded is taken as is (one ``stat``);
    only one whose mtime moved is hashed, so a mere touch is not an edit.
    """
    if not isinstance(record, dict):
        return None
    edited = []
    paths = list(paths)
    for folder in [p for p in paths if p.endswith("/")]:  # a file added to an output folder is an edit
        root = folder.rstrip("/")
        recorded_here = [p for p in record if p.startswith(root + os.sep)]
        edited.extend(str(p) for p in _files_of([root]) if str(p) not in record)
        paths.extend(recorded_here)
    for path in paths:
        if path.endswith("/"):
            continue
        recorded = record.get(path)
        if recorded is None:  # not written by the last run (an optional output)
            continue
        try:
            size, mtime_ns, sha = recorded
            st = os.stat(path)
            same = (st.st_size, st.st_mtime_ns) == (size, mtime_ns) or (
                st.st_size == size and file_sha256(Path(path)) == sha)
        except (OSError, TypeError, ValueError):  # gone, or a record this version cannot read
            same = False
        if not same:
            edited.append(path)
    return edited


def sweep_stale_staging(folder: Path) -> None:
    """Remove staging folders left by killed builds (their process no longer exists)."""
    for entry in folder.glob(f"{STAGING_PREFIX}*"):
        pid_text = entry.name[len(STAGING_PREFIX):].split("-", 1)[0]
        if pid_text.isdigit() and not _process_alive(int(pid_text)):
            shutil.rmtree(entry, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    """True if ``pid`` runs; a zombie (killed, not yet reaped by a slow init) never writes again."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def _input_digests(job: Job) -> dict[str, str]:
    digests = input_digests(job, file_sha256)
    assert digests is not None
    return digests


def input_digests(job: Job, digest: Callable[[Path], str | None]) -> dict[str, str] | None:
    """SHA-256 of every input by role (``Job.inputs``, the list doit's ``file_dep`` and ``shipping.pack``
    use too); None when ``digest`` knows one not."""
    digests = {}
    for role, path in job.inputs.items():
        value = digest(path)
        if value is None:
            return None
        digests[role] = value
    return digests


def input_record(inputs: Mapping[str, Path | str], recorded: Any = None) -> dict[str, list] | None:
    """``[path, size, mtime_ns, inode, sha256]`` of each input by role (path relative to the current folder,
    the project root while doit runs); None when one is missing.

    An input whose path and stat are as in ``recorded`` (the record of the task's last run) keeps its
    recorded SHA-256 without being read, as git and doit do; any other is hashed.
    """
    previous = recorded if isinstance(recorded, dict) else {}
    record: dict[str, list] = {}
    for role, path in sorted(inputs.items()):
        name = os.path.relpath(path)
        try:
            st = os.stat(name)
            stat = [name, st.st_size, st.st_mtime_ns, st.st_ino]
            before = previous.get(role)
            same = isinstance(before, list) and len(before) == 5 and before[:4] == stat
            record[role] = [*stat, before[4] if same else file_sha256(Path(name))]
        except OSError:
            return None
    return record


def digests_of(record: Mapping[str, list]) -> dict[str, str]:
    """The SHA-256 of each input by role, from an ``input_record``."""
    return {role: entry[4] for role, entry in record.items()}


def _missing(job: Job) -> list[str]:
    return [f"{role} ({os.path.relpath(p)})" for role, p in sorted(job.inputs.items()) if not os.path.isfile(p)]
