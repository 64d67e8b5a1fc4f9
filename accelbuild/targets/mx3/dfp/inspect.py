"""Human-readable summary of a DFP (what ``accelbuild inspect FILE.dfp`` prints). Deterministic text: the
same program always gives the same lines. Header fields the format does not define (``extra``) are shown
as they are, so this module does not need to know what the assembler puts there."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from accelbuild.targets.mx3.dfp.format import FORMAT_VERSION, PREAMBLE, plan_layout
from accelbuild.targets.mx3.dfp.model import Dfp, Port
from accelbuild.targets.mx3.dfp.writer import header_bytes

_MAX_TEXT = 60
_MAX_ITEMS = 8


def describe(dfp: Dfp, size: int) -> str:
    """The summary of ``dfp``, a file of ``size`` bytes, as lines of text (ending with a newline)."""
    header = dfp.header
    lines = [
        f"DFP format {FORMAT_VERSION}, {size:,} bytes",
        f"compiler    {_text(header.compiler)}",
        f"chip gen    {_text(header.chip_gen)}",
        f"chip count  {header.num_chips}",
        "",
        f"models ({len(header.models)})",
    ]
    lines += _ports_table(dfp)
    chips = header.extra.get("chips")
    if isinstance(chips, list):
        lines += ["", f"chips ({len(chips)})"]
        lines += [f"  {_chip_line(index, chip)}" for index, chip in enumerate(chips)]
    others = sorted(key for key in header.extra if key != "chips" or not isinstance(chips, list))
    if others:
        lines += ["", "other header fields"]
        lines += [f"  {_text(key)}: {_brief(header.extra[key])}" for key in others]
    lines += ["", *_sections_table(dfp, size)]
    return "\n".join(lines) + "\n"


def _port_cells(direction: str, port: Port) -> list[str]:
    return [direction, _text(port.name), "x".join(str(d) for d in port.shape) or "scalar", _text(port.packet_format),
            f"layer {_text(port.layer)}"]


def _ports_table(dfp: Dfp) -> list[str]:
    rows: list[list[str] | str] = []
    for model in dfp.header.models:
        rows.append(f"  {_text(model.name)}")
        rows += [_port_cells("input", p) for p in model.inputs]
        rows += [_port_cells("output", p) for p in model.outputs]
    cells = [row for row in rows if isinstance(row, list)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return [row if isinstance(row, str) else "    " + _columns(row, widths) for row in rows]


def _columns(row: list[str], widths: list[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()


def _chip_line(index: int, chip: Any) -> str:
    if not isinstance(chip, dict):
        return f"chip {index}: {_brief(chip)}"
    label = chip.get("chip", index)
    fields = ", ".join(f"{_text(k)}={_brief(chip[k])}" for k in sorted(chip) if k != "chip")
    return f"chip {_brief(label)}: {fields}" if fields else f"chip {_brief(label)}"


def _sections_table(dfp: Dfp, size: int) -> list[str]:
    header = header_bytes(dfp)
    names = sorted(dfp.sections)
    layout = plan_layout(len(header), [(name, len(dfp.sections[name])) for name in names])
    rows = [["section", "offset", "bytes", "sha256"],
            ["(header)", f"{PREAMBLE.size:,}", f"{len(header):,}", ""]]
    for span in layout.sections:
        digest = hashlib.sha256(dfp.sections[span.name]).hexdigest()[:16]
        rows.append([span.name, f"{span.offset:,}", f"{span.length:,}", digest])
    rows.append(["total", "", f"{size:,}", ""])
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].rjust(widths[1]), row[2].rjust(widths[2]), row[3]]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _text(value: str) -> str:
    """A string from the file, safe to print on one line."""
    if value.isprintable() and len(value) <= _MAX_TEXT:
        return value
    shown = json.dumps(value) if not value.isprintable() else value
    return shown if len(shown) <= _MAX_TEXT else shown[:_MAX_TEXT - 3] + "..."


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _brief(value: Any) -> str:
    """A JSON value in a few characters: scalars as they are, short flat lists and objects inline."""
    if isinstance(value, str):
        return _text(value)
    if _is_scalar(value):
        return json.dumps(value)
    if isinstance(value, list):
        if len(value) <= _MAX_ITEMS and all(_is_scalar(v) for v in value):
            return _text("[" + ", ".join(_brief(v) for v in value) + "]")
        return f"[{len(value)} items]"
    if isinstance(value, dict):
        if len(value) <= 4 and all(_is_scalar(v) for v in value.values()):
            return _text("{" + ", ".join(f"{_text(k)}: {_brief(value[k])}" for k in sorted(value)) + "}")
        return f"{{{len(value)} keys}}"
    return _text(repr(value))
