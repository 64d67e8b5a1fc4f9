"""The stages of a build, declared in one place.

Each ``Stage`` says what it reads, what it writes, which parameter object it gets (the thing the build
digests) and which code produces it; the task graph, the cache keys, ``status`` and ``clean`` are all
derived from these entries. The family-independent stages (import, crop, quantize) are declared here;
``map``, ``assemble`` and ``benchmark`` come from the pipeline's target (``accelbuild.targets``). Stage
modules are imported only when a stage actually runs, so start-up stays light.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from accelbuild.config.spec import ModelSpec, PipelineSpec
from accelbuild.stages.params import (
    AccuracyInputs,
    ActivationParams,
    CropParams,
    DataParams,
    ImportParams,
    QuantizeParams,
)

STAGE_ORDER = ("import", "crop", "quantize", "map", "assemble", "benchmark")
# quantize defaults of the families that quantize activations (DESIGN.md, "Target families")
DEFAULT_ACTIVATION_BITS = 8
DEFAULT_CALIBRATION = "percentile"
DEFAULT_CALIBRATION_FRAMES = 16

Files = Callable[[PipelineSpec, "ModelSpec | None"], dict[str, Path]]


def model_dir(pipeline: PipelineSpec, model: ModelSpec) -> Path:
    return pipeline.output.dir / model.name


@dataclass(frozen=True)
class Stage:
    """One kind of build step. ``per_model`` stages get one task per model, others one per pipeline.

    An output whose name ends in ``/`` is a folder the stage fills (its files are cached one by one).
    """

    name: str
    per_model: bool
    module: str  # the stage's module; its ``run(ctx)`` does the work
    code: tuple[str, ...]  # modules and packages whose source shapes the outputs (code identity)
    inputs: Files
    outputs: Files
    params: Callable[[PipelineSpec, ModelSpec | None], Any]  # a frozen dataclass
    optional_outputs: frozenset[str] = field(default_factory=frozenset)
    jobs: Callable[[PipelineSpec], int] | None = None  # processes the stage may use for its own work


def accuracy_data(pipeline: PipelineSpec) -> dict[str, Path]:
    """The ``.npy`` files of ``benchmark.accuracy.data``: inputs of every stage that measures accuracy."""
    folder = pipeline.benchmark.data
    if folder is None:
        return {}
    return {f"data:{path.relative_to(folder).as_posix()}": path for path in sorted(folder.rglob("*.npy"))}


def model_data(model: ModelSpec) -> dict[str, Path]:
    """The files of ``models[].data`` (the first ``count`` samples) as inputs ``data:<relative path>``."""
    if model.data is None:
        return {}
    from accelbuild.data.files import data_files

    folder = model.data.path
    return {f"data:{path.relative_to(folder).as_posix()}": path
            for path in data_files(data_spec(model.data.params, folder))}


def data_spec(data: DataParams, folder: Path) -> Any:
    """The ``accelbuild.data`` spec (what the loader reads) of ``models[].data`` parameters and its folder."""
    from accelbuild.data.spec import DataSpec

    return DataSpec(folder, data.text, data.count, data.resize, data.color, data.mean, data.std)


def data_params(model: ModelSpec) -> DataParams | None:
    return None if model.data is None else model.data.params


def accuracy_inputs(pipeline: PipelineSpec) -> AccuracyInputs:
    bench = pipeline.benchmark
    if bench.data is not None:
        return AccuracyInputs(bench.data_text, None, None)
    return AccuracyInputs(None, bench.samples, bench.seed)


def _import_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    return {"model": model.path}


def _import_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    folder = model_dir(pipeline, model)
    return {"imported.onnx": folder / "imported.onnx", "import.json": folder / "import.json"}


def _import_params(pipeline: PipelineSpec, model: ModelSpec | None) -> ImportParams:
    assert model is not None
    return ImportParams(model.name, model.path_text, model.format, model.input_shapes)


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
    return CropParams(model.name, crop.inputs, crop.outputs, crop.auto, crop.in_out_file_text, crop.allow_partial)


def _quantize_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    folder = model_dir(pipeline, model)
    inputs = {"ai": folder / "ai.onnx", "crop": folder / "crop.json"}
    if model.quantize.bits_file is not None:
        inputs["bits_file"] = model.quantize.bits_file
    inputs.update(model_data(model) if model.data is not None else accuracy_data(pipeline))
    return inputs


def _quantize_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    folder = model_dir(pipeline, model)
    names = ("quantized.onnx", "quantize.json")
    if pipeline.target_impl.integer_activations:
        names += ("calibration.json",)
    return {name: folder / name for name in names}


def _quantize_params(pipeline: PipelineSpec, model: ModelSpec | None) -> QuantizeParams:
    assert model is not None
    q = model.quantize
    target = pipeline.target_impl
    precision = target.precision(pipeline)
    return QuantizeParams(
        model=model.name,
        family=pipeline.target.family,
        weight_bits=q.weight_bits,
        bits=dict(sorted(q.bits.items())),
        bits_file=q.bits_file_text,
        auto_precision=q.auto_precision,
        accuracy=accuracy_inputs(pipeline),
        data=data_params(model),
        precision=precision,
        activations=ActivationParams(q.activation_bits or DEFAULT_ACTIVATION_BITS,
                                     q.calibration or DEFAULT_CALIBRATION,
                                     q.calibration_frames or DEFAULT_CALIBRATION_FRAMES) if precision.integer else None,
        target=target.quantize_params(pipeline),
    )


_FRONT_CODE = ("accelbuild.passes", "accelbuild.frontends.onnx_model", "accelbuild.accuracy")

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
        optional_outputs=frozenset({"pre.onnx", "post.onnx"}),
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
    stage and the family's stages also depend on the family's code."""
    target = pipeline.target_impl
    import_, crop, quantize = FRONT_STAGES
    return (import_, crop, replace(quantize, code=quantize.code + target.code),
            *(replace(s, code=s.code + target.code) for s in target.stages))
