"""Weights packed at their precision, the way the ``weights`` section stores them.

- 4 bits: two's-complement nibbles, two per byte, the first value in the low nibble; an odd count ends
  with a zero high nibble.
- 8 bits: int8, one per byte.
- 16 bits: int16, little-endian.

Values are packed in C order (``values.ravel()``); the program keeps each tensor's shape. Per-channel
scales are float32, little-endian. :class:`WeightsSection` lays tensors out one after another, each at
a multiple of 16 bytes, and returns the reference the program stores for each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from accelbuild.quantize.precision import check_bits, packed_size, value_range
from accelbuild.targets.mx3.dfp.format import ALIGN


def pack(values: np.ndarray, bits: int) -> bytes:
    """``values`` (integers, any shape) packed at ``bits`` bits; ValueError if one does not fit."""
    check_bits(bits)
    array = np.asarray(values)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"weights must be integers, got dtype {array.dtype}")
    flat = array.ravel()
    if flat.size == 0:
        return b""
    low, high = value_range(bits)
    smallest, largest = int(flat.min()), int(flat.max())
    if smallest < low or largest > high:
        bad = smallest if smallest < low else largest
        raise ValueError(f"weight value {bad} does not fit in {bits} bits ({low}..{high})")
    if bits == 16:
        return flat.astype("<i2").tobytes()
    if bits == 8:
        return flat.astype(np.int8).tobytes()
    nibbles = (flat.astype(np.int8).view(np.uint8) & 0x0F)
    if nibbles.size % 2:
        nibbles = np.concatenate([nibbles, np.zeros(1, np.uint8)])
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8).tobytes()


def unpack(data: bytes, bits: int, count: int) -> np.ndarray:
    """``count`` values packed by :func:`pack`, as a flat int8 (4 and 8 bits) or int16 (16 bits) array.

    ``data`` must be exactly ``packed_size(count, bits)`` bytes long.
    """
    check_bits(bits)
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    expected = packed_size(count, bits)
    if len(data) != expected:
        raise ValueError(f"{count} {bits}-bit weights take {expected} bytes, got {len(data)}")
    if bits == 16:
        return np.frombuffer(data, dtype="<i2").astype(np.int16)
    raw = np.frombuffer(data, dtype=np.uint8)
    if bits == 8:
        return raw.view(np.int8).copy()
    nibbles = np.empty(raw.size * 2, dtype=np.uint8)
    nibbles[0::2] = raw & 0x0F
    nibbles[1::2] = raw >> 4
    signed = nibbles.view(np.int8)
    signed[signed > 7] -= 16
    return signed[:count].copy()


def pack_scales(scales: np.ndarray | Sequence[float]) -> bytes:
    """Per-channel scales as float32 little-endian; ValueError if one is not finite."""
    array = np.asarray(scales, dtype=np.float64).ravel()
    if not np.all(np.isfinite(array)):
        raise ValueError("scales must be finite numbers")
    return array.astype("<f4").tobytes()


def unpack_scales(data: bytes, count: int) -> np.ndarray:
    """``count`` float32 scales packed by :func:`pack_scales`; ``data`` must be exactly 4*count bytes."""
    if count < 0 or len(data) != 4 * count:
        raise ValueError(f"{count} scales take {4 * max(count, 0)} bytes, got {len(data)}")
    return np.frombuffer(data, dtype="<f4").astype(np.float32)


class WeightsSection:
    """Builds a ``weights`` section: each tensor or scale vector starts at a multiple of 16 bytes."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0

    def _append(self, blob: bytes) -> tuple[int, int]:
        padding = -self._size % ALIGN
        if padding:
            self._parts.append(bytes(padding))
        offset = self._size + padding
        self._parts.append(blob)
        self._size = offset + len(blob)
        return offset, len(blob)

    def add(self, values: np.ndarray, bits: int) -> dict[str, Any]:
        """Pack ``values`` at ``bits``; returns the program's reference ``{"offset", "length", "bits", "shape"}``."""
        array = np.asarray(values)
        offset, length = self._append(pack(array, bits))
        return {"offset": offset, "length": length, "bits": bits, "shape": [int(d) for d in array.shape]}

    def add_scales(self, scales: np.ndarray | Sequence[float]) -> int:
        """Pack per-channel scales (float32); returns their offset (the program's ``scales_offset``)."""
        return self._append(pack_scales(scales))[0]

    def to_bytes(self) -> bytes:
        return b"".join(self._parts)


def read_tensor(section: bytes, ref: Mapping[str, Any]) -> np.ndarray:
    """The tensor a program reference ``{"offset", "length", "bits", "shape"}`` points at in ``section``.

    ValueError if the reference does not fit the section or its length does not match its shape.
    """
    offset, length, bits = int(ref["offset"]), int(ref["length"]), int(ref["bits"])
    shape = tuple(int(d) for d in ref["shape"])
    if offset < 0 or length < 0 or offset + length > len(section):
        raise ValueError(f"weights at {offset}+{length} lie outside the {len(section)}-byte weights section")
    count = math.prod(shape)
    return unpack(section[offset:offset + length], bits, count).reshape(shape)
