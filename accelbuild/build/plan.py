"""From pipeline specs to a flat, ordered list of build jobs (one per pipeline x model x stage)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbuild import __version__
from accelbuild.build.stages import STAGE_ORDER, STAGES, Stage
from accelbuild.config.spec import ModelSpec, PipelineSpec
from accelbuild.targets.profile_files import profile_digest
from accelbuild.util.files import json_digest


@dataclass(frozen=True)
class Job:
    """Everything one task needs; picklable, so ``-j N`` can hand it to a worker process."""

    name: str
    stage: str
    pipeline: PipelineSpec
    model: ModelSpec | None
    inputs: dict[str, Path]
    outputs: dict[str, Path]
    optional_outputs: frozenset[str]
    params: dict[str, Any]
    param_digest: str

    @property
    def required_outputs(self) -> list[Path]:
        return [p for n, p in self.outputs.items() if n not in self.optional_outputs]

    @property
    def model_name(self) -> str | None:
        return self.model.name if self.model else None


def task_name(pipeline: PipelineSpec, stage: str, model: ModelSpec | None) -> str:
    return f"{pipeline.name}:{model.name}:{stage}" if model else f"{pipeline.name}:{stage}"


def plan(pipelines: list[PipelineSpec], until: str | None = None) -> list[Job]:
    """The jobs of all pipelines in dependency order, stopping after stage ``until`` if given."""
    last = STAGE_ORDER.index(until) if until else len(STAGE_ORDER) - 1
    stages = [s for s in STAGES if STAGE_ORDER.index(s.name) <= last]
    jobs = []
    profiles: dict[Path, str] = {}  # one digest per profile file per run: the no-op path stays fast
    for pipeline in pipelines:
        path = pipeline.target.profile_path
        if path not in profiles:
            profiles[path] = profile_digest(path)
        for stage in stages:
            for model in pipeline.models if stage.per_model else [None]:
                jobs.append(_job(pipeline, stage, model, profiles[path]))
    return jobs


def _job(pipeline: PipelineSpec, stage: Stage, model: ModelSpec | None, profile: str) -> Job:
    params = stage.params(pipeline, model)
    digest_of = {"stage": stage.name, "params": params, "version": __version__}
    if stage.uses_profile:
        digest_of["profile"] = profile
    return Job(
        name=task_name(pipeline, stage.name, model),
        stage=stage.name,
        pipeline=pipeline,
        model=model,
        inputs=stage.inputs(pipeline, model),
        outputs=stage.outputs(pipeline, model),
        optional_outputs=stage.optional_outputs,
        params=params,
        param_digest=json_digest(digest_of),
    )
