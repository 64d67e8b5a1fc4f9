"""A typed, read-only view of a validated ``npu`` hardware profile (``npu_hardware.schema.json`` has every field).

``load_npu_hardware(path)`` loads, merges (``inherits``) and validates a profile file with the generic
loader (``accelbuild.targets.profile_files``) and returns an ``NpuHardware``; ``npu_hardware(data)`` is the
typed view of an already validated profile (what a stage's parameters carry). Everything is frozen plain
values and tuples, so a profile can be hashed, compared and shared between threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from accelbuild.errors import ConfigError
from accelbuild.targets.profile_files import ProfileKind, load_profile, looks_like_path
from accelbuild.util.files import json_digest

NPU_PROFILES = ProfileKind("npu_hardware.schema.json", "accelbuild.targets.npu.profiles",
                           "accelbuild.targets.npu.profile_rules")

UnitKind = Literal["matrix", "vector", "pool", "layout"]
HostKind = Literal["arm", "dsp"]


@dataclass(frozen=True)
class Unit:
    """One NPU compute unit (its name is the report's timeline name)."""

    name: str
    kind: UnitKind
    ops: frozenset[str]
    efficiency: float
    bits16_factor: float
    macs_per_cycle: int = 0          # matrix
    align: tuple[int, int] = (1, 1)  # matrix: input-, output-channel granularity
    depthwise_efficiency: float = 1.0  # matrix: reduction lanes a depthwise convolution keeps busy (of align[0])
    # matrix: the same for a depthwise kernel larger than 3x3 (None: as depthwise_efficiency)
    large_depthwise_efficiency: float | None = None
    # matrix: the efficiency of a 1x1 convolution, a Gemm or a MatMul by constant weights (None: efficiency)
    pointwise_efficiency: float | None = None
    strided_efficiency: float | None = None  # matrix: of a dense convolution with a stride above 1 (None: efficiency)
    dynamic_matmul_efficiency: float = 1.0  # matrix: the share a MatMul of two run-time tensors keeps (attention)
    elements_per_cycle: int = 0      # vector / pool / layout
    overhead_cycles: int | None = None  # fixed cycles to start one layer here (None: npu.layer_overhead_cycles)


@dataclass(frozen=True)
class SramLevel:
    name: str
    bytes: int


@dataclass(frozen=True)
class Memory:
    sram: tuple[SramLevel, ...]
    weight_buffer_bytes: int
    feature_buffer_bytes: int
    ddr_bytes_per_second: float
    ddr_efficiency: float
    load_unit: str
    store_unit: str

    @property
    def effective_ddr_bytes_per_second(self) -> float:
        """What the NPU's DMA achieves: peak x efficiency."""
        return self.ddr_bytes_per_second * self.ddr_efficiency


@dataclass(frozen=True)
class Processor:
    """A host processor (the Arm cluster or a DSP) with a throughput model for host layers."""

    name: str
    cores: int
    gmacs_per_second: float
    gelements_per_second: float
    layer_overhead_us: float
    shares_npu: bool = False

    def layer_seconds(self, macs: float, elements: float) -> float:
        """One host layer on one core: its MACs at the MAC rate, or its elements at the element rate."""
        work = macs / (self.gmacs_per_second * 1e9) if macs else elements / (self.gelements_per_second * 1e9)
        return self.layer_overhead_us * 1e-6 + work


@dataclass(frozen=True)
class Crossing:
    """Cost of one hand-over between NPU and host (into or out of an NPU subgraph, the model's input and
    output included): one synchronisation (task submission or completion, cache maintenance) however many
    tensors cross, and each tensor's float bytes converted and copied by the host. ``call_us``: the host's
    fixed time per inference call (the runtime's entry, input and output set-up, the wait), once per batch."""

    sync_us: float
    bytes_per_second: float
    call_us: float = 0.0

    def seconds(self, tensor_float_bytes: list[float]) -> float:
        """One hand-over of these tensors (nothing crosses: free)."""
        if not tensor_float_bytes:
            return 0.0
        return self.sync_us * 1e-6 + sum(tensor_float_bytes) / self.bytes_per_second


@dataclass(frozen=True)
class Quantization:
    weight_bits: tuple[int, ...]
    activation_bits: tuple[int, ...]
    activation_symmetric: bool
    concat_shared_scale: bool


@dataclass(frozen=True)
class Support:
    """Operator constraints (read by ``support.py``)."""

    max_rank: int
    max_channels: int | None
    conv_max_kernel: int
    conv_max_stride: int
    conv_max_dilation: int
    conv_grouped: Literal["none", "depthwise", "any"]
    conv_transpose: bool
    pool_max_kernel: int
    pool_max_stride: int
    resize_modes: tuple[str, ...]
    resize_max_scale: float
    resize_integer_scale_only: bool
    softmax_last_axis_only: bool
    op_max_rank: tuple[tuple[str, int], ...] = ()  # (op type, highest rank) where it differs from max_rank
    divide_by_tensor: bool = False
    op_max_kernel: tuple[tuple[str, int], ...] = ()  # (op type, largest window) where it differs from conv / pool
    op_max_elements: tuple[tuple[str, int], ...] = ()  # (op type, most elements of a frame's tensor)

    def rank_limit(self, op_type: str) -> int:
        """Highest tensor rank the NPU takes for ``op_type``."""
        return dict(self.op_max_rank).get(op_type, self.max_rank)

    def kernel_limit(self, op_type: str) -> int:
        """Largest kernel / window height or width the NPU takes for ``op_type`` (a convolution or a pooling)."""
        default = self.pool_max_kernel if op_type in ("MaxPool", "AveragePool") else self.conv_max_kernel
        return dict(self.op_max_kernel).get(op_type, default)

    def element_limit(self, op_type: str) -> int | None:
        """Most elements (C x H x W, one frame) an ``op_type`` tensor may have on the NPU; None: no limit."""
        return dict(self.op_max_elements).get(op_type)


@dataclass(frozen=True)
class CalibrationPoint:
    """A published figure the profile is checked against. ``setup`` / ``call_us``: the measurement setup that
    took it and its runtime's host time per call, when that differs from the profile's ``crossing.call_us``."""

    model: str
    input_size: int
    metric: Literal["latency_ms", "fps"]
    value: float
    batch_size: int
    source: str
    setup: str | None = None
    call_us: float | None = None


@dataclass(frozen=True)
class NpuHardware:
    """A validated, merged ``npu`` profile."""

    name: str
    description: str
    vendor: str
    clock_mhz: int
    cores: int
    layer_overhead_cycles: int
    tile_overhead_cycles: int
    min_tiles: int
    max_batch: int
    max_subgraphs: int
    units: tuple[Unit, ...]
    memory: Memory
    arm: Processor
    dsp: Processor | None
    crossing: Crossing
    fusion: tuple[tuple[str, ...], ...]
    quantization: Quantization
    support: Support
    timeline: tuple[str, ...]
    calibration: tuple[CalibrationPoint, ...]
    sources: tuple[tuple[str, str], ...]
    digest: str  # of the merged profile
    channels_last: bool = False  # feature maps stored NHWC: an NCHW <-> NHWC Transpose moves no data
    dma_overlap: float = 1.0  # share of a layer's DDR transfers the unit computes through (1: all; 0: it waits)

    @property
    def clock_hz(self) -> float:
        return self.clock_mhz * 1e6

    @property
    def has_dsp(self) -> bool:
        """Whether ``offload.host: dsp`` is possible on this platform."""
        return self.dsp is not None

    def layer_overhead(self, unit: Unit) -> int:
        """Fixed cycles to start one layer on ``unit``: its own set-up, or the profile's per-layer one."""
        return self.layer_overhead_cycles if unit.overhead_cycles is None else unit.overhead_cycles

    def unit_for(self, op_type: str) -> Unit | None:
        """The unit that runs ``op_type`` (``None``: the NPU does not run it)."""
        return self._op_units().get(op_type)

    def _op_units(self) -> dict[str, Unit]:
        cached = self.__dict__.get("_op_units_cache")
        if cached is None:
            cached = {op: unit for unit in self.units for op in sorted(unit.ops)}
            object.__setattr__(self, "_op_units_cache", cached)
        return cached

    def unit(self, name: str) -> Unit:
        for unit in self.units:
            if unit.name == name:
                return unit
        raise KeyError(name)

    def host(self, kind: HostKind) -> Processor:
        """The processor that runs host layers for ``offload.host`` = ``kind``; ``ValueError`` for "dsp" on a
        platform without one (a target checks ``has_dsp`` first, to report at the user's key)."""
        if kind == "dsp":
            if self.dsp is None:
                raise ValueError(f"profile {self.name} has no DSP")
            return self.dsp
        return self.arm

    def fusion_heads(self) -> dict[str, tuple[tuple[str, ...], ...]]:
        """Fusion chains by their first op type (longest first)."""
        heads: dict[str, list[tuple[str, ...]]] = {}
        for chain in self.fusion:
            heads.setdefault(chain[0], []).append(chain)
        return {op: tuple(sorted(chains, key=lambda c: (-len(c), c))) for op, chains in sorted(heads.items())}


def builtin_profiles() -> dict[str, Path]:
    """Built-in profile names and their files."""
    return NPU_PROFILES.builtins()


def load_npu_hardware(platform: str | Path, shown: str | None = None) -> NpuHardware:
    """A built-in platform name (``tda4vm``, ...) or a profile file path, loaded, merged and validated.

    Raises ``ConfigError`` (positioned; a ``ProfileError`` for several problems) or ``InputFileError``.
    """
    text = str(platform)
    builtins = builtin_profiles()
    if text in builtins:
        path = builtins[text]
    elif looks_like_path(text):
        path = Path(text)
    else:
        from accelbuild.config.schema_check import did_you_mean

        raise ConfigError(shown or text, f"unknown npu platform {text!r}{did_you_mean(text, sorted(builtins))} "
                                         f"(built-in: {', '.join(sorted(builtins))}; or a path to a profile YAML)")
    return npu_hardware(load_profile(path, NPU_PROFILES, shown=shown or text, copy=False))


def npu_hardware(data: dict[str, Any]) -> NpuHardware:
    """The typed view of a validated, merged profile (as ``load_profile`` returns it)."""
    npu, mem, host, sup = data["npu"], data["memory"], data["host"], data["support"]
    conv, pool, resize = sup["conv"], sup["pool"], sup["resize"]
    return NpuHardware(
        name=data["name"], description=data["description"], vendor=data["vendor"],
        clock_mhz=npu["clock_mhz"], cores=npu["cores"], layer_overhead_cycles=npu["layer_overhead_cycles"],
        tile_overhead_cycles=npu["tile_overhead_cycles"], min_tiles=npu.get("min_tiles", 4),
        max_batch=npu["max_batch"], max_subgraphs=npu["max_subgraphs"], channels_last=npu.get("channels_last", False),
        dma_overlap=float(npu.get("dma_overlap", 1.0)),
        units=tuple(_unit(name, u) for name, u in data["units"].items()),
        memory=Memory(sram=tuple(SramLevel(s["name"], s["bytes"]) for s in mem["sram"]),
                      weight_buffer_bytes=mem["weight_buffer_bytes"], feature_buffer_bytes=mem["feature_buffer_bytes"],
                      ddr_bytes_per_second=float(mem["ddr_bytes_per_second"]),
                      ddr_efficiency=float(mem["ddr_efficiency"]), load_unit=mem["load_unit"],
                      store_unit=mem["store_unit"]),
        arm=Processor(**host["arm"]),
        dsp=None if host["dsp"] is None else Processor(**host["dsp"]),
        crossing=Crossing(sync_us=float(data["crossing"]["sync_us"]),
                          bytes_per_second=float(data["crossing"]["bytes_per_second"]),
                          call_us=float(data["crossing"].get("call_us", 0.0))),
        fusion=tuple(tuple(chain) for chain in data["fusion"]),
        quantization=Quantization(**{k: (tuple(sorted(v)) if isinstance(v, list) else v)
                                     for k, v in data["quantization"].items()}),
        support=Support(max_rank=sup["max_rank"], max_channels=sup.get("max_channels"),
                        conv_max_kernel=conv["max_kernel"], conv_max_stride=conv["max_stride"],
                        conv_max_dilation=conv["max_dilation"], conv_grouped=conv["grouped"],
                        conv_transpose=conv.get("transpose", True),
                        pool_max_kernel=pool["max_kernel"], pool_max_stride=pool["max_stride"],
                        resize_modes=tuple(resize["modes"]), resize_max_scale=float(resize["max_scale"]),
                        resize_integer_scale_only=resize["integer_scale_only"],
                        softmax_last_axis_only=sup["softmax_last_axis_only"],
                        op_max_rank=tuple(sorted(sup.get("op_max_rank", {}).items())),
                        divide_by_tensor=sup.get("divide_by_tensor", False),
                        op_max_kernel=tuple(sorted(sup.get("op_max_kernel", {}).items())),
                        op_max_elements=tuple(sorted(sup.get("op_max_elements", {}).items()))),
        timeline=tuple(data["timeline"]),
        calibration=tuple(CalibrationPoint(**c) for c in data.get("calibration", [])),
        sources=tuple(sorted(data["sources"].items())),
        digest=json_digest(data),
    )


def _unit(name: str, u: dict[str, Any]) -> Unit:
    return Unit(name=name, kind=u["kind"], ops=frozenset(u["ops"]), efficiency=float(u["efficiency"]),
                bits16_factor=float(u["bits16_factor"]), macs_per_cycle=u.get("macs_per_cycle", 0),
                align=tuple(u.get("align", (1, 1))),
                depthwise_efficiency=float(u.get("depthwise_efficiency", 1.0)),
                large_depthwise_efficiency=_optional_float(u, "large_depthwise_efficiency"),
                pointwise_efficiency=_optional_float(u, "pointwise_efficiency"),
                strided_efficiency=_optional_float(u, "strided_efficiency"),
                dynamic_matmul_efficiency=float(u.get("dynamic_matmul_efficiency", 1.0)),
                elements_per_cycle=u.get("elements_per_cycle", 0), overhead_cycles=u.get("overhead_cycles"))


def _optional_float(mapping: dict[str, Any], key: str) -> float | None:
    return float(mapping[key]) if key in mapping else None
