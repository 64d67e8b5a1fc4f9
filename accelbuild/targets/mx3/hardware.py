"""A typed, read-only view of a validated hardware profile (see ``hardware.schema.json`` for every field).

``load_hardware(path)`` loads and validates a profile file (``accelbuild.targets.profile_files.load_profile``) and
returns a ``HardwareProfile``. Everything is a frozen dataclass of plain values and tuples, so a profile
can be hashed, compared and shared between threads. Per-chip figures stay per chip; multiply by the
number of chips where a total is meant.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbuild.targets.mx3.profiles import MX3_PROFILES
from accelbuild.targets.profile_files import load_profile
from accelbuild.util.files import json_digest

__all__ = ["MX3_PROFILES", "HardwareProfile", "hardware_from_dict", "load_hardware"]


@dataclass(frozen=True)
class MacCores:
    """The MAC cores of one chip."""

    count: int
    macs_per_cycle: int  # per core
    weight_memory_bytes: int  # per core

    @property
    def peak_macs_per_cycle(self) -> int:
        """All MAC cores of the chip together."""
        return self.count * self.macs_per_cycle


@dataclass(frozen=True)
class AluCores:
    """The ALU cores of one chip."""

    count: int
    ops_per_cycle: int  # per core


@dataclass(frozen=True)
class Chip:
    """One chip."""

    clock_mhz: int
    clocks_mhz: tuple[int, ...]
    tops_at_clock: tuple[tuple[int, float], ...]  # (MHz, published TOPS), as listed
    mac_cores: MacCores
    alu_cores: AluCores
    weight_memory_params_8bit: int
    feature_memory_bytes: int
    activation_dtype: str
    weight_bits: tuple[int, ...]
    layer_overhead_cycles: int

    @property
    def peak_macs_per_cycle(self) -> int:
        return self.mac_cores.peak_macs_per_cycle

    @property
    def weight_memory_bytes(self) -> int:
        """Weight memory of the chip in bytes (= its 8-bit weight parameters)."""
        return self.weight_memory_params_8bit

    @property
    def clock_hz(self) -> float:
        return self.clock_mhz * 1e6

    def weight_params(self, bits: int) -> int:
        """How many weights of ``bits`` bits fit the chip's weight memory."""
        if bits not in self.weight_bits:
            raise ValueError(f"{bits}-bit weights are not supported (supported: {self.weight_bits})")
        return self.weight_memory_params_8bit * 8 // bits


@dataclass(frozen=True)
class System:
    max_chips: int
    module_chips: int


@dataclass(frozen=True)
class Link:
    """One kind of data link; rates are per link and per direction."""

    bytes_per_second: float  # effective
    latency_us: float
    count: int = 1
    lanes: int | None = None
    raw_bytes_per_second: float | None = None
    frames_in_flight: int | None = None  # host link: transfers per model and direction at once

    @property
    def total_bytes_per_second(self) -> float:
        """All ``count`` links together, per direction."""
        return self.bytes_per_second * self.count

    def transfer_seconds(self, nbytes: float) -> float:
        """Time to move ``nbytes`` over one link, fixed latency included."""
        return self.latency_us * 1e-6 + nbytes / self.bytes_per_second


@dataclass(frozen=True)
class PacketFormat:
    name: str
    bits_per_value: float
    host_cpu_ns_per_value: float
    chip_to_host: bool

    @property
    def bytes_per_value(self) -> float:
        return self.bits_per_value / 8


@dataclass(frozen=True)
class Approximation:
    """How the chip evaluates one nonlinear op (used by the numeric simulator)."""

    op: str
    method: str
    max_abs_error: float
    segments: int | None = None
    range: tuple[float, float] | None = None


@dataclass(frozen=True)
class Ops:
    """ONNX op types by the kind of core that runs them."""

    mac: frozenset[str]
    alu: frozenset[str]
    fused: frozenset[str]
    layout: frozenset[str]
    approximations: tuple[Approximation, ...] = ()

    def kind(self, op_type: str) -> str | None:
        """"mac", "alu", "fused" or "layout"; ``None`` for an op the chip does not run."""
        for name in ("mac", "alu", "fused", "layout"):
            if op_type in getattr(self, name):
                return name
        return None

    def approximation(self, op_type: str) -> Approximation | None:
        return next((a for a in self.approximations if a.op == op_type), None)


@dataclass(frozen=True)
class Efficiency:
    channel_multiple: int
    filter_multiple: int
    misaligned_factor: float
    grouped_conv_factor: float
    layout_op_factor: float


