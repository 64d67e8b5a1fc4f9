"""The ``target`` section of family npu and the parameter objects of its stages.

Each parameter object is frozen and holds plain values only (the merged profile as data, no paths),
because the build digests exactly it for doit and the artifact cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbuild.stages.params import AccuracyInputs, DataParams


@dataclass(frozen=True)
class OffloadSettings:
    """``target.offload``: where the layers the NPU cannot (or may not) run go."""

    host: str  # arm | dsp
    deny_ops: tuple[str, ...]
    deny_layers: tuple[str, ...]
    max_subgraphs: int
    fail_on_fallback: bool


@dataclass(frozen=True)
class NpuTargetSpec:
    family: str
    platform: str  # as the YAML writes it (a built-in name or a path)
    profile_path: Path
    batch_size: int
    effort: str
    compile_mode: str
    offload: OffloadSettings


@dataclass(frozen=True)
class NpuQuantizeParams:
    """What the quantize stage needs from the family: which layers the host will run (they stay float)."""

    profile: dict[str, Any]
    offload: OffloadSettings


@dataclass(frozen=True)
class NpuMapParams:
    """Partition every model and schedule its NPU subgraphs."""

    pipeline: str
    models: tuple[str, ...]
    profile: dict[str, Any]
    offload: OffloadSettings
    effort: str
    compile_mode: str
    batch_size: int
    accuracy: AccuracyInputs  # the inputs that check the partition's composition
    data: tuple[DataParams | None, ...]


@dataclass(frozen=True)
class NpuAssembleParams:
    """Write the package: one program per NPU subgraph, host subgraphs, configs, layer_stats.yaml."""

    pipeline: str
    models: tuple[str, ...]
    package: str  # the package's file name, <name>.tar.gz
    profile: dict[str, Any]  # shipped in the package, so that ``accelbuild bench`` can simulate it alone


@dataclass(frozen=True)
class NpuBenchmarkParams:
    """Simulate the package: timing on the unit timeline, numerics in onnxruntime."""

    pipeline: str
    models: tuple[str, ...]
    accuracy: AccuracyInputs
    data: tuple[DataParams | None, ...]
    calibration_frames: tuple[int, ...] = ()  # per model: its first accuracy inputs calibrated it
    host: bool = True  # benchmark.host: time the cropped pre/post sections on this machine
