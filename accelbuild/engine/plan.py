"""From pipeline specs to a flat, ordered list of build jobs (one per pipeline x model x stage)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from accelbuild.config.spec import ModelSpec, PipelineSpec
from accelbuild.engine import task_key
from accelbuild.engine.code_identity import code_digest
from accelbuild.stages.context import Locator, jsonable
from accelbuild.stages.declaration import STAGE_ORDER, Stage
from accelbuild.stages.front import stages_of


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
    param_digest: str  # ``task_key.definition``: stage, code and params (the task key adds inputs, version)
    locate: Locator
    jobs: int = 1
    fans_out: bool = False  # the stage has parallel work of its own (with an executor, it runs here)
    # the pipeline's folder and output folder: a stage reads files there only through ``inputs``
    # (what the test suite's read guard, ``engine/read_guard.py``, checks)
    folders: tuple[Path, ...] = ()
    device: tuple[str, str] | None = None  # (farm, resource): a benchmark measured on a device (engine/devices.py)

    @property
    def task_id(self) -> str:
        """The name doit knows the task by (doit refuses '=' in names; matrix variants have them)."""
        return self.name.replace("%", "%25").replace("=", "%3D")

    @property
    def required_outputs(self) -> list[Path]:
        return [p for n, p in self.outputs.items() if n not in self.optional_outputs]


def task_name(pipeline: PipelineSpec, stage: str, model: ModelSpec | None) -> str:
    return f"{pipeline.name}:{model.name}:{stage}" if model else f"{pipeline.name}:{stage}"


@dataclass
class Plan:
    jobs: list[Job]
    # pipeline name -> artifact ("det/quantize.json", "benchmark.json", ...) -> where it is built
    artifacts: dict[str, dict[str, Path]]


def plan(pipelines: list[PipelineSpec], until: str | None = None) -> list[Job]:
    """The jobs of all pipelines in dependency order, stopping after stage ``until`` if given."""
    return build_plan(pipelines, until).jobs


def build_plan(pipelines: list[PipelineSpec], until: str | None = None) -> Plan:
    """The jobs, and where each pipeline's artifacts are built.

    The variants of one matrix share every task whose stage, parameters, code and inputs coincide: the
    first variant's task builds it and the others read its outputs (a bits sweep imports once).
    """
    last = STAGE_ORDER.index(until) if until else len(STAGE_ORDER) - 1
    jobs: list[Job] = []
    artifacts: dict[str, dict[str, Path]] = {p.name: {} for p in pipelines}
    shared: dict[tuple[Any, ...], Job] = {}  # (matrix file, stage, model, digest, inputs) -> first job
    moved: dict[Path, Path] = {}  # an output of a skipped variant task -> the shared task's output
    memo: dict[int, Any] = {}  # jsonable results by object, for this plan (it keeps each object alive)
    for pipeline in pipelines:
        for stage in stages_of(pipeline):
            if STAGE_ORDER.index(stage.name) > last:
                continue
            for model in pipeline.models if stage.per_model else [None]:
                job = _job(pipeline, stage, model, memo)
                if pipeline.variant is not None:
                    job = replace(job, inputs={role: moved.get(p, p) for role, p in job.inputs.items()})
                    key = (pipeline.yaml_path, job.stage, job.model_name, job.param_digest,
                           tuple(sorted((role, str(p)) for role, p in job.inputs.items())))
                    first = shared.setdefault(key, job)
                    if first is not job:
                        moved.update({job.outputs[name]: first.outputs[name] for name in job.outputs})
                        job = first
                    else:
                        jobs.append(job)
                else:
                    jobs.append(job)
                prefix = f"{model.name}/" if model else ""
                artifacts[pipeline.name].update({prefix + name: path for name, path in job.outputs.items()})
    return Plan(jobs, artifacts)


def _job(pipeline: PipelineSpec, stage: Stage, model: ModelSpec | None, memo: dict[int, Any] | None = None) -> Job:
    params = stage.params(pipeline, model)
    params_json = jsonable(params, memo)
    code = code_digest(stage.code)
    prefix: tuple[str | int, ...] = ("models", model.index) if model else ()
    jobs = stage.jobs(pipeline) if stage.jobs else None  # None: the stage has no parallel work of its own
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
        param_digest=task_key.definition(stage.name, code, params_json),
        locate=Locator(pipeline.source, prefix),
        jobs=jobs or 1,
        fans_out=jobs is not None,
        folders=(pipeline.yaml_path.parent, pipeline.output.dir),
        # a benchmark, or a stage whose own work measures (a measured closed loop), on the pipeline's device
        device=_device(pipeline) if stage.name == "benchmark" or jobs is not None else None,
    )


def _device(pipeline: PipelineSpec) -> tuple[str, str] | None:
    device = pipeline.benchmark.device
    return (device.farm, device.resource) if device is not None and device.farm else None
