"""The typed pipeline spec that comes out of a validated config.

Paths are absolute (resolved against the YAML's folder). Defaults were filled in from the JSON Schema
before these objects are built, so the schema stays the one place that states them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Union

from accelbuild.config.yaml_source import YamlDocument
from accelbuild.errors import Where

Shape = Union[tuple[int, ...], Literal["auto"]]
ModelFormat = Literal["onnx", "tflite", "keras", "tensorflow"]


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


@dataclass(frozen=True)
class QuantizeSpec:
    weight_bits: int = 8
    bits: dict[str, int] = field(default_factory=dict)
    bits_file: Path | None = None
    auto_precision: bool = False


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


@dataclass(frozen=True)
class TargetSpec:
    chip_gen: str
    profile_path: Path
    num_chips: int | Literal["min"]
    effort: Literal["lazy", "normal", "hard"]
    target_fps: float | None
    input_format: str
    output_format: str
    share_input: bool


@dataclass(frozen=True)
class BenchmarkSpec:
    frames: int
    host: bool
    samples: int
    seed: int
    data: Path | None


@dataclass(frozen=True)
class ClosedLoopSpec:
    enabled: bool
    jobs: int
    keep_splits: bool
    prioritize_model: int


@dataclass(frozen=True)
class OutputSpec:
    dir: Path
    dfp_name: str
    sim_dfp: bool


@dataclass(frozen=True)
class PipelineSpec:
    """One pipeline YAML, validated. ``source`` keeps positions for errors found later by stages."""

    name: str
    yaml_path: Path
    target: TargetSpec
    models: tuple[ModelSpec, ...]
    benchmark: BenchmarkSpec
    closed_loop: ClosedLoopSpec
    output: OutputSpec
    source: YamlDocument

    def where(self, *path: str | int, key: bool = False) -> Where:
        """Position in the YAML of the value (or key) at ``path``, e.g. ``where("models", 0, "crop")``."""
        return self.source.where(tuple(path), key=key)

    def model(self, name: str) -> ModelSpec:
        for model in self.models:
            if model.name == name:
                return model
        raise KeyError(name)
