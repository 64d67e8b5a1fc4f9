"""Integer precisions: the one definition of which bit widths exist, how each is stored in an ONNX
initializer, its value range, and how many bytes a count of values takes when packed.

Families choose among these (their profile lists the ones their hardware stores, checked against
``BITS``); the quantizer, the mx3 DFP writer and the simulator all read them from here.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

BITS = (4, 8, 16)
STORAGE = {4: np.dtype(ml_dtypes.int4), 8: np.dtype(np.int8), 16: np.dtype(np.int16)}


def check_bits(bits: int) -> None:
    if bits not in BITS:
        raise ValueError(f"weight precision must be 4, 8 or 16 bits, got {bits!r}")


def value_range(bits: int) -> tuple[int, int]:
    """The smallest and largest signed integer ``bits`` bits hold."""
    check_bits(bits)
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def packed_size(count: int, bits: int) -> int:
    """Bytes that ``count`` values take at ``bits`` bits, packed without gaps (4-bit: two per byte)."""
    check_bits(bits)
    return (count * bits + 7) // 8
