"""What several commands share: run options from the arguments, loading pipelines, resolving devices."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from accelbuild.errors import InputFileError

if TYPE_CHECKING:
    from accelbuild.config.spec import PipelineSpec
    from accelbuild.engine.doit_backend import RunOptions


def options(args: argparse.Namespace) -> RunOptions:
    """Where state and cache live and how to run (imported lazily with the build machinery)."""
    from accelbuild.engine.doit_backend import RunOptions
    from accelbuild.engine.state import default_cache_dir, project_root

    root = project_root()
    state = state_dir(args, root)
    cache_dir = args.cache_dir or default_cache_dir(state)
    return RunOptions(
        root=root,
        state_dir=state.absolute(),
        cache_dir=cache_dir.absolute(),
        jobs=getattr(args, "jobs", 1),
        force=getattr(args, "force", False),
        keep_going=getattr(args, "keep_going", False),
        remote_cache=remote_cache_url(args),
        executor=_executor_address(args),
    )


def _option_or_env(args: argparse.Namespace, attribute: str, option: str, variable: str) -> tuple[str, str] | None:
    """(value, where it came from): the option, else the environment variable, for commands that take it."""
    if not hasattr(args, attribute):
        return None
    text, source = getattr(args, attribute), option
    if text is None:
        text, source = os.environ.get(variable), variable
    return (text, source) if text else None


def remote_cache_url(args: argparse.Namespace) -> str | None:
    """``--remote-cache``, else ``$ACCELBUILD_REMOTE_CACHE``."""
    given = _option_or_env(args, "remote_cache", "--remote-cache", "ACCELBUILD_REMOTE_CACHE")
    if given is None:
        return None
    from accelbuild.engine.remote_cache import parse_url

    return parse_url(*given)


def _executor_address(args: argparse.Namespace) -> str | None:
    """``--executor``, else ``$ACCELBUILD_EXECUTOR``."""
    given = _option_or_env(args, "executor", "--executor", "ACCELBUILD_EXECUTOR")
    if given is None:
        return None
    from accelbuild.engine.dask_executor import parse

    return parse(*given)


def load(paths: list[str], args: argparse.Namespace | None = None) -> list[PipelineSpec]:
    """The pipelines; with ``args`` of a command that has a state dir (run, status), configs validated by an
    earlier command are not validated again (``accelbuild.config.validated``)."""
    from accelbuild.config.load import load_pipelines

    validated = None
    if args is not None and hasattr(args, "state_dir"):
        from accelbuild.config.validated import ValidatedConfigs

        validated = ValidatedConfigs(state_dir(args) / "validated_configs")
    return load_pipelines(paths, validated)


def with_devices(pipelines: list[PipelineSpec], args: argparse.Namespace) -> list[PipelineSpec]:
    """The pipelines with their ``benchmark.device`` resolved on its farm (exit 2 before any build work when
    the farm or the device cannot be reached; docs/devices.md)."""
    farm = getattr(args, "device_farm", None)
    if farm is not None:
        from accelbuild.engine.dask_executor import parse

        farm = parse(farm, "--device-farm")
    if farm is None and not any(p.benchmark.device is not None for p in pipelines):
        return pipelines
    from accelbuild.engine import devices

    return devices.resolve(pipelines, farm)


def state_dir(args: argparse.Namespace, root: Path | None = None) -> Path:
    """``--state-dir``, else the project's (``.accelbuild/`` at its root)."""
    from accelbuild.engine.state import default_state_dir, project_root

    return Path(args.state_dir) if args.state_dir else default_state_dir(root or project_root())


def refuse_model_files(paths: list[str], command: str) -> None:
    """``run model.onnx``: say a pipeline YAML was expected (and how to get one)."""
    from accelbuild.config.spec import MODEL_FORMATS

    for path in paths:
        if Path(path).suffix.lower() in MODEL_FORMATS:
            raise InputFileError(path, f"a model file; `accelbuild {command}` takes pipeline YAML files "
                                       f"(write one with `accelbuild init {path}`)")
