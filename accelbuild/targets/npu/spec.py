"""The ``target`` section of family npu and the parameter objects of its stages.

Each parameter object is frozen and holds plain values only (the merged profile as data, no paths),
because the build digests exactly it for doit and the artifact cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from accelbuild.config.spec import derived, key
from accelbuild.stages.params import AccuracyInputs, DataParams

if TYPE_CHECKING:
    from accelbuild.targets.npu.schedule import CompileMode, Effort


@dataclass(frozen=True)
class OffloadSettings:
    """``target.offload``: where the layers the NPU cannot (or may not) run go."""

    ELSEWHERE: ClassVar[dict[str, str]] = {"host_compiler": "resolved into NpuTargetSpec.host_compiler"}

    host: Literal["arm", "dsp"]
    deny_ops: tuple[str, ...] = field(metadata=key("deny_ops", tuple))
    deny_layers: tuple[str, ...] = field(metadata=key("deny_layers", tuple))
    max_subgraphs: int
    fail_on_fallback: bool


@dataclass(frozen=True)
class NpuTargetSpec:
    family: str
    platform: str  # as the YAML writes it (a built-in name or a path)
    profile_path: Path = field(metadata=derived("platform", "the platform's profile, resolved"))
    batch_size: int
    effort: Effort
    compile_mode: CompileMode
    offload: OffloadSettings = field(metadata=derived("offload", "its own section (OffloadSettings)"))
    # offload.host_compiler, resolved: tvm | onnx
    host_compiler: str = field(metadata=derived("offload.host_compiler", "resolved: tvm when it can build"))
    package_name: str | None  # target.package_name; None: <pipeline name>.tar.gz


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
    effort: Effort
    compile_mode: CompileMode
    batch_size: int
    accuracy: AccuracyInputs  # the inputs that check the partition's composition
    data: tuple[DataParams | None, ...]


@dataclass(frozen=True)
class HostCompileParams:
    """``offload.host_compiler: tvm``: compile each Arm host subgraph with TVM, for the board and for this kind
    of machine (the check against onnxruntime, the host time measured here)."""

    tvm: str  # apache-tvm's version
    board: dict[str, Any]  # LLVM target of the platform's Arm cores
    linker: str | None  # "aarch64-linux-gnu-gcc <version>": a shared object; None: an object archive (.tar)
    build: dict[str, Any]  # LLVM target of the programs run here (x86-64)
    accuracy: AccuracyInputs  # the inputs every host subgraph is checked on
    data: tuple[DataParams | None, ...]


@dataclass(frozen=True)
class NpuAssembleParams:
    """Write the package: one program per NPU subgraph, host subgraphs, configs, layer_stats.yaml."""

    pipeline: str
    models: tuple[str, ...]
    package: str  # the package's file name, <name>.tar.gz
    profile: dict[str, Any]  # shipped in the package, so that ``accelbuild bench`` can simulate it alone
    host: HostCompileParams | None = None  # None: host subgraphs ship as float ONNX


@dataclass(frozen=True)
class NpuBenchmarkParams:
    """Simulate the package: timing on the unit timeline, numerics in onnxruntime."""

    pipeline: str
    models: tuple[str, ...]
    accuracy: AccuracyInputs
    data: tuple[DataParams | None, ...]
    calibration_frames: tuple[int, ...]  # per model: its first accuracy inputs calibrated it
    host: bool  # benchmark.host: time the cropped pre/post sections on this machine
    host_compiler: str  # tvm: the host subgraphs run and are timed as TVM built them (host_code.json)