@dataclass(frozen=True)
class Calibration:
    """A published measurement on this hardware (per ``num_chips`` chips at ``clock_mhz``)."""

    model: str
    gmac: float
    fps: float
    latency_ms: float
    num_chips: int
    clock_mhz: int
    params_m: float | None = None
    input_shape: tuple[int, ...] | None = None

    @property
    def busy_macs_per_cycle_per_chip(self) -> float:
        """MACs per cycle per chip the measurement implies were kept busy."""
        return self.gmac * 1e9 * self.fps / (self.num_chips * self.clock_mhz * 1e6)


@dataclass(frozen=True)
class HardwareProfile:
    """A validated, merged hardware profile."""

    name: str
    description: str
    chip: Chip
    system: System
    host_link: Link
    chip_to_chip_link: Link
    packet_formats: tuple[PacketFormat, ...]
    ops: Ops
    efficiency: Efficiency
    calibration: Calibration | None
    digest: str  # of the merged profile; equals accelbuild.targets.profile_files.profile_digest of its file

    @property
    def peak_macs_per_cycle(self) -> int:
        """Per chip."""
        return self.chip.peak_macs_per_cycle

    @property
    def weight_memory_bytes(self) -> int:
        """Per chip (= its 8-bit weight parameters)."""
        return self.chip.weight_memory_bytes

    def packet_format(self, name: str) -> PacketFormat:
        for fmt in self.packet_formats:
            if fmt.name == name:
                return fmt
        known = ", ".join(f.name for f in self.packet_formats)
        raise KeyError(f"unknown packet format {name!r} (this profile has {known})")

    def bytes_per_value(self, format: str) -> float:  # noqa: A002 - the pipeline's word for it
        """Bytes one tensor value takes on the host link in packet format ``format`` (e.g. "BF16")."""
        return self.packet_format(format).bytes_per_value

    @property
    def calibration_utilisation(self) -> float | None:
        """Share of the peak MACs the calibration measurement kept busy (``None`` without one)."""
        if self.calibration is None:
            return None
        return self.calibration.busy_macs_per_cycle_per_chip / self.peak_macs_per_cycle


def load_hardware(path: Path | str, shown: str | None = None) -> HardwareProfile:
    """Load, merge and validate the profile file at ``path`` (errors as in ``load_profile``)."""
    return hardware_from_dict(load_profile(Path(path), MX3_PROFILES, shown=shown))


def hardware_from_dict(data: dict[str, Any]) -> HardwareProfile:
    """The typed view of a validated, merged profile (as ``load_profile`` returns it)."""
    chip = data["chip"]
    links = data["links"]
    ops = data["ops"]
    calibration = data.get("calibration")
    return HardwareProfile(
        name=data["name"],
        description=data["description"],
        chip=Chip(
            clock_mhz=chip["clock_mhz"],
            clocks_mhz=tuple(chip["clocks_mhz"]),
            tops_at_clock=tuple((int(mhz), float(tops)) for mhz, tops in chip["tops_at_clock"].items()),
            mac_cores=MacCores(**chip["mac_cores"]),
            alu_cores=AluCores(**chip["alu_cores"]),
            weight_memory_params_8bit=chip["weight_memory_params_8bit"],
            feature_memory_bytes=chip["feature_memory_bytes"],
            activation_dtype=chip["activation_dtype"],
            weight_bits=tuple(sorted(chip["weight_bits"])),
            layer_overhead_cycles=chip["layer_overhead_cycles"],
        ),
        system=System(**data["system"]),
        host_link=Link(**links["host"]),
        chip_to_chip_link=Link(**links["chip_to_chip"]),
        packet_formats=tuple(PacketFormat(name=name, **fmt) for name, fmt in data["packet_formats"].items()),
        ops=Ops(
            mac=frozenset(ops["mac"]),
            alu=frozenset(ops["alu"]),
            fused=frozenset(ops["fused"]),
            layout=frozenset(ops["layout"]),
            approximations=tuple(
                Approximation(op=op, method=a["method"], max_abs_error=a["max_abs_error"],
                              segments=a.get("segments"),
                              range=tuple(a["range"]) if "range" in a else None)
                for op, a in ops.get("approximations", {}).items()
            ),
        ),
        efficiency=Efficiency(**data["efficiency"]),
        calibration=None if calibration is None else Calibration(
            **{k: v for k, v in calibration.items() if k != "input_shape"},
            input_shape=tuple(calibration["input_shape"]) if "input_shape" in calibration else None,
        ),
        digest=json_digest(data),
    )
