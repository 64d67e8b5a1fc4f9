"""The parameter objects of the family-independent stages (import, crop, quantize).

Each is frozen and holds plain values only (no paths: files are stage inputs), because the build
digests exactly this object for doit and the artifact cache. Built from the spec by
``accelbuild.engine.stages``; read by the stage modules. Light to import: planning a no-op run builds
every task's parameters. ``DataParams`` (``models[].data`` without its folder) is defined with the spec.

A parameter object is a projection of spec objects (``project``): a field takes the same-named attribute of
the spec (or the one its metadata ``spec`` names), so a new spec field needs no copying code.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from accelbuild.config.spec import AccuracyInputs, AutoPrecision, DataParams, InputShapes, key  # noqa: F401

T = TypeVar("T")


def project(cls: type[T], source: object, /, **given: Any) -> T:
    """``cls`` with each field not in ``given`` taken from ``source``'s attribute of the same name, or of the
    name in the field's metadata ``spec``."""
    values = dict(given)
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in values:
            values[f.name] = getattr(source, f.metadata.get("spec", f.name))
    return cls(**values)


def spec(name: str) -> dict[str, str]:
    """Field metadata: the field projects the spec attribute ``name`` (another name than its own)."""
    return {"spec": name}


@dataclass(frozen=True)
class ImportParams:
    model: str = field(metadata=spec("name"))
    path_text: str  # the model path as the YAML writes it (messages)
    format: str
    input_shapes: InputShapes
    converter: str | None = None  # "tensorflow 2.21.0" for Keras/TensorFlow models: an upgrade re-runs import


@dataclass(frozen=True)
class CropParams:
    model: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    auto: bool
    # as the YAML writes it; the file's content is a stage input
    in_out_file: str | None = field(metadata=spec("in_out_file_text"))
    allow_partial: bool
    # the operators the target's chip runs, when the family moves the others at the ai section's ends to the
    # host (``Target.chip_ops``); None: the ai section is what the crop points say
    chip_ops: tuple[str, ...] | None = None
    chip: str = ""  # the chip's name in messages and crop.json


@dataclass(frozen=True)
class PrecisionRules:
    """What a family's hardware computes with, which the quantize stage follows."""

    weight_bits: tuple[int, ...]  # weight precisions the family stores
    # "bfloat16": float activations as the chip rounds them; "integer": calibrated (QDQ); "float": the family
    # runs the model as it is, so the quantize stage leaves it unchanged (a float precision)
    activations: str
    activation_bits: tuple[int, ...] = ()  # integer activations: the precisions the engine computes with
    symmetric: bool = False  # integer activations: zero point 0 (else asymmetric)
    share_concat_scales: bool = False  # integer activations: a Concat's inputs and output share one scale
    conventions: str = "onnx"  # integer activations: "tflite" follows TFLite's integer kernels
    split_layer_bits: bool = False  # per-layer bits may set weights and activations apart
    whole_model_bits: bool = False  # one activation precision per model: auto_precision picks it

    @property
    def quantizes(self) -> bool:
        """The quantize stage changes the model (every precision but a float one)."""
        return self.activations != "float"

    @property
    def integer(self) -> bool:
        """Activations are quantized too (from calibration data), not only weights."""
        return self.activations == "integer"


@dataclass(frozen=True)
class ActivationSettings:
    """A family's calibration keys of a quantize section, as its schema fills them in (families that
    quantize activations declare them in their fragment; ``bits`` None: the family has no such key, or npu's
    default). Built by ``accelbuild.config.spec.build``."""

    bits: int | None = field(metadata=key("activation_bits"))
    calibration: str
    calibration_frames: int


@dataclass(frozen=True)
class ActivationParams:
    """How a family that quantizes activations calibrates them (``quantize.activation_bits`` etc.)."""

    bits: int
    calibration: str  # minmax | percentile | entropy | mse
    calibration_frames: int  # the first N inputs calibrate; the rest measure accuracy


@dataclass(frozen=True)
class QuantizeParams:
    model: str
    family: str
    weight_bits: int
    bits: dict[str, int | dict[str, int]]
    # as the YAML writes it; the file's content is a stage input
    bits_file: str | None = field(metadata=spec("bits_file_text"))
    auto_precision: AutoPrecision | None
    accuracy: AccuracyInputs
    data: DataParams | None  # models[].data: used instead of ``accuracy`` when given
    precision: PrecisionRules
    activations: ActivationParams | None  # families that quantize activations; None for the others
    target: Any  # the family's own part (e.g. host packet formats), a frozen dataclass


__all__ = ["AccuracyInputs", "ActivationParams", "CropParams", "DataParams", "ImportParams", "PrecisionRules",
           "QuantizeParams"]
