"""Sizes and durations as people write them on a command line (``500M``, ``2G``, ``1.5`` days)."""

from __future__ import annotations

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TB": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes in ``text`` (a number with an optional binary unit: K, M, G, T, with or without B / iB);
    ValueError for anything else, or a negative size."""
    number = text.strip().upper().rstrip("BIKMGT") or "x"
    unit = text.strip().upper()[len(number):]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or value < 0:
        raise ValueError(f"expected a size such as 500M or 2G, got {text!r}")
    return int(value * _UNITS[unit])


def parse_days(text: str) -> float:
    """A non-negative number of days; ValueError otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise ValueError(f"expected a number of days, got {text!r}")
    return value


def size_text(size: int) -> str:
    """``1.5 GiB``, ``12.0 KiB``, ``300 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"
