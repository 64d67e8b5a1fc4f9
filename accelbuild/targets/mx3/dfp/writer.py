"""Writing DFP files. The same :class:`~accelbuild.targets.mx3.dfp.model.Dfp` always gives the same bytes: the header
is canonical JSON, sections go in sorted name order at fixed 16-byte-aligned offsets, and nothing depends
on time, paths or the machine."""

from __future__ import annotations

import hashlib
from pathlib import Path

from accelbuild.targets.mx3.dfp.format import (
    FLAGS,
    FORMAT_VERSION,
    MAGIC,
    MAX_HEADER_LENGTH,
    PREAMBLE,
    TABLE_ENTRY,
    canonical_json,
    plan_layout,
)
from accelbuild.targets.mx3.dfp.model import Dfp
from accelbuild.util.files import write_bytes_atomic


def header_bytes(dfp: Dfp) -> bytes:
    """The header exactly as the file stores it."""
    return canonical_json(dfp.header.to_dict())


def dfp_bytes(dfp: Dfp) -> bytes:
    """The whole file for ``dfp``."""
    header = header_bytes(dfp)
    if len(header) > MAX_HEADER_LENGTH:
        raise ValueError(f"header of {len(header)} bytes is too large for DFP format {FORMAT_VERSION}")
    names = sorted(dfp.sections)
    layout = plan_layout(len(header), [(name, len(dfp.sections[name])) for name in names])
    parts = [PREAMBLE.pack(MAGIC, FORMAT_VERSION, FLAGS, len(header), len(names)), header]
    for span in layout.sections:
        digest = hashlib.sha256(dfp.sections[span.name]).digest()
        parts.append(TABLE_ENTRY.pack(span.name.encode("ascii"), span.offset, span.length, digest))
    position = layout.table_end
    for span in layout.sections:
        parts.append(bytes(span.offset - position))
        parts.append(dfp.sections[span.name])
        position = span.end
    parts.append(bytes(layout.checksum_offset - position))
    body = b"".join(parts)
    return body + hashlib.sha256(body).digest()


def write_dfp(path: Path, dfp: Dfp) -> int:
    """Write ``dfp`` to ``path`` atomically; returns the file size in bytes."""
    data = dfp_bytes(dfp)
    write_bytes_atomic(Path(path), data)
    return len(data)
