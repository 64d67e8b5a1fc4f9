"""The family-independent stages, import -> crop -> quantize, declared as ``Stage`` records.

The engine asks the pipeline's target family for the stages after these (``stages_of``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from accelbuild.config.spec import ModelSpec, PipelineSpec
from accelbuild.stages.declaration import (
    Stage,
    accuracy_data,
    accuracy_inputs,
    data_params,
    model_data,
    model_dir,
)
from accelbuild.stages.params import CropParams, ImportParams, QuantizeParams, project


def _import_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    """The model file and, for an ONNX model, the external-data files it names (roles ``external:<location>``)."""
    assert model is not None
    inputs = {"model": model.path, **_external_data(model)}
    if model.format == "savedmodel":  # every file of the folder: variables, assets
        folder = model.path.parent
        inputs.update({f"model:{p.relative_to(folder).as_posix()}": p for p in sorted(folder.rglob("*"))
                       if p.is_file() and p != model.path})
    return inputs


def _external_data(model: ModelSpec) -> dict[str, Path]:
    """The external-data files of an ONNX model, read from the model file at plan time; none for a model
    that cannot be read or names bad locations: the import stage reports that, at its line in the YAML."""
    if model.format != "onnx":
        return {}
    try:  # most models name no "location": decided without importing onnx, so start-up stays light
        if b"location" not in model.path.read_bytes():
            return {}
    except OSError:
        return {}
    from accelbuild.errors import InputFileError
    from accelbuild.frontends.onnx_model import external_data_files

    try:
        return external_data_files(model.path)
    except InputFileError:
        return {}


def _import_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    folder = model_dir(pipeline, model)
    return {"imported.onnx": folder / "imported.onnx", "import.json": folder / "import.json"}


def _import_params(pipeline: PipelineSpec, model: ModelSpec | None) -> ImportParams:
    assert model is not None
    converter = None
    if model.format in ("keras", "tensorflow", "savedmodel"):
        from accelbuild.frontends.tensorflow import converter_version

        converter = converter_version()
    return project(ImportParams, model, converter=converter)


def _crop_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    inputs = {"imported": model_dir(pipeline, model) / "imported.onnx"}
    if model.crop.in_out_file is not None:
        inputs["in_out_file"] = model.crop.in_out_file
    return inputs


def _crop_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    folder = model_dir(pipeline, model)
    return {name: folder / name for name in ("ai.onnx", "pre.onnx", "post.onnx", "crop.json")}


def _crop_params(pipeline: PipelineSpec, model: ModelSpec | None) -> CropParams:
    assert model is not None
    crop = model.crop
    ops = pipeline.target_impl.chip_ops(pipeline)  # None: the family's chip is not told apart by operator
    return project(CropParams, crop, model=model.name, chip_ops=None if ops is None else tuple(sorted(ops)),
                   chip=pipeline.target.family if ops is not None else "")


def _quantize_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    folder = model_dir(pipeline, model)
    # pre.onnx: the accuracy inputs go through the pre-processing section (no-op in its no-section form)
    inputs = {"ai": folder / "ai.onnx", "pre": folder / "pre.onnx"}
    if model.quantize.bits_file is not None:
        inputs["bits_file"] = model.quantize.bits_file
    inputs.update(model_data(model) if model.data is not None else accuracy_data(pipeline))
    return inputs


def _quantize_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    folder = model_dir(pipeline, model)
    names: tuple[str, ...] = ("quantized.onnx", "quantize.json")
    if pipeline.target_impl.precision(pipeline).integer:
        names += ("calibration.json",)
    return {name: folder / name for name in names}


def _quantize_params(pipeline: PipelineSpec, model: ModelSpec | None) -> QuantizeParams:
    assert model is not None
    q = model.quantize
    target = pipeline.target_impl
    precision = target.precision(pipeline)
    return project(
        QuantizeParams, q,
        model=model.name,
        family=pipeline.target.family,
        bits=dict(sorted(q.bits.items())),
        accuracy=accuracy_inputs(pipeline),
        data=data_params(model),
        precision=precision,
        activations=target.activation_params(pipeline, model) if precision.integer else None,
        target=target.quantize_params(pipeline),
    )


_FRONT_CODE = ("accelbuild.passes", "accelbuild.frontends.onnx_model", "accelbuild.accuracy", "accelbuild.data")

FRONT_STAGES: tuple[Stage, ...] = (
    Stage(
        name="import",
        per_model=True,
        module="accelbuild.stages.import_",
        code=("accelbuild.stages.import_", "accelbuild.frontends", *_FRONT_CODE),
        inputs=_import_inputs,
        outputs=_import_outputs,
        params=_import_params,
    ),
    Stage(
        name="crop",
        per_model=True,
        module="accelbuild.stages.crop",
        code=("accelbuild.stages.crop", *_FRONT_CODE),
        inputs=_crop_inputs,
        outputs=_crop_outputs,
        params=_crop_params,
    ),
    Stage(
        name="quantize",
        per_model=True,
        module="accelbuild.stages.quantize",
        code=("accelbuild.stages.quantize", "accelbuild.quantize", *_FRONT_CODE),
        inputs=_quantize_inputs,
        outputs=_quantize_outputs,
        params=_quantize_params,
    ),
)


def stages_of(pipeline: PipelineSpec) -> tuple[Stage, ...]:
    """Every stage of ``pipeline``, in order: the front stages, then its target family's. The quantize
    stage and the family's stages also depend on the family's code. A family that quantizes with its vendor's
    own tool declares a stage named ``quantize``, which takes the shared one's place."""
    target = pipeline.target_impl
    import_, crop, quantize = FRONT_STAGES
    own = {s.name: replace(s, code=s.code + target.code) for s in target.stages}
    quantize = own.pop("quantize", None) or replace(quantize, code=quantize.code + target.code)
    return (import_, crop, quantize, *own.values())
