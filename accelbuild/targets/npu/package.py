"""The npu package ``<name>.tar.gz`` and its NPU program files (format: docs/npu_package.md).

The archive is deterministic: members in sequence order, mtime 0, owner 0/0 with empty names, mode
0644, and a gzip header without file name or time, so the same build gives the same bytes. Members:

    <model>_<id>.npu     one program per NPU subgraph (header + QDQ ONNX subgraph)
    <model>_<id>.onnx    one float ONNX model per host subgraph (arm or dsp)
    <model>_<id>.so      a host subgraph compiled by TVM for the board's Arm cores (offload.host_compiler: tvm;
                         ``.tar`` of its object files without a cross linker); its ``.onnx`` stays as the source
    <model>_<id>.json    one config per subgraph: {"name", "sequence", "processor", "model", "file",
                         "inputs", "outputs", "config_params": {"desired_batch_size", "actual_batch_size", ...}};
                         a compiled host subgraph adds "source", "compiler", "target" and "abi"
    layer_stats.yaml     per layer of every NPU subgraph: name, unit, start_cycle, end_cycle
    profile.json         the platform's merged hardware profile (``accelbuild bench`` simulates from it)

A program file is ``MAGIC``, then two little-endian uint32 (header length, model length), then the
header (canonical JSON: the subgraph's schedule and I/O) and the model (ONNX bytes).
"""

from __future__ import annotations

import gzip
import io
import json
import struct
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbuild.errors import InputFileError

MAGIC = b"ABNPUPRG"  # accelbuild NPU program
FORMAT_VERSION = 1
PROFILE = "profile.json"
_LENGTHS = struct.Struct("<II")


@dataclass(frozen=True)
class Program:
    header: dict[str, Any]
    model: bytes  # the subgraph's QDQ ONNX model


def program_bytes(program: Program) -> bytes:
    header = json.dumps({"format": FORMAT_VERSION, **program.header}, sort_keys=True,
                        separators=(",", ":")).encode("utf-8")
    return MAGIC + _LENGTHS.pack(len(header), len(program.model)) + header + program.model


def read_program(data: bytes, shown: str) -> Program:
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _LENGTHS.size:
        raise InputFileError(shown, "not an accelbuild NPU program (bad magic)")
    header_len, model_len = _LENGTHS.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _LENGTHS.size
    if len(data) != start + header_len + model_len:
        raise InputFileError(shown, f"truncated NPU program: {len(data)} bytes, the header says "
                                    f"{start + header_len + model_len}")
    try:
        header = json.loads(data[start:start + header_len])
    except ValueError as exc:
        raise InputFileError(shown, f"NPU program header is not JSON: {exc}") from None
    if header.get("format") != FORMAT_VERSION:
        raise InputFileError(shown, f"NPU program format {header.get('format')!r}; this accelbuild reads "
                                    f"{FORMAT_VERSION}")
    return Program(header, data[start + header_len:])


def package_bytes(members: Sequence[tuple[str, bytes]]) -> bytes:
    """A deterministic .tar.gz of ``members`` in the given order."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def read_package(path: Path, shown: str | None = None) -> dict[str, bytes]:
    """The members of a package, by name, in archive order."""
    shown = shown or str(path)
    members = read_archive(path, shown)
    if not any(name.endswith(".json") for name in members):
        raise InputFileError(shown, "not an accelbuild npu package (no subgraph configs)")
    return members


def read_archive(path: Path, shown: str) -> dict[str, bytes]:
    """The files of a .tar.gz, by name, in archive order."""
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            members = {}
            for info in tar.getmembers():
                if not info.isfile():
                    continue
                handle = tar.extractfile(info)
                assert handle is not None
                members[info.name] = handle.read()
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise InputFileError(shown, f"not a readable .tar.gz package: {exc}") from None
    return members


def source_of(config: dict[str, Any]) -> str:
    """The member holding a subgraph's model: its program (NPU), its float ONNX (host), or for a host
    subgraph compiled by TVM, the ONNX its ``.so`` was compiled from."""
    return config.get("source", config["file"])


def configs(members: dict[str, bytes]) -> list[dict[str, Any]]:
    """The subgraph configs of a package, in sequence order."""
    found = [json.loads(data) for name, data in members.items() if name.endswith(".json") and name != PROFILE]
    return sorted(found, key=lambda c: c["sequence"])


def describe(members: dict[str, bytes], shown: str, size: int) -> str:
    """``accelbuild inspect`` of a package: its platform, subgraphs in sequence and members."""
    profile = json.loads(members[PROFILE]) if PROFILE in members else {}
    subgraphs = configs(members)
    lines = [f"{shown}: accelbuild npu package, {size:,} bytes, platform {profile.get('name', '?')}",
             f"  {len(subgraphs)} subgraph(s) in sequence:"]
    for c in subgraphs:
        params = c.get("config_params", {})
        detail = (f"batch {params['actual_batch_size']} of {params['desired_batch_size']} desired, "
                  f"{params['cycles']:,} cycles" if c["processor"] == "npu" else
                  f"{c['compiler']} for {c['target'].get('mcpu', c['target']['mtriple'])}, from {c['source']}"
                  if "compiler" in c else "float ONNX")
        lines.append(f"    {c['sequence']:>2}  {c['name']:<24} {c['processor']:<4} {c['file']:<28} {detail}")
        lines.append(f"        inputs: {', '.join(c['inputs'])}")
        lines.append(f"        outputs: {', '.join(c['outputs'])}")
    lines.append("  members:")
    lines.extend(f"    {name:<32} {len(data):>12,} bytes" for name, data in members.items())
    return "\n".join(lines) + "\n"


def is_package(path: Path) -> bool:
    """Whether ``path`` looks like a package (gzip magic) rather than a DFP."""
    try:
        with path.open("rb") as handle:
            return handle.read(2) == b"\x1f\x8b"
    except OSError:
        return False
