"""Runs one job: restore it from the artifact cache, or run its stage and publish and cache the result.

This is the body of every doit action, executed in a worker process with ``-j N``. A stage writes into
a private staging folder; only a stage that finished has its files cached and moved into place (each
with an atomic rename), so a killed or failed stage never leaves a partial artifact behind.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doit.exceptions import TaskFailed

from accelbuild import __version__
from accelbuild.build.cache import ArtifactCache, cache_key
from accelbuild.build.plan import Job
from accelbuild.errors import UserError, render_user_error
from accelbuild.util.files import file_sha256

log = logging.getLogger(__name__)

STAGING_PREFIX = ".accelbuild-staging-"


class UserFailure(TaskFailed):
    """A stage stopped on the user's input (exit 2); ``message`` is the full user-facing text."""


class InternalFailure(TaskFailed):
    """A stage crashed (exit 1); the traceback is kept for the log."""


@dataclass(frozen=True)
class StageContext:
    """What a stage's ``run`` gets: the specs, its input files, and the paths it must write."""

    pipeline: Any
    model: Any
    inputs: dict[str, Path]
    outputs: dict[str, Path]
    params: dict[str, Any]
    cache: ArtifactCache | None = None  # for stages that cache finer-grained units of their own


def execute(job: Job, cache_dir: str, force: bool = False) -> dict[str, Any] | TaskFailed:
    """doit action: returns the values doit keeps for this task, or a failure."""
    started = time.monotonic()
    try:
        status = _build(job, ArtifactCache(Path(cache_dir)), force)
    except UserError as exc:
        return UserFailure(render_user_error(exc))
    except Exception as exc:  # a bug in a stage: report it, keep the run going with --keep-going
        failure = InternalFailure(f"{job.name}: internal error: {exc.__class__.__name__}: {exc}")
        failure.traceback = traceback.format_exception(exc)
        return failure
    return {
        "status": status,
        "seconds": round(time.monotonic() - started, 3),
        "params": job.params,
    }


def _build(job: Job, cache: ArtifactCache, force: bool) -> str:
    key = cache_key(job.stage, job.param_digest, _input_digests(job), __version__)
    if not force and cache.restore(key, job.outputs):
        return "cached"
    folder = next(iter(job.outputs.values())).parent
    folder.mkdir(parents=True, exist_ok=True)
    sweep_stale_staging(folder)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=folder))
    try:
        staged = {name: staging / name.replace("/", "_") for name in job.outputs}
        module = importlib.import_module(_stage_module(job.stage))
        module.run(StageContext(job.pipeline, job.model, job.inputs, staged, job.params, None if force else cache))
        produced = {name: path for name, path in staged.items() if path.exists()}
        missing = [n for n in job.outputs if n not in produced and n not in job.optional_outputs]
        if missing:
            raise RuntimeError(f"stage {job.stage} did not write {', '.join(missing)}")
        cache.store(key, produced)
        for name, final in job.outputs.items():
            if name in produced:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(produced[name], final)
            elif final.exists():
                final.unlink()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return "ran"


def sweep_stale_staging(folder: Path) -> None:
    """Remove staging folders left by killed builds (their process no longer exists)."""
    for entry in folder.glob(f"{STAGING_PREFIX}*"):
        pid_text = entry.name[len(STAGING_PREFIX):].split("-", 1)[0]
        if pid_text.isdigit() and not _process_alive(int(pid_text)):
            shutil.rmtree(entry, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _input_digests(job: Job) -> dict[str, str]:
    digests = {role: file_sha256(path) for role, path in job.inputs.items()}
    module = importlib.import_module(_stage_module(job.stage))
    extra = getattr(module, "extra_inputs", None)
    if extra is not None:  # files a stage finds only by reading its inputs (ONNX external data)
        for role, path in extra(job.inputs).items():
            digests[role] = file_sha256(path)
    return digests


def _stage_module(stage: str) -> str:
    from accelbuild.build.stages import STAGES_BY_NAME

    return STAGES_BY_NAME[stage].module
