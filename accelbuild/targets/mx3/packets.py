"""Bytes a frame costs on the host link in each packet format.

FP32 4 bytes and BF16 2 bytes per value; RGB888 1 byte per channel value (inputs only); GBFloat80
packs groups of 8 channel values into 80 bits (8 signed 8-bit mantissas sharing one 16-bit exponent),
so a pixel with C channels costs ceil(C / 8) * 10 bytes. Channels are dimension 1 of tensors of rank
3 or more (ONNX's channel-first layout) and the last dimension otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

FORMATS = ("FP32", "BF16", "GBFloat80", "RGB888")
OUTPUT_FORMATS = ("FP32", "BF16", "GBFloat80")  # RGB888 is an input format only
_BYTES_PER_VALUE = {"FP32": 4, "BF16": 2, "RGB888": 1}
GROUP = 8
GROUP_BYTES = 10
# What a profile's packet_formats must say (checked by profile_rules): one definition of each size.
BITS_PER_VALUE = {**{name: 8 * size for name, size in _BYTES_PER_VALUE.items()}, "GBFloat80": GROUP_BYTES * 8 // GROUP}


def bytes_per_frame(shape: Sequence[int], fmt: str) -> int:
    values = math.prod(shape)
    if fmt in _BYTES_PER_VALUE:
        return values * _BYTES_PER_VALUE[fmt]
    if fmt != "GBFloat80":
        raise ValueError(f"unknown packet format {fmt!r}")
    channels = shape[1] if len(shape) >= 3 else (shape[-1] if shape else 1)
    pixels = values // channels if channels else 0
    return pixels * math.ceil(channels / GROUP) * GROUP_BYTES


def table(shapes: Mapping[str, Sequence[int]], formats: Sequence[str]) -> dict[str, dict[str, int]]:
    """Bytes per frame of each tensor in each format."""
    return {name: {fmt: bytes_per_frame(shape, fmt) for fmt in formats} for name, shape in shapes.items()}


def packet_record(ai: onnx.ModelProto, input_format: str, output_format: str) -> dict[str, Any]:
    """quantize.json's ``packets``: bytes per frame of the AI section's inputs and outputs in every format."""
    def shapes(values: list[onnx.ValueInfoProto]) -> dict[str, list[int]]:
        return {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in values}

    inputs = shapes([v for v in ai.graph.input if v.name not in {t.name for t in ai.graph.initializer}])
    outputs = shapes(list(ai.graph.output))
    in_table = table(inputs, FORMATS)
    out_table = table(outputs, OUTPUT_FORMATS)
    return {
        "input_format": input_format,
        "output_format": output_format,
        "inputs": in_table,
        "outputs": out_table,
        "input_bytes_per_frame": sum(t[input_format] for t in in_table.values()),
        "output_bytes_per_frame": sum(t[output_format] for t in out_table.values()),
    }
