"""``validate`` opens the models: the import and crop stages run into a temporary folder, exactly as
``run`` would run them (same code, same messages), and the ``bits`` layer names are checked against the
AI section's weighted layers. So input names, crop tensors and per-layer bits that do not exist in the
model are reported by ``validate``, not found later by ``run``. Nothing is written to the build folders,
the state or the cache.
"""

from __future__ import annotations

import importlib
import logging
import tempfile
from pathlib import Path

import onnx

from accelbuild.config.spec import PipelineSpec
from accelbuild.engine import read_guard
from accelbuild.engine.plan import Job, plan
from accelbuild.errors import ConfigError, ConfigErrors, InputFileError, StageError, UserError
from accelbuild.stages.context import StageContext


def check_models(pipelines: list[PipelineSpec]) -> None:
    """Raise ``ConfigErrors`` with every model problem found (one per model at most)."""
    errors: list[UserError] = []
    failed: set[tuple[str, str | None]] = set()
    logger = logging.getLogger("accelbuild")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))  # the stages' progress notes are not validate's business
    try:
        _check(pipelines, errors, failed)
    finally:
        logger.setLevel(level)
    if errors:
        flat = [e for exc in errors for e in (exc.errors if isinstance(exc, ConfigErrors) else [exc])]
        raise ConfigErrors(flat)  # type: ignore[arg-type]


def _check(pipelines: list[PipelineSpec], errors: list[UserError], failed: set[tuple[str, str | None]]) -> None:
    with tempfile.TemporaryDirectory(prefix="accelbuild-validate-") as tmp:
        moved: dict[Path, Path] = {}
        for index, job in enumerate(plan(pipelines, until="crop")):
            if (job.pipeline_name, job.model_name) in failed:
                continue
            outputs = {name: Path(tmp) / str(index) / name for name in job.outputs}
            inputs = {role: moved.get(path, path) for role, path in job.inputs.items()}
            try:
                _run(job, inputs, outputs)
            except UserError as exc:
                errors.append(exc)
                failed.add((job.pipeline_name, job.model_name))
                continue
            except StageError:
                continue  # a model that cannot be cropped is a build failure, not a config mistake
            moved.update({job.outputs[name]: path for name, path in outputs.items()})
            if job.stage == "crop":
                _check_bits(job, pipelines, outputs["ai.onnx"], errors)


def _run(job: Job, inputs: dict[str, Path], outputs: dict[str, Path]) -> None:
    for path in outputs.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    module = importlib.import_module(job.module)
    with read_guard.guarding(job, inputs, {p.parent for p in outputs.values()}):
        module.run(StageContext(job.params, inputs, outputs, job.locate))


def _check_bits(crop_job: Job, pipelines: list[PipelineSpec], ai: Path, errors: list[UserError]) -> None:
    """The model's ``bits`` / ``bits_file`` name weighted layers of its AI section."""
    from accelbuild.stages import quantize

    pipeline = next(p for p in pipelines if p.name == crop_job.pipeline_name)
    model = next(m for m in pipeline.models if m.name == crop_job.model_name)
    if not model.quantize.bits and model.quantize.bits_file is None:
        return
    quantize_job = next(j for j in plan([pipeline], until="quantize")
                        if j.stage == "quantize" and j.model_name == model.name)
    ctx = StageContext(quantize_job.params, quantize_job.inputs, {}, quantize_job.locate)
    try:
        quantize.check_overrides(ctx, onnx.load(str(ai)))
    except (ConfigError, InputFileError) as exc:
        errors.append(exc)
