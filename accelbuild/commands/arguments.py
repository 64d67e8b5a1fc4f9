"""argparse types of the command line's options (kept light: parsing imports no build machinery)."""

from __future__ import annotations

import argparse

from accelbuild.util.sizes import parse_days, parse_size

# The largest dimension: frontends.input_shapes.MAX_TENSOR_ELEMENTS (not imported here, to keep parsing light),
# the most elements one tensor may hold, as the schema's input_shapes says.
MAX_DIMENSION = 1 << 28


def input_shape(text: str) -> tuple[str, list[int]]:
    """``--input-shape NAME=H,W,C``."""
    name, sep, dims = text.partition("=")
    try:
        shape = [int(d) for d in dims.split(",")]
    except ValueError:
        shape = []
    if not sep or not name or not shape or any(d < 1 or d > MAX_DIMENSION for d in shape):
        raise argparse.ArgumentTypeError(f"expected NAME=H,W,C (whole numbers 1..{MAX_DIMENSION}), got {text!r}")
    return name, shape


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def size(text: str) -> int:
    """``--max-size 500M``."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def days(text: str) -> float:
    """``--older-than DAYS``."""
    try:
        return parse_days(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
