"""The ``target`` section of a pipeline of family ethos-u, typed, and the parameter objects of its stages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from accelbuild.stages.params import AccuracyInputs, DataParams


@dataclass(frozen=True)
class EthosUTargetSpec:
    family: Literal["ethos-u"]
    accelerator: str
    system_config: str | None
    memory_mode: str | None
    optimise: Literal["Performance", "Size"]


@dataclass(frozen=True)
class NoQuantizeParams:
    """ethos-u adds nothing to the quantize stage's parameters."""


# the writer check: every tensor within one step of quantized.onnx's operator (map_stage); TFLite's int16
# Logistic/Tanh/Softmax are lookup-table approximations, 2 steps of 1/32768 off
MAX_STEPS = {8: 1.0, 16: 2.0}


@dataclass(frozen=True)
class WriteParams:
    """map: write ``<model>/int8.tflite`` from quantized.onnx and check it in LiteRT."""

    model: str
    accuracy: AccuracyInputs        # the inputs the check runs on (models[].data when given)
    data: DataParams | None
    max_steps: float | None         # allowed disagreement in quantization steps (None: by the model's bits)
    calibration_frames: int | None = None  # the first accuracy inputs calibrated the model


@dataclass(frozen=True)
class VelaParams:
    """assemble: Vela's options and version (a new Vela is a new compiler: it re-runs)."""

    model: str
    accelerator: str
    system_config: str | None
    memory_mode: str | None
    optimise: str
    vela_version: str


@dataclass(frozen=True)
class BenchmarkParams:
    pipeline: str
    models: tuple[str, ...]
    accuracy: AccuracyInputs
    data: tuple[DataParams | None, ...]
    accelerator: str
    vela_version: str
    calibration_frames: tuple[int, ...]  # per model: its first accuracy inputs calibrated it
    host: bool  # benchmark.host: time the cropped pre/post sections on this machine
