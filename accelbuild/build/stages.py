"""The stages of a build, declared in one place.

Each ``Stage`` says what it reads, what it writes and which parameters change its output; the task
graph, the cache keys, ``status`` and ``clean`` are all derived from these entries, so adding a stage is
adding one entry here and one module under ``accelbuild/stages``. Stage modules are imported only when a
stage actually runs, so start-up stays light.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from accelbuild.config.spec import ModelSpec, PipelineSpec

STAGE_ORDER = ("import", "crop", "quantize", "map", "assemble", "benchmark")


def model_dir(pipeline: PipelineSpec, model: ModelSpec) -> Path:
    return pipeline.output.dir / model.name


@dataclass(frozen=True)
class Stage:
    """One kind of build step. ``per_model`` stages get one task per model, others one per pipeline."""

    name: str
    per_model: bool
    module: str  # the stage's module; its ``run(ctx)`` does the work
    inputs: Callable[[PipelineSpec, ModelSpec | None], dict[str, Path]]
    outputs: Callable[[PipelineSpec, ModelSpec | None], dict[str, Path]]
    params: Callable[[PipelineSpec, ModelSpec | None], dict[str, Any]]
    optional_outputs: frozenset[str] = field(default_factory=frozenset)
    uses_profile: bool = False


def _accuracy_data(pipeline: PipelineSpec) -> dict[str, Path]:
    """The ``.npy`` files of ``benchmark.accuracy.data``: inputs of every stage that measures accuracy."""
    folder = pipeline.benchmark.data
    if folder is None:
        return {}
    return {f"data:{path.relative_to(folder)}": path for path in sorted(folder.rglob("*.npy"))}


def _import_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    return {"model": model.path}


def _import_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    folder = model_dir(pipeline, model)
    return {"imported.onnx": folder / "imported.onnx", "import.json": folder / "import.json"}


def _import_params(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Any]:
    assert model is not None
    return {"format": model.format, "input_shapes": model.input_shapes.as_param()}


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


def _crop_params(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Any]:
    assert model is not None
    crop = model.crop
    return {
        "inputs": list(crop.inputs),
        "outputs": list(crop.outputs),
        "auto": crop.auto,
        "in_out_file": crop.in_out_file is not None,  # its content is an input of the task
    }


def _quantize_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    folder = model_dir(pipeline, model)
    inputs = {"ai": folder / "ai.onnx", "crop": folder / "crop.json"}
    if model.quantize.bits_file is not None:
        inputs["bits_file"] = model.quantize.bits_file
    inputs.update(_accuracy_data(pipeline))
    return inputs


def _quantize_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    assert model is not None
    folder = model_dir(pipeline, model)
    return {name: folder / name for name in ("quantized.onnx", "quantize.json")}


def _quantize_params(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Any]:
    assert model is not None
    q, bench = model.quantize, pipeline.benchmark
    return {
        "weight_bits": q.weight_bits,
        "bits": dict(sorted(q.bits.items())),
        "bits_file": q.bits_file is not None,
        "auto_precision": q.auto_precision,
        "samples": bench.samples if bench.data is None else None,
        "seed": bench.seed if bench.data is None else None,
        "input_format": pipeline.target.input_format,
        "output_format": pipeline.target.output_format,
    }


def _map_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    inputs = {}
    for m in pipeline.models:
        folder = model_dir(pipeline, m)
        inputs[f"{m.name}/quantized.onnx"] = folder / "quantized.onnx"
        inputs[f"{m.name}/quantize.json"] = folder / "quantize.json"
    return inputs


def _map_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {"mapping.json": pipeline.output.dir / "mapping.json"}


def _map_params(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Any]:
    t = pipeline.target
    return {
        "models": [m.name for m in pipeline.models],
        "num_chips": t.num_chips,
        "effort": t.effort,
        "target_fps": t.target_fps,
        "share_input": t.share_input,
    }


def _assemble_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    inputs = {"mapping.json": pipeline.output.dir / "mapping.json"}
    for m in pipeline.models:
        inputs[f"{m.name}/quantized.onnx"] = model_dir(pipeline, m) / "quantized.onnx"
        if pipeline.closed_loop.enabled:  # the splits are re-mapped from the layers and their bits
            inputs[f"{m.name}/quantize.json"] = model_dir(pipeline, m) / "quantize.json"
    return inputs


def _assemble_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    outputs = {"dfp": pipeline.output.dir / pipeline.output.dfp_name}
    if pipeline.closed_loop.enabled:
        outputs["closed_loop.json"] = pipeline.output.dir / "closed_loop.json"
        outputs["best_split.dfp"] = pipeline.output.dir / "best_split.dfp"
    return outputs


def _assemble_params(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Any]:
    return {
        "models": [m.name for m in pipeline.models],
        "input_format": pipeline.target.input_format,
        "output_format": pipeline.target.output_format,
        "sim_dfp": pipeline.output.sim_dfp,
        "frames": pipeline.benchmark.frames if pipeline.output.sim_dfp or pipeline.closed_loop.enabled else None,
        "seed": pipeline.benchmark.seed if pipeline.output.sim_dfp or pipeline.closed_loop.enabled else None,
        "closed_loop": {
            "enabled": pipeline.closed_loop.enabled,
            "prioritize_model": pipeline.closed_loop.prioritize_model,
            "keep_splits": pipeline.closed_loop.keep_splits,
        },
    }


def _benchmark_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    out = pipeline.output
    dfp = out.dir / ("best_split.dfp" if pipeline.closed_loop.enabled else out.dfp_name)
    inputs = {"dfp": dfp, "mapping.json": out.dir / "mapping.json"}
    for m in pipeline.models:
        folder = model_dir(pipeline, m)
        for name in ("ai.onnx", "quantized.onnx", "crop.json"):
            inputs[f"{m.name}/{name}"] = folder / name
    inputs.update(_accuracy_data(pipeline))
    return inputs


def _benchmark_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {name: pipeline.output.dir / name for name in ("benchmark.json", "layer_stats.yaml", "report.html")}


def _benchmark_params(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Any]:
    bench = pipeline.benchmark
    return {
        "frames": bench.frames,
        "host": bench.host,
        "samples": bench.samples if bench.data is None else None,
        "seed": bench.seed,
        "closed_loop": pipeline.closed_loop.enabled,
    }


STAGES: tuple[Stage, ...] = (
    Stage(
        name="import",
        per_model=True,
        module="accelbuild.stages.import_",
        inputs=_import_inputs,
        outputs=_import_outputs,
        params=_import_params,
        uses_profile=True,
    ),
    Stage(
        name="crop",
        per_model=True,
        module="accelbuild.stages.crop",
        inputs=_crop_inputs,
        outputs=_crop_outputs,
        params=_crop_params,
        optional_outputs=frozenset({"pre.onnx", "post.onnx"}),
    ),
    Stage(
        name="quantize",
        per_model=True,
        module="accelbuild.stages.quantize",
        inputs=_quantize_inputs,
        outputs=_quantize_outputs,
        params=_quantize_params,
    ),
    Stage(
        name="map",
        per_model=False,
        module="accelbuild.stages.map",
        inputs=_map_inputs,
        outputs=_map_outputs,
        params=_map_params,
        uses_profile=True,
    ),
    Stage(
        name="assemble",
        per_model=False,
        module="accelbuild.stages.assemble",
        inputs=_assemble_inputs,
        outputs=_assemble_outputs,
        params=_assemble_params,
        uses_profile=True,
    ),
    Stage(
        name="benchmark",
        per_model=False,
        module="accelbuild.stages.benchmark",
        inputs=_benchmark_inputs,
        outputs=_benchmark_outputs,
        params=_benchmark_params,
    ),
)

STAGES_BY_NAME = {stage.name: stage for stage in STAGES}
