"""The typed pipeline spec that comes out of a validated config.

Paths are absolute (resolved against the YAML's folder). Defaults were filled in from the JSON Schema
before these objects are built, so the schema stays the one place that states them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from accelbuild.errors import Where

Shape = tuple[int, ...] | Literal["auto"]
ModelFormat = Literal["onnx", "tflite", "keras", "tensorflow", "savedmodel"]

SAVED_MODEL = "saved_model.pb"  # a folder holding this file is a TensorFlow SavedModel
MODEL_FORMATS = {
    ".onnx": "onnx",
    ".tflite": "tflite",
    ".h5": "keras",
    ".hdf5": "keras",  # Keras writes HDF5 under either suffix
    ".keras": "keras",
    ".pb": "tensorflow",
}


@dataclass(frozen=True)
class InputShapes:
    """User-given input shapes: by input name, or in input order, or all taken from the model."""

    by_name: dict[str, Shape] = field(default_factory=dict)
    in_order: tuple[Shape, ...] = ()

    @property
    def auto(self) -> bool:
        return not self.by_name and not self.in_order

    def as_param(self) -> object:
        """A JSON-able, canonical form for parameter digests."""
        if self.by_name:
            return {k: list(v) if v != "auto" else v for k, v in sorted(self.by_name.items())}
        if self.in_order:
            return [list(v) if v != "auto" else v for v in self.in_order]
        return "auto"


@dataclass(frozen=True)
class CropSpec:
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    auto: bool = False
    in_out_file: Path | None = None
    in_out_file_text: str | None = None  # as written in the YAML, for messages
    allow_partial: bool = False


@dataclass(frozen=True)
class AutoPrecision:
    """Raise the most sensitive layers until the output reaches ``min_cosine`` (``true`` = 0.99)."""

    min_cosine: float = 0.99
    max_extra_bytes: int | None = None


@dataclass(frozen=True)
class QuantizeSpec:
    weight_bits: int = 8
    bits: dict[str, int | dict[str, int]] = field(default_factory=dict)  # or {weights, activations}
    bits_file: Path | None = None
    bits_file_text: str | None = None  # as written in the YAML, for messages
    auto_precision: AutoPrecision | None = None
    own: Any = None  # the family's own quantize keys, typed by the family (``Target.quantize_spec``)


@dataclass(frozen=True)
class DataParams:
    """``models[].data`` without its folder: what stages are parameterised by (the folder's files are
    their inputs ``data:<relative path>``)."""

    text: str  # the folder as the YAML writes it (messages, records)
    count: int | None
    resize: tuple[int, int] | None
    color: str
    mean: tuple[float, ...]
    std: tuple[float, ...]


@dataclass(frozen=True)
class AccuracyInputs:
    """Where accuracy and calibration inputs come from: a data folder (its files are stage inputs,
    named ``data:<relative path>``) or ``samples`` seeded random inputs (a stage parameter)."""

    data: str | None  # the folder as the YAML writes it
    samples: int | None
    seed: int | None


@dataclass(frozen=True)
class DataSettings:
    """``models[].data``: a folder of images or .npy arrays (resolved) and how images become inputs."""

    path: Path
    params: DataParams


@dataclass(frozen=True)
class ModelSpec:
    index: int
    name: str
    path: Path
    path_text: str  # as written in the YAML, for messages
    format: ModelFormat
    input_shapes: InputShapes
    crop: CropSpec
    quantize: QuantizeSpec
    data: DataSettings | None = None


@dataclass(frozen=True)
class DeviceSpec:
    """``benchmark.device``: the Dask worker resource that names a device, on which farm. ``machine`` is the
    device's description (``accelbuild.util.machine`` on that worker, with its runtime), filled in when the
    build reaches the farm (``engine/devices.py``): it is part of the benchmark task's key."""

    farm: str | None  # dask://HOST:PORT (None until --device-farm gives it)
    resource: str
    machine: str | None = None


@dataclass(frozen=True)
class BenchmarkSpec:
    frames: int
    host: bool
    samples: int
    seed: int
    data: Path | None
    data_text: str | None = None  # as written in the YAML, for messages
    warn_below: float = 0.98  # accuracy floor: a model below it gets a warning
    device: DeviceSpec | None = None  # measure on a device of a Dask farm (docs/devices.md)


@dataclass(frozen=True)
class OutputSpec:
    dir: Path


@dataclass(frozen=True)
class PipelineSpec:
    """One pipeline YAML, validated. ``source`` keeps positions for errors found later by stages."""

    name: str
    yaml_path: Path
    target: Any  # the family's typed target spec (``.family`` names it); see accelbuild.targets
    models: tuple[ModelSpec, ...]
    benchmark: BenchmarkSpec
    output: OutputSpec
    source: Any  # YamlDocument, or a ComposedDocument for extends/matrix
    checks: dict[str, float] = field(default_factory=dict)
    variant: str | None = None  # the matrix variant ("num_chips=2,weight_bits=4"), None without a matrix
    base_name: str = ""  # the pipeline's name without its variant
    target_impl: Any = None  # the target family that builds it (an ``accelbuild.targets.base.Target``)
    toolchain_ref: Any = None  # families with a vendor toolchain: its ``accelbuild.toolchains.ToolchainRef``

    def where(self, *path: str | int, key: bool = False) -> Where:
        """Position in the YAML of the value (or key) at ``path``, e.g. ``where("models", 0, "crop")``."""
        return self.source.where(tuple(path), key=key)

    def model(self, name: str) -> ModelSpec:
        for model in self.models:
            if model.name == name:
                return model
        raise KeyError(name)
