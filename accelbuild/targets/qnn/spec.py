"""The ``target`` section of a pipeline of family qnn, typed, and the parameter objects of its stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from accelbuild.config.spec import derived
from accelbuild.stages.params import AccuracyInputs, DataParams
from accelbuild.toolchains import ToolchainRef


@dataclass(frozen=True)
class QnnTargetSpec:
    family: Literal["qnn"]
    soc: str
    activations: Literal["uint8", "uint16"]
    toolchain_python: Path | None = field(
        metadata=derived("toolchain", "the toolchain's python, checked (ToolchainRef)")
    )


@dataclass(frozen=True)
class NoQuantizeParams:
    """qnn adds nothing to the quantize stage's parameters (its activation bits are in the shared ones)."""


@dataclass(frozen=True)
class CompileParams:
    """map: the HTP context binary of quantized.onnx for the SoC, and where each node went."""

    model: str
    soc: str
    soc_model: int
    toolchain: ToolchainRef  # digested as its package set


@dataclass(frozen=True)
class BenchmarkParams:
    pipeline: str
    models: tuple[str, ...]
    soc: str
    soc_model: int
    accuracy: AccuracyInputs
    data: tuple[DataParams | None, ...]
    calibration_frames: tuple[int, ...]
    toolchain: ToolchainRef
