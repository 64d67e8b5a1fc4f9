"""DFP format v1: constants, the canonical header encoding, and where every byte goes.

A DFP file is, in order (all integers little-endian; see docs/dfp.md for the table)::

    preamble   20 bytes   magic b"ACCELDFP", u16 version, u16 flags, u32 header length, u32 section count
    header     canonical JSON (ASCII, sorted keys, no spaces, no NaN)
    table      64 bytes per section: 16-byte NUL-padded name, u64 offset, u64 length, SHA-256 of the payload
    payloads   in sorted name order, each starting at a multiple of 16 (zero padding in between)
    checksum   SHA-256 of every byte before it, starting at a multiple of 16

The layout is a pure function of the header length and the sections' names and lengths
(:func:`plan_layout`): the writer produces it and the reader accepts nothing else, so a file has exactly
one valid encoding of its content.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAGIC = b"ACCELDFP"
FORMAT_VERSION = 1
FLAGS = 0

PREAMBLE = struct.Struct("<8sHHII")  # magic, version, flags, header length, section count
TABLE_ENTRY = struct.Struct("<16sQQ32s")  # name, offset, length, SHA-256 of the payload
CHECKSUM_SIZE = 32
ALIGN = 16
NAME_SIZE = 16
MAX_SECTIONS = 256
MAX_HEADER_LENGTH = 0xFFFF_FFFF

REQUIRED_SECTIONS = ("cores", "program", "weights")
_NAME = re.compile(r"[a-z][a-z0-9_]{0,15}")


def align(offset: int) -> int:
    """The first multiple of :data:`ALIGN` at or after ``offset``."""
    return -(-offset // ALIGN) * ALIGN


def section_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a section, or None when it can."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return (f"invalid section name {name!r}: use 1 to {NAME_SIZE} characters a-z, 0-9 and _, "
                "starting with a letter")
    return None


def canonical_json(value: Any) -> bytes:
    """The one byte form of a JSON value: sorted keys, no spaces, ASCII (\\u escapes), no NaN/Infinity.

    Raises ValueError (or TypeError) for values JSON cannot hold.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


@dataclass(frozen=True)
class Span:
    """Where one section's payload sits in the file."""

    name: str
    offset: int
    length: int

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(frozen=True)
class Layout:
    """Byte positions of every part of a DFP file."""

    header_length: int
    sections: tuple[Span, ...]

    @property
    def table_offset(self) -> int:
        return PREAMBLE.size + self.header_length

    @property
    def table_end(self) -> int:
        return self.table_offset + TABLE_ENTRY.size * len(self.sections)

    @property
    def checksum_offset(self) -> int:
        last = self.sections[-1].end if self.sections else self.table_end
        return align(last)

    @property
    def size(self) -> int:
        return self.checksum_offset + CHECKSUM_SIZE


def plan_layout(header_length: int, sections: Sequence[tuple[str, int]]) -> Layout:
    """The layout of a file with this header length and these (name, length) sections, in file order."""
    spans = []
    position = PREAMBLE.size + header_length + TABLE_ENTRY.size * len(sections)
    for name, length in sections:
        offset = align(position)
        spans.append(Span(name, offset, length))
        position = offset + length
    return Layout(header_length, tuple(spans))
