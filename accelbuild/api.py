"""accelbuild as a library: what the command line does, as calls (docs/api.md).

    from accelbuild import api

    pipelines = api.load("pipelines/tinydet.yaml")
    summary = api.build(pipelines)             # like `accelbuild run`
    print(summary.ok, [(t.name, t.status) for t in summary.results])
    print(api.metrics(pipelines[0]))           # benchmark.json's figures, with their kind

Mistakes raise ``accelbuild.errors.UserError`` (the CLI's exit 2) with the same positioned message; a stage that
fails is a ``failed`` task in the summary (``summary.ok`` is False), as ``run`` reports it. Options default as
the CLI's do: the project root is the nearest folder holding ``.accelbuild/`` or ``.git``, state in its
``.accelbuild/``, the cache in ``.accelbuild/cache`` (``ACCELBUILD_STATE_DIR`` / ``ACCELBUILD_CACHE_DIR`` apply).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbuild.config.spec import PipelineSpec
    from accelbuild.engine.api import RunSummary
    from accelbuild.engine.doit_backend import Explanation, RunOptions
    from accelbuild.engine.model_info import ModelInfo
    from accelbuild.engine.plan import Job

__all__ = ["build", "clean", "compare", "init", "inspect_model", "load", "metrics", "options", "plan", "status"]


def load(*paths: str | Path) -> list[PipelineSpec]:
    """Pipeline YAML files, validated (one spec per matrix variant)."""
    from accelbuild.config.load import load_pipelines

    return load_pipelines([str(p) for p in paths])


def options(root: Path | None = None, state_dir: Path | None = None, cache_dir: Path | None = None, jobs: int = 1,
            force: bool = False, keep_going: bool = False, remote_cache: str | None = None,
            executor: str | None = None) -> RunOptions:
    """Where state and cache live and how to run, with the CLI's defaults."""
    from accelbuild.engine.doit_backend import RunOptions
    from accelbuild.engine.remote_cache import parse_url
    from accelbuild.engine.state import default_cache_dir, default_state_dir, project_root

    root = Path(root) if root is not None else project_root()
    state = Path(state_dir) if state_dir is not None else default_state_dir(root)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir(state)
    return RunOptions(root=root.absolute(), state_dir=state.absolute(), cache_dir=cache.absolute(), jobs=jobs,
                      force=force, keep_going=keep_going,
                      remote_cache=parse_url(remote_cache, "remote_cache") if remote_cache else None,
                      executor=executor)


def plan(pipelines: list[PipelineSpec], until: str | None = None) -> list[Job]:
    """The tasks the pipelines make, in dependency order (each with its inputs, outputs and parameters)."""
    from accelbuild.engine import plan as planning

    return planning.plan(pipelines, until)


def build(pipelines: list[PipelineSpec], run_options: RunOptions | None = None, until: str | None = None,
          quiet: bool = True) -> RunSummary:
    """``accelbuild run``: build what changed; the summary holds every task's status and each pipeline's figures."""
    from accelbuild.engine import api

    return api.run(pipelines, run_options or options(), until, quiet=quiet)


def status(pipelines: list[PipelineSpec], run_options: RunOptions | None = None) -> list[Explanation]:
    """``accelbuild status``: which tasks would run, and why."""
    from accelbuild.engine import api

    return api.explain(pipelines, run_options or options())


def clean(pipelines: list[PipelineSpec], run_options: RunOptions | None = None, cache: bool = False) -> list[Path]:
    """``accelbuild clean``: remove build outputs (and the cache with ``cache``); the paths removed."""
    from accelbuild.engine import api

    return api.clean(pipelines, run_options or options(), cache)


def metrics(pipeline: PipelineSpec) -> dict[str, Any] | None:
    """A built pipeline's figures (fps, latency, cosine per model, ...) and their ``kind``; None before a build."""
    from accelbuild.engine import api
    from accelbuild.engine import plan as planning

    return api.outcome(pipeline, planning.build_plan([pipeline]).artifacts[pipeline.name]).metrics


def compare(*builds: str | Path) -> dict[str, Any]:
    """``accelbuild compare --json``: output folders or pipelines side by side."""
    from accelbuild.engine import compare as comparing

    return comparing.as_json(comparing.sides_of([str(b) for b in builds]))


def inspect_model(path: str | Path, input_shapes: dict[str, list[int]] | None = None) -> ModelInfo:
    """``accelbuild tensors``: a model file's inputs, outputs and candidate crop tensors, imported as a build
    would import it (``input_shapes``: channel-last shapes of dynamic inputs, by name)."""
    from accelbuild.engine import model_info

    return model_info.read_model(Path(path), input_shapes)


def init(model: str | Path, output: str | Path | None = None, family: str | None = None, platform: str | None = None,
         data: str | Path | None = None, input_shapes: dict[str, list[int]] | None = None) -> tuple[Path, ModelInfo]:
    """``accelbuild init``: write a starter pipeline for ``model`` that builds as written (``output``: default the
    model's stem + .yaml, never overwritten; ``family``: default the default family; ``platform``: what the
    family's ``Target.platform`` says; ``data``: a folder of representative inputs); (the file, the model)."""
    from accelbuild.engine import starter

    return starter.write(Path(model), None if output is None else Path(output), family, platform, data, input_shapes)
