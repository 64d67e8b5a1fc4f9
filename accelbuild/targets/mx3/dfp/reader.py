"""Reading DFP files, trusting nothing in them.

Every problem is an :class:`~accelbuild.errors.InputFileError` (exit 2, no traceback). The reader checks
the magic and the format version first, then parses the whole layout (every length against the file
size, before slicing anything) and the header, and verifies the checksums. Which message is shown:

- bad magic, unsupported version or flags: always that message;
- the file is shorter than its layout needs: ``truncated: ...``;
- any other problem, in a file whose trailing checksum does not match: ``checksum mismatch: ...``
  (a flipped byte is far likelier than a writer bug);
- any other problem in a file whose checksum matches (written by a buggy or hostile writer): the precise
  message.

Work and memory are bounded by the file size: lengths are checked before use, the section count is
capped, and the header JSON is parsed only once its bytes are known to be in the file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from accelbuild.errors import InputFileError
from accelbuild.targets.mx3.dfp.format import (
    CHECKSUM_SIZE,
    FLAGS,
    FORMAT_VERSION,
    MAGIC,
    MAX_SECTIONS,
    PREAMBLE,
    REQUIRED_SECTIONS,
    TABLE_ENTRY,
    Span,
    align,
    canonical_json,
    section_name_problem,
)
from accelbuild.targets.mx3.dfp.model import Dfp, Header

CHECKSUM_MESSAGE = "checksum mismatch: the file was altered or damaged"


class _Reject(Exception):
    """A reason to reject the file; ``always`` shows it even when the file checksum does not match."""

    def __init__(self, message: str, always: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.always = always


def read_dfp(path: Path | str, shown: str | None = None) -> Dfp:
    """The program in the DFP file at ``path``; ``shown`` is how messages name the file."""
    shown = shown or str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise InputFileError(shown, f"cannot read: {error.strerror or error}") from None
    return parse_dfp(data, shown)


def parse_dfp(data: bytes, shown: str) -> Dfp:
    """The program in ``data``, the bytes of a DFP file; ``shown`` is how messages name the file."""
    data = bytes(data)
    _check_preamble(data, shown)
    sealed = hashlib.sha256(data[:-CHECKSUM_SIZE]).digest() == data[-CHECKSUM_SIZE:]
    try:
        dfp = _parse(data)
    except _Reject as reject:
        raise InputFileError(shown, reject.message if sealed or reject.always else CHECKSUM_MESSAGE) from None
    if not sealed:
        raise InputFileError(shown, CHECKSUM_MESSAGE)
    return dfp


def _check_preamble(data: bytes, shown: str) -> None:
    head = data[:len(MAGIC)]
    if head != MAGIC[:len(head)] or not data:
        raise InputFileError(shown, "not a DFP file (bad magic)")
    if len(data) < PREAMBLE.size:
        raise InputFileError(shown, f"truncated: the file has {len(data)} bytes, fewer than the "
                                    f"{PREAMBLE.size}-byte preamble")
    _, version, flags, _, _ = PREAMBLE.unpack_from(data)
    if version != FORMAT_VERSION:
        raise InputFileError(shown, f"DFP format version {version} is not supported "
                                    f"(this accelbuild reads {FORMAT_VERSION})")
    if flags != FLAGS:
        raise InputFileError(shown, f"unknown flags 0x{flags:04x} (DFP format {FORMAT_VERSION} defines none)")


def _parse(data: bytes) -> Dfp:
    _, _, _, header_length, count = PREAMBLE.unpack_from(data)
    size = len(data)
    header_end = PREAMBLE.size + header_length
    if header_end > size:
        raise _Reject(f"truncated: header ends at byte {header_end} but the file has {size} bytes", True)
    if count > MAX_SECTIONS:
        raise _Reject(f"{count} sections; DFP format {FORMAT_VERSION} allows at most {MAX_SECTIONS}")
    table_end = header_end + TABLE_ENTRY.size * count
    if table_end > size:
        raise _Reject(f"truncated: section table ends at byte {table_end} but the file has {size} bytes", True)
    entries = _read_table(data, header_end, count)
    end = align(entries[-1][0].end if entries else table_end)
    _check_size(data, end + CHECKSUM_SIZE)
    _check_padding(data, table_end, [span for span, _ in entries], end)
    header = _read_header(data[PREAMBLE.size:header_end])
    sections = {}
    for span, digest in entries:
        payload = data[span.offset:span.end]
        if hashlib.sha256(payload).digest() != digest:
            raise _Reject(f"section '{span.name}' checksum mismatch")
        sections[span.name] = payload
    for name in REQUIRED_SECTIONS:
        if name not in sections:
            raise _Reject(f"missing section '{name}'")
    try:
        return Dfp(header, sections)
    except ValueError as error:
        raise _Reject(str(error)) from None


def _read_table(data: bytes, table_offset: int, count: int) -> list[tuple[Span, bytes]]:
    """The section table's entries, each checked against the file size and the canonical layout."""
    entries: list[tuple[Span, bytes]] = []
    position = table_offset + TABLE_ENTRY.size * count
    size = len(data)
    for index in range(count):
        raw_name, offset, length, digest = TABLE_ENTRY.unpack_from(data, table_offset + index * TABLE_ENTRY.size)
        name = _section_name(raw_name, index)
        if entries:
            previous = entries[-1][0].name
            if name == previous:
                raise _Reject(f"duplicate section '{name}'")
            if name < previous:
                raise _Reject(f"sections out of order: '{name}' after '{previous}' (sorted names expected)")
        expected = align(position)
        if offset != expected:
            if offset < position:
                other = f"section '{entries[-1][0].name}'" if entries else "the section table"
                raise _Reject(f"section '{name}' at byte {offset} overlaps {other}")
            if offset > size:
                raise _Reject(f"section '{name}' starts at byte {offset}, past the end of the file ({size} bytes)")
            raise _Reject(f"section '{name}' starts at byte {offset}; the layout puts it at byte {expected}")
        span = Span(name, offset, length)
        if span.end > size:
            raise _Reject(f"truncated: section '{name}' ends at byte {span.end} but the file has {size} bytes",
                          True)
        entries.append((span, digest))
        position = span.end
    return entries


