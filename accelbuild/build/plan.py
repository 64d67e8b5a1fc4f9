"""From pipeline specs to a flat, ordered list of build jobs (one per pipeline x model x stage)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbuild import __version__
from accelbuild.build.code_identity import code_digest
from accelbuild.build.stages import STAGE_ORDER, Stage, stages_of
from accelbuild.config.spec import ModelSpec, PipelineSpec
from accelbuild.stages.context import Locator, jsonable
from accelbuild.util.files import json_digest


@dataclass(frozen=True)
class Job:
    """Everything one task needs; picklable, so ``-j N`` can hand it to a worker process."""

    name: str
    stage: str
    pipeline_name: str
    model_name: str | None
    module: str  # runs the stage: ``module.run(StageContext)``
    inputs: dict[str, Path]
    outputs: dict[str, Path]  # a name ending in "/" is a folder output
    optional_outputs: frozenset[str]
    params: Any  # the stage's frozen parameter object
    params_json: dict[str, Any]  # its canonical JSON form (what ``status`` compares)
    code: str  # digest of the code that produces the outputs
    param_digest: str  # of stage, params, code and version: doit's config_changed and the cache key
    locate: Locator
    jobs: int = 1
    fans_out: bool = False  # the stage has parallel work of its own (with an executor, it runs here)

    @property
    def required_outputs(self) -> list[Path]:
        return [p for n, p in self.outputs.items() if n not in self.optional_outputs]


def task_name(pipeline: PipelineSpec, stage: str, model: ModelSpec | None) -> str:
    return f"{pipeline.name}:{model.name}:{stage}" if model else f"{pipeline.name}:{stage}"


def plan(pipelines: list[PipelineSpec], until: str | None = None) -> list[Job]:
    """The jobs of all pipelines in dependency order, stopping after stage ``until`` if given."""
    last = STAGE_ORDER.index(until) if until else len(STAGE_ORDER) - 1
    jobs = []
    for pipeline in pipelines:
        for stage in stages_of(pipeline):
            if STAGE_ORDER.index(stage.name) > last:
                continue
            for model in pipeline.models if stage.per_model else [None]:
                jobs.append(_job(pipeline, stage, model))
    return jobs


def _job(pipeline: PipelineSpec, stage: Stage, model: ModelSpec | None) -> Job:
    params = stage.params(pipeline, model)
    params_json = jsonable(params)
    code = code_digest(stage.code)
    prefix: tuple[str | int, ...] = ("models", model.index) if model else ()
    return Job(
        name=task_name(pipeline, stage.name, model),
        stage=stage.name,
        pipeline_name=pipeline.name,
        model_name=model.name if model else None,
        module=stage.module,
        inputs=stage.inputs(pipeline, model),
        outputs=stage.outputs(pipeline, model),
        optional_outputs=stage.optional_outputs,
        params=params,
        params_json=params_json,
        code=code,
        param_digest=json_digest({"stage": stage.name, "params": params_json, "code": code,
                                  "version": __version__}),
        locate=Locator(pipeline.source, prefix),
        jobs=stage.jobs(pipeline) if stage.jobs else 1,
        fans_out=stage.jobs is not None,
    )
