"""How a stage is declared: the ``Stage`` record and the helpers that name its input files.

Each ``Stage`` says what it reads, what it writes, which parameter object it gets (the thing the build
digests) and which code produces it; the task graph, the cache keys, ``status`` and ``clean`` are all
derived from these records. The family-independent stages (import, crop, quantize) are declared in
``accelbuild.stages.front``; ``map``, ``assemble`` and ``benchmark`` come from the pipeline's target family,
which builds its records with this module (it is part of the public family API). Stage modules are imported
only when a stage actually runs, so start-up stays light.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbuild.config.spec import ModelSpec, PipelineSpec
from accelbuild.stages.params import AccuracyInputs, DataParams

STAGE_ORDER = ("import", "crop", "quantize", "map", "assemble", "benchmark")

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
    # processes the stage may use for its own work (None from it: none of its own for this pipeline)
    jobs: Callable[[PipelineSpec], int | None] | None = None


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
    from accelbuild.data.spec import data_spec

    folder = model.data.path
    return {f"data:{path.relative_to(folder).as_posix()}": path
            for path in data_files(data_spec(model.data.params, folder))}


def model_files(pipeline: PipelineSpec, names: tuple[str, ...]) -> dict[str, Path]:
    """Files of every model's folder as ``<model>/<name>``: the inputs of a stage that runs once for all models."""
    return {f"{m.name}/{name}": model_dir(pipeline, m) / name for m in pipeline.models for name in names}


def models_data(pipeline: PipelineSpec) -> dict[str, Path]:
    """Every model's data files as ``<model>/data:...`` (two models may read files of the same name) and the
    pipeline's ``benchmark.accuracy.data``: the accuracy inputs of a stage that runs once for all models."""
    inputs = dict(accuracy_data(pipeline))
    for m in pipeline.models:
        inputs.update({f"{m.name}/{role}": path for role, path in model_data(m).items()})
    return inputs


def data_params(model: ModelSpec) -> DataParams | None:
    return None if model.data is None else model.data.params


def accuracy_inputs(pipeline: PipelineSpec) -> AccuracyInputs:
    bench = pipeline.benchmark
    if bench.data is not None:
        return AccuracyInputs(bench.data_text, None, None)
    return AccuracyInputs(None, bench.samples, bench.seed)
