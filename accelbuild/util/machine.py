"""The machine host figures are measured on (family cpu, and every family's host sections), and the
onnxruntime it runs: described, not assumed.

Read at planning time (cheap: /proc/cpuinfo, the machine id and package metadata, no onnxruntime import),
because they are parameters: a new onnxruntime rebuilds, and another machine (``machine_identity``, not only
another kind of CPU) re-measures.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

# the /proc/cpuinfo flags that decide onnxruntime's x86 kernels (MLAS): vector width, integer dot products
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8")


@dataclass(frozen=True)
class Machine:
    cpu: str
    logical_cores: int
    flags: tuple[str, ...]  # the ISA_FLAGS this CPU has
    arch: str

    def describe(self, onnxruntime_version: str) -> str:
        isa = ", ".join(self.flags) if self.flags else "no AVX2"
        return f"{self.cpu} ({self.logical_cores} logical cores, {self.arch}: {isa}), onnxruntime {onnxruntime_version}"

    def record(self) -> dict[str, object]:
        return {"cpu": self.cpu, "logical_cores": self.logical_cores, "arch": self.arch, "isa": list(self.flags),
                "int8_dot_product": self.int8_dot_product}

    @property
    def vector_isa(self) -> str:
        """What sets onnxruntime's NCHWc block size on x86: AVX-512 (16 floats) or AVX2 (8)."""
        return "avx512f" if "avx512f" in self.flags else "avx2" if "avx2" in self.flags else self.arch

    @property
    def int8_dot_product(self) -> str:
        """The u8s8 instruction onnxruntime's integer GEMM uses here (docs/cpu.md)."""
        if "amx_int8" in self.flags:
            return "AMX-INT8"
        if "avx512_vnni" in self.flags:
            return "AVX512-VNNI (VPDPBUSD, 32-bit accumulation)"
        if "avx_vnni" in self.flags:
            return "AVX-VNNI (VPDPBUSD, 32-bit accumulation)"
        if "avx2" in self.flags:
            return "none: AVX2 VPMADDUBSW (saturating 16-bit pair sums)"
        return "none"


def logical_cores_in(description: str) -> int | None:
    """The logical core count in a ``Machine.describe`` text (a device's, read on that device), if there."""
    match = re.search(r"\((\d+) logical cores", description)
    return int(match.group(1)) if match else None


@lru_cache(maxsize=1)
def this_machine(cpuinfo: Path = Path("/proc/cpuinfo")) -> Machine:
    fields: dict[str, str] = {}
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    cpu = fields.get("model name") or fields.get("Hardware") or platform.processor() or "unknown CPU"
    present = set(fields.get("flags", "").split())
    return Machine(cpu, os.cpu_count() or 1, tuple(f for f in ISA_FLAGS if f in present), platform.machine())


MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))


MACHINE_ID_ENV = "ACCELBUILD_MACHINE_ID"


def machine_identity(files: tuple[Path, ...] = MACHINE_ID_FILES) -> str:
    """Which machine this is, not which kind: two hosts with the same CPU describe alike, but a figure
    measured on one is not a fact about the other. ``ACCELBUILD_MACHINE_ID`` when set (containers made from
    one image share the system's id), else the system's machine id (systemd/dbus), else the host name;
    digested (16 hex digits), so none of them is written anywhere."""
    named = os.environ.get(MACHINE_ID_ENV, "").strip()
    return _digest("env:" + named) if named else _system_identity(files)


@lru_cache(maxsize=4)
def _system_identity(files: tuple[Path, ...]) -> str:
    for path in files:
        try:
            text = path.read_text(errors="replace").strip()
        except OSError:
            continue
        if text:
            break
    else:
        text = "host:" + platform.node()
    return _digest(text)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def onnxruntime_version() -> str:
    return metadata.version("onnxruntime")
