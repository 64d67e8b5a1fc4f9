"""The ``target`` section of a pipeline of family rknn, typed, and the parameter objects of its stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from accelbuild.config.spec import derived
from accelbuild.stages.params import AccuracyInputs, DataParams
from accelbuild.toolchains import ToolchainRef

# accelbuild's calibration methods as the toolkit's quantized_algorithm (percentile has no counterpart)
ALGORITHMS = {"minmax": "normal", "mse": "mmse", "entropy": "kl_divergence"}


@dataclass(frozen=True)
class RknnTargetSpec:
    family: Literal["rknn"]
    platform: str
    precision: str
    npu_clock_mhz: float | None
    # target.toolchain.python: an environment the user made
    toolchain_python: Path | None = field(
        metadata=derived("toolchain", "the toolchain's python, checked (ToolchainRef)"))


@dataclass(frozen=True)
class NoQuantizeParams:
    """rknn adds nothing to the shared quantize parameters: it replaces the quantize stage."""


@dataclass(frozen=True)
class CompileParams:
    """quantize (the toolkit's): quantize on the calibration frames, compile, simulate every accuracy frame."""

    model: str
    platform: str
    precision: str
    algorithm: str  # the toolkit's quantized_algorithm
    calibration_frames: int  # the first accuracy inputs calibrate; the rest are held out
    accuracy: AccuracyInputs
    data: DataParams | None
    toolchain: ToolchainRef  # digested as its package set: another toolkit version re-runs this stage


@dataclass(frozen=True)
class PlacementParams:
    """map: placement.json from the compiler's own layer table (no toolchain needed)."""

    model: str
    platform: str


@dataclass(frozen=True)
class BenchmarkParams:
    pipeline: str
    models: tuple[str, ...]
    platform: str
    npu_clock_mhz: float | None
    clock_source: str
    toolkit: str  # "rknn-toolkit2 <version>": the estimate's label
    host: bool  # benchmark.host: time the cropped pre/post sections on this machine
