"""``validate`` opens the models: the import and crop stages run into a temporary folder, exactly as
``run`` would run them (same code, same messages; only the figures a stage measures for its record, which
validate throws away, are skipped: ``StageContext.measured``), and the ``bits`` layer names are checked
against the AI section's weighted layers. So input names, crop tensors and per-layer bits that do not exist in the
model are reported by ``validate``, not found later by ``run``. Nothing is written to the build folders
or the cache; the state dir keeps which models passed (``checked_models``: the same model with the same
settings is not opened again) and TensorFlow's conversions of Keras and SavedModel models
(``state.conversions_dir``).
"""

from __future__ import annotations

import importlib
import logging
import tempfile
from dataclasses import replace
from pathlib import Path

from accelbuild.config.spec import PipelineSpec
from accelbuild.engine import read_guard
from accelbuild.engine.checked_models import CheckedModels, WarningLog
from accelbuild.engine.plan import Job, plan
from accelbuild.engine.state import conversions_dir
from accelbuild.errors import ConfigError, ConfigErrors, InputFileError, StageError, UserError
from accelbuild.frontends.tensorflow import conversion_cache
from accelbuild.stages.context import StageContext
from accelbuild.util.files import scratch


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
    jobs = plan(pipelines, until="crop")
    checked = CheckedModels(conversions_dir().parent / "checked_models")
    keys = _keys(jobs, pipelines, checked)
    todo = [job for job in jobs if keys.get((job.pipeline_name, job.model_name), (None, False))[1] is False]
    for key, passed in keys.values():
        if passed and key is not None:  # opened before with the same bytes and settings: say what it said
            for message in checked.warnings(key) or []:
                logging.getLogger("accelbuild").warning("%s", message)
    said = WarningLog()
    logging.getLogger().addHandler(said)
    model_said: dict[tuple[str, str | None], list[str]] = {}
    model_errors = dict.fromkeys(keys, 0)
    try:
        with tempfile.TemporaryDirectory(prefix="accelbuild-validate-") as tmp, scratch(Path(tmp)), \
                conversion_cache(conversions_dir()):
            _check_jobs(todo, pipelines, errors, failed, Path(tmp), said, model_said, model_errors)
    finally:
        logging.getLogger().removeHandler(said)
    for name, (key, passed) in keys.items():
        if key is not None and not passed and name not in failed and model_errors.get(name) == 0:
            checked.add(key, model_said.get(name, []))


def _keys(jobs: list[Job], pipelines: list[PipelineSpec], checked: CheckedModels
          ) -> dict[tuple[str, str | None], tuple[str | None, bool]]:
    """Per model: its ``checked_models`` key (None: always checked in full) and whether it passed before."""
    by_model: dict[tuple[str, str | None], list[Job]] = {}
    for job in jobs:
        by_model.setdefault((job.pipeline_name, job.model_name), []).append(job)
    keys = {}
    for name, model_jobs in by_model.items():
        pipeline = next(p for p in pipelines if p.name == name[0])
        key = checked.key(model_jobs, pipeline) if name[1] is not None else None
        keys[name] = (key, key is not None and checked.warnings(key) is not None)
    return keys


def _check_jobs(jobs: list[Job], pipelines: list[PipelineSpec], errors: list[UserError],
                failed: set[tuple[str, str | None]], tmp: Path, said: WarningLog,
                model_said: dict[tuple[str, str | None], list[str]],
                model_errors: dict[tuple[str, str | None], int]) -> None:
    """Run ``jobs`` (import and crop of the models not recorded as passed) and the checks on their results;
    per model, the warnings said (``model_said``) and the number of errors found (``model_errors``)."""
    moved: dict[Path, Path] = {}
    for index, job in enumerate(jobs):
        name = (job.pipeline_name, job.model_name)
        if name in failed:
            continue
        before_errors, before_said = len(errors), len(said.messages)
        outputs = {output: tmp / str(index) / output for output in job.outputs}
        inputs = {role: moved.get(path, path) for role, path in job.inputs.items()}
        try:
            _run(job, inputs, outputs)
        except UserError as exc:
            errors.append(exc)
            failed.add(name)
            continue
        except StageError:
            failed.add(name)  # a model that cannot be cropped is a build failure, not a config mistake
            continue
        moved.update({job.outputs[output]: path for output, path in outputs.items()})
        if job.stage == "crop":
            _check_bits(job, pipelines, outputs["ai.onnx"], errors)
            _check_data(job, pipelines, outputs, errors)
            _check_family(job, pipelines, outputs["ai.onnx"], errors)
        model_said.setdefault(name, []).extend(said.messages[before_said:])
        model_errors[name] = model_errors.get(name, 0) + len(errors) - before_errors


def _run(job: Job, inputs: dict[str, Path], outputs: dict[str, Path]) -> None:
    for path in outputs.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    module = importlib.import_module(job.module)
    own = {*(p.parent for p in outputs.values()), conversions_dir()}  # the conversion cache is validate's own
    with read_guard.guarding(job, inputs, own):
        module.run(StageContext(job.params, inputs, outputs, job.locate, measured=False))


def _check_bits(crop_job: Job, pipelines: list[PipelineSpec], ai: Path, errors: list[UserError]) -> None:
    """The model's ``bits`` / ``bits_file`` name weighted layers of its AI section."""
    pipeline = next(p for p in pipelines if p.name == crop_job.pipeline_name)
    model = next(m for m in pipeline.models if m.name == crop_job.model_name)
    if not model.quantize.bits and model.quantize.bits_file is None:
        return
    import onnx

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
    import onnx

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
    """What the pipeline's family can already tell from the AI section (``Target.model_problems``)."""
    import onnx

    from accelbuild.families import get_target

    pipeline = next(p for p in pipelines if p.name == crop_job.pipeline_name)
    for problem in get_target(pipeline.target.family).model_problems(onnx.load(str(ai))):
        errors.append(ConfigError(crop_job.locate("path"), f"model {crop_job.model_name!r}: {problem}"))
