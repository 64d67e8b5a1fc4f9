"""Where a large artifact splits into parts that other artifacts share, so the cache stores each once.

A closed-loop build keeps 32 programs whose weights sections are byte for byte the same; the imported
model, the cropped one and the user's model hold the same weight tensors. The artifact cache
(``engine/cache.py``) stores a file of at least ``MIN_FILE`` bytes as a list of parts: the *regions* its
format says are worth sharing, and the gaps between them. Each part is stored once by its SHA-256 (or
taken from an input of the task, or kept inline when small), and a restore concatenates them back into
the same bytes, checked against the whole file's SHA-256.

Regions come from the format:
- an ONNX model (``.onnx``): the ``raw_data`` of each initializer tensor of at least ``MIN_REGION``
  bytes, found by walking the protobuf wire format (ModelProto.graph -> GraphProto.initializer ->
  TensorProto.raw_data); the ``onnx`` package parses messages but does not say where their bytes lie;
- a family's program file: its ``ProgramFile.parts`` handler (a program file's section payloads).

Regions only decide what is shared: wrong ones cost space, never bytes (a part is whatever bytes lie
between the cuts, and the restore is verified).
"""

from __future__ import annotations

import logging
from pathlib import Path

from accelbuild.util.onnx_wire import fields

log = logging.getLogger(__name__)

MIN_FILE = 1 << 20  # smaller files are stored whole
MIN_REGION = 64 << 10  # smaller tensors stay in the part around them

_GRAPH, _INITIALIZER, _RAW_DATA = 7, 5, 9  # field numbers: ModelProto.graph, GraphProto.initializer, TensorProto.raw_data
_LEN = 2  # wire type of length-delimited fields


def regions(name: str | Path, data: bytes, family: str | None = None) -> list[tuple[int, int]]:
    """The sorted, non-overlapping (start, end) ranges of ``data`` (a file named ``name``) worth sharing;
    ``family``: the family that wrote it, the only one asked whether it is one of its program files."""
    name = Path(name).name
    if len(data) < MIN_FILE:
        return []
    try:
        if name.lower().endswith(".onnx"):
            found = onnx_tensor_regions(data)
        else:
            found = _program_file_regions(name, data, family)
    except Exception as exc:  # a splitter that trips on odd bytes costs sharing only
        log.debug("no parts for %s: %s", name, exc)
        return []
    return _clean(found, len(data))


def cover(found: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """The regions and the gaps between them: consecutive (start, end) ranges covering [0, size)."""
    parts, position = [], 0
    for start, end in found:
        if start > position:
            parts.append((position, start))
        parts.append((start, end))
        position = end
    if position < size:
        parts.append((position, size))
    return parts


def _clean(found: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    kept, position = [], 0
    for start, end in sorted(found):
        if start >= position and end <= size and end - start >= MIN_REGION:
            kept.append((start, end))
            position = end
    return kept


def _program_file_regions(name: str, data: bytes, family: str | None) -> list[tuple[int, int]]:
    from accelbuild import families

    found = families.program_file_of(name, data[:64], family)
    if found is None or found[1].parts is None:
        return []
    return list(families.handler(found[1].parts)(data))


def onnx_tensor_regions(data: bytes) -> list[tuple[int, int]]:
    """Where the raw_data of the model graph's initializers lies in ``data`` (a serialised ModelProto)."""
    found = []
    for field, wire, start, end in fields(data, 0, len(data)):
        if field != _GRAPH or wire != _LEN:
            continue
        for g_field, g_wire, t_start, t_end in fields(data, start, end):
            if g_field != _INITIALIZER or g_wire != _LEN or t_end - t_start < MIN_REGION:
                continue
            found += [(s, e) for f, w, s, e in fields(data, t_start, t_end) if f == _RAW_DATA and w == _LEN]
    return found