def _section_name(raw: bytes, index: int) -> str:
    text = raw.rstrip(b"\0")
    try:
        name = text.decode("ascii")
    except UnicodeDecodeError:
        raise _Reject(f"section {index}: invalid name {text!r}") from None
    if section_name_problem(name):
        raise _Reject(f"section {index}: invalid name {text!r}")
    return name


def _check_size(data: bytes, expected: int) -> None:
    size = len(data)
    if size < expected:
        raise _Reject(f"truncated: the file has {size} bytes but its layout needs {expected} "
                      f"(through the {CHECKSUM_SIZE}-byte checksum)", True)
    if size > expected:
        # Data appended to an intact DFP: say so. Otherwise a damaged length field is the likelier cause.
        intact = hashlib.sha256(data[:expected - CHECKSUM_SIZE]).digest() == data[expected - CHECKSUM_SIZE:expected]
        raise _Reject(f"{size - expected} unexpected bytes after the end of the DFP (byte {expected})", intact)


def _check_padding(data: bytes, table_end: int, spans: list[Span], checksum_offset: int) -> None:
    position = table_end
    for span in spans + [Span("checksum", checksum_offset, 0)]:
        if data[position:span.offset].strip(b"\0"):
            where = f"section '{span.name}'" if span.name != "checksum" else "the checksum"
            raise _Reject(f"non-zero padding before {where}")
        position = span.end


def _read_header(raw: bytes) -> Header:
    try:
        value = json.loads(raw.decode("ascii"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise _Reject("header is not valid JSON (a non-ASCII byte)") from None
    except RecursionError:
        raise _Reject("header is not valid JSON (nested too deeply)") from None
    except ValueError:
        raise _Reject("header is not valid JSON") from None
    try:
        canonical = canonical_json(value) == raw
    except (ValueError, TypeError, RecursionError):
        canonical = False
    if not canonical:
        raise _Reject("header is not canonical JSON (sorted keys, no spaces, ASCII)")
    try:
        return Header.from_dict(value)
    except ValueError as error:
        raise _Reject(f"header: {error}") from None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not allowed")
