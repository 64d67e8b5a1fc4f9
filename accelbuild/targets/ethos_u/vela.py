"""Drive Arm Vela (the Ethos-U compiler) and read what it reports.

Vela runs as its command-line tool (``python -m ethosu.vela``, the interface its documentation
describes; a subprocess, because its C++ backend writes diagnostics straight to the process's stdout)
in a private folder with the network always named ``int8.tflite`` so
its outputs have fixed names: ``int8_vela.tflite`` (the compiled model), ``int8_summary_<system>.csv``
(network summary) and ``int8_per-layer.csv`` (``--verbose-performance``: cycles, memory traffic and
MACs per operator). Its console output (``--show-cpu-operations``) names the operators left on the
CPU. ``require()`` turns a missing ``accelbuild[ethos-u]`` extra into an exit-2 error.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbuild.errors import StageError, UserError

log = logging.getLogger(__name__)

EXTRA = "accelbuild[ethos-u]"
NETWORK = "int8"


class MissingExtraError(UserError):
    """Vela or LiteRT is not installed (exit 2, naming the extra)."""


def require() -> str:
    """Vela's version; raises ``MissingExtraError`` when the extra's packages cannot be imported."""
    missing = [package for module, package in (("ethosu.vela", "ethos-u-vela"), ("ai_edge_litert", "ai-edge-litert"))
               if not _installed(module)]
    if missing:
        raise MissingExtraError(f"family ethos-u needs {', '.join(missing)}: pip install '{EXTRA}'")
    return version()


def _installed(module: str) -> bool:
    """The module can be imported (found without importing it: config loading stays fast)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def version() -> str:
    from importlib.metadata import version as dist_version

    return dist_version("ethos-u-vela")


def accelerators() -> tuple[str, ...]:
    from ethosu.vela.architecture_features import Accelerator

    return tuple(a.value for a in Accelerator)


@dataclass(frozen=True)
class VelaOptions:
    accelerator: str = "ethos-u55-128"
    system_config: str | None = None
    memory_mode: str | None = None
    optimise: str = "Performance"

    def argv(self) -> list[str]:
        args = ["--accelerator-config", self.accelerator, "--optimise", self.optimise]
        if self.system_config:
            args += ["--system-config", self.system_config]
        if self.memory_mode:
            args += ["--memory-mode", self.memory_mode]
        return args


@dataclass
class VelaResult:
    model: bytes                          # the compiled TFLite model
    summary_csv: str
    per_layer_csv: str
    console: str                          # Vela's console output, the work folder's path removed
    summary: dict[str, Any] = field(default_factory=dict)
    layers: list[dict[str, Any]] = field(default_factory=list)
    cpu_ops: list[dict[str, str]] = field(default_factory=list)   # {"op", "name"}
    npu_ops: int = 0


def compile_tflite(data: bytes, options: VelaOptions) -> VelaResult:
    """Compile an int8 TFLite model with Vela; ``StageError`` when Vela refuses it."""
    with tempfile.TemporaryDirectory(prefix="accelbuild-vela-") as tmp:
        work = Path(tmp)
        network = work / f"{NETWORK}.tflite"
        network.write_bytes(data)
        out = work / "out"
        argv = [sys.executable, "-m", "ethosu.vela", str(network), "--output-dir", str(out), *options.argv(),
                "--verbose-performance", "--show-cpu-operations"]
        done = subprocess.run(argv, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        text = done.stdout.decode(errors="replace").replace(str(out), "vela").replace(str(work), ".")
        if done.returncode != 0:
            raise StageError(f"vela {version()} failed (exit {done.returncode}):\n{_tail(text)}")
        summaries = sorted(out.glob(f"{NETWORK}_summary_*.csv"))
        compiled = out / f"{NETWORK}_vela.tflite"
        per_layer = out / f"{NETWORK}_per-layer.csv"
        if not (summaries and compiled.is_file()):
            raise StageError(f"vela {version()} wrote no compiled model:\n{_tail(text)}")
        result = VelaResult(compiled.read_bytes(), summaries[0].read_text(),
                            per_layer.read_text() if per_layer.is_file() else "", text)
    result.summary = parse_summary(result.summary_csv)
    result.layers = parse_per_layer(result.per_layer_csv)
    result.cpu_ops = parse_cpu_ops(result.console)
    result.npu_ops = _count(result.console, "NPU operators")
    return result


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _number(value: str) -> Any:
    """A CSV cell as a number where it is one; Vela writes ``nan`` for a ratio of nothing (a model with every
    operator on the CPU), which is no figure: None."""
    try:
        number = float(value)
    except ValueError:
        return value
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() and "." not in value else number


def parse_summary(text: str) -> dict[str, Any]:
    """Vela's summary CSV (one header row, one row) as a dict of numbers and strings."""
    rows = list(csv.DictReader(io.StringIO(text)))
    return {k: _number(v) for k, v in rows[0].items()} if rows else {}


def parse_per_layer(text: str) -> list[dict[str, Any]]:
    """Vela's per-layer CSV: one dict per NPU operation, keys in snake_case."""
    return [{_key(k): _number(v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]


def _key(header: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", header.lower()).strip("_")


_CPU_LINE = re.compile(r"^\s*CPU:\s*(?P<op>\S+)\s*=\s*(?P<name>.*?)\s*(?:\(outputs .*\))?\s*$")
_WARNING = re.compile(r"operator: (?P<op>\w+), ofm: '(?P<name>.*)'\s*\nReason: (?P<reason>.*)")


def parse_cpu_ops(console: str) -> list[dict[str, str]]:
    """Operators Vela leaves on the CPU: ``--show-cpu-operations`` lines ``CPU: Op = output name``,
    with the TFLite operator and Vela's reason from its supported-operators warnings (by output)."""
    warned = {m["name"]: (m["op"], m["reason"].strip()) for m in _WARNING.finditer(console)}
    found = []
    for line in console.splitlines():
        match = _CPU_LINE.match(line)
        if match:
            op, reason = warned.get(match["name"], (match["op"], ""))
            found.append({"op": op, "name": match["name"], "reason": reason})
    return found


def _count(console: str, label: str) -> int:
    match = re.search(rf"{label}\s*=\s*(\d+)", console)
    return int(match.group(1)) if match else 0
