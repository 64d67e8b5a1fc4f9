"""Integer precisions: the one definition of which bit widths exist, how each is stored (a numpy dtype,
an ONNX initializer type), its value range, and how many bytes a count of values takes when packed.

Families choose among these (their profile lists the ones their hardware stores, checked against
``BITS``); the quantizer, the mx3 DFP writer and its simulator all read them from here. Light to import
(planning a build reads ``BITS``): numpy types are looked up on use.
"""

from __future__ import annotations

from typing import Any

BITS = (4, 8, 16)


def check_bits(bits: int) -> None:
    if bits not in BITS:
        raise ValueError(f"weight precision must be 4, 8 or 16 bits, got {bits!r}")


def storage_dtype(bits: int) -> Any:
    """The numpy dtype an ONNX initializer of ``bits``-bit integers is built from."""
    import ml_dtypes
    import numpy as np

    check_bits(bits)
    return {4: np.dtype(ml_dtypes.int4), 8: np.dtype(np.int8), 16: np.dtype(np.int16)}[bits]


def bits_of_onnx_type(data_type: int) -> int | None:
    """The precision of an ONNX integer initializer type (INT4/INT8/INT16), else None."""
    from onnx import TensorProto

    bits: dict[int, int] = {TensorProto.INT4: 4, TensorProto.INT8: 8, TensorProto.INT16: 16}
    return bits.get(data_type)


def value_range(bits: int) -> tuple[int, int]:
    """The smallest and largest signed integer ``bits`` bits hold."""
    check_bits(bits)
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def packed_size(count: int, bits: int) -> int:
    """Bytes that ``count`` values take at ``bits`` bits, packed without gaps (4-bit: two per byte)."""
    check_bits(bits)
    return (count * bits + 7) // 8
