"""``validate`` opens the models: the import and crop stages run into a temporary folder, exactly as
``run`` would run them (same code, same messages), and the ``bits`` layer names are checked against the
AI section's weighted layers. So input names, crop tensors and per-layer bits that do not exist in the
model are reported by ``validate``, not found later by ``run``. Nothing is written to the build folders
or the cache; the state dir keeps TensorFlow's conversions of Keras and SavedModel models
(``state.conversions_dir``), so validating such a model again does not convert it again.
"""

from __future__ import annotations

import importlib
import logging
import tempfile
from dataclasses import replace
from pathlib import Path

import onnx

from accelbuild.config.spec import PipelineSpec
from accelbuild.engine import read_guard
from accelbuild.engine.plan import Job, plan
from accelbuild.engine.state import conversions_dir
from accelbuild.errors import ConfigError, ConfigErrors, InputFileError, StageError, UserError
from accelbuild.frontends.tensorflow import conversion_cache
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
    with tempfile.TemporaryDirectory(prefix="accelbuild-validate-") as tmp, conversion_cache(conversions_dir()):
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
                _check_data(job, pipelines, outputs, errors)
                _check_family(job, pipelines, outputs["ai.onnx"], errors)


def _run(job: Job, inputs: dict[str, Path], outputs: dict[str, Path]) -> None:
    for path in outputs.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    module = importlib.import_module(job.module)
    own = {*(p.parent for p in outputs.values()), conversions_dir()}  # the conversion cache is validate's own
    with read_guard.guarding(job, inputs, own):
        module.run(StageContext(job.params, inputs, outputs, job.locate))


def _check_bits(crop_job: Job, pipelines: list[PipelineSpec], ai: Path, errors: list[UserError]) -> None:
    """The model's ``bits`` / ``bits_file`` name weighted layers of its AI section."""
    pipeline = next(p for p in pipelines if p.name == crop_job.pipeline_name)
    model = next(m for m in pipeline.models if m.name == crop_job.model_name)
    if not model.quantize.bits and model.quantize.bits_file is None:
        return
    from accelbuild.stages import quantize

    quantize_job = next(j for j in plan([pipeline], until="quantize")
                        if j.stage == "quantize" and j.model_name == model.name)
    ctx = StageContext(quantize_job.params, quantize_job.inputs, {}, quantize_job.locate)
    try:
        quantize.check_overrides(ctx, onnx.load(str(ai)))
    except (ConfigError, InputFileError) as exc:
        errors.append(exc)


def _check_data(crop_job: Job, pipelines: list[PipelineSpec], outputs: dict[str, Path],
                errors: list[UserError]) -> None:
    """``models[].data`` against the folder and the model, every problem at once: a ``count`` larger than
    the folder, a ``resize`` that does not fit the model's input, inputs and subfolders that do not match,
    and every image that cannot be read."""
    pipeline = next(p for p in pipelines if p.name == crop_job.pipeline_name)
    model = next(m for m in pipeline.models if m.name == crop_job.model_name)
    if model.data is None:
        return
    from accelbuild.data.files import scan, shown_path
    from accelbuild.data.images import read_image, target_size  # Pillow: only for a model with data
    from accelbuild.data.load import check_inputs
    from accelbuild.data.spec import data_spec, input_infos
    from accelbuild.passes.sections import read_section

    spec = data_spec(model.data.params, model.data.path)
    locate = crop_job.locate

    def mistake(key: str, exc: InputFileError) -> ConfigError:
        where = locate("data", key) if pipeline.source.has_value(locate.prefix + ("data", key)) else locate("data")
        return ConfigError(where, f"{exc.path}: {exc.message}" if exc.path != spec.shown else exc.message)

    try:
        folder = scan(spec)
    except InputFileError as exc:
        errors.append(mistake("count" if "count is" in exc.message else "path", exc))
        if "count is" not in exc.message:
            return
        folder = scan(replace(spec, count=None))  # the rest is still worth checking
    first = read_section(outputs["pre.onnx"]) or onnx.load(str(outputs["ai.onnx"]))
    infos = input_infos(first)
    try:
        check_inputs(spec, folder, infos)
        if folder.kind == "images":
            target_size(spec, infos[0])
    except InputFileError as exc:
        shaping = "resize" in exc.message or "color" in exc.message
        errors.append(mistake("preprocess" if shaping else "path", exc))
        if not shaping:
            return
    if folder.kind == "images":
        for sample in folder.samples:
            path = sample.files[None]
            try:
                read_image(path, shown_path(spec, path.name), spec.color)
            except InputFileError as exc:
                errors.append(ConfigError(locate("data", "path"), f"{exc.path}: {exc.message}"))


def _check_family(crop_job: Job, pipelines: list[PipelineSpec], ai: Path, errors: list[UserError]) -> None:
    """What the pipeline's family can already tell from the AI section (an optional ``model_problems``
    of the family's target: ethos-u names the operators its TFLite writer cannot emit)."""
    from accelbuild.families import get_target

    pipeline = next(p for p in pipelines if p.name == crop_job.pipeline_name)
    check = getattr(get_target(pipeline.target.family), "model_problems", None)
    if check is None:
        return
    for problem in check(onnx.load(str(ai))):
        errors.append(ConfigError(crop_job.locate("path"), f"model {crop_job.model_name!r}: {problem}"))
