"""Constant tensor data: TFLite element types, float16, sparse (DENSIFY) decoding, dequantization.

Every later stage computes in float32, so a constant is turned into its *compute value* here: float16
and float64 become float32, quantized integers (int8/uint8/int16 weights, int32/int64 biases) become
``scale * (q - zero_point)`` in float32 (per tensor or per axis, as TFLite's DEQUANTIZE computes it),
and plain integers (shapes, axes, indices) stay integers. Sizes are checked against the stored bytes
before any array is built, so a tensor cannot claim more data than its buffer holds.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from accelbuild.errors import InputFileError
from accelbuild.frontends.tflite.reader import Model, Sparsity, Tensor

NUMPY_TYPES: dict[str, type] = {
    "FLOAT32": np.float32, "FLOAT16": np.float16, "FLOAT64": np.float64, "BOOL": np.bool_,
    "INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "UINT16": np.uint16,
    "INT32": np.int32, "UINT32": np.uint32, "INT64": np.int64, "UINT64": np.uint64,
}
FLOAT_TYPES = frozenset({"FLOAT32", "FLOAT16", "FLOAT64"})
QUANTIZED_TYPES = frozenset({"INT8", "UINT8", "INT16", "INT32", "INT64"})
# Types a non-constant tensor may have in a convertible graph, and their ONNX element type.
ACTIVATION_TYPES = {"FLOAT32": TensorProto.FLOAT, "INT32": TensorProto.INT32,
                    "INT64": TensorProto.INT64, "BOOL": TensorProto.BOOL}
IO_QUANTIZED_TYPES = {"INT8": TensorProto.INT8, "UINT8": TensorProto.UINT8, "INT16": TensorProto.INT16}
MAX_DENSE_ELEMENTS = 1 << 28  # a sparse tensor may not expand to more than 1 GiB of float32


def is_quantized(tensor: Tensor) -> bool:
    """Integer data with a scale: its real value is float (weights, biases and activations)."""
    return tensor.quant is not None and tensor.dtype in QUANTIZED_TYPES


def onnx_type(tensor: Tensor) -> int | None:
    """The ONNX element type of a tensor's compute value (None: not representable)."""
    if tensor.dtype in FLOAT_TYPES or is_quantized(tensor):
        return TensorProto.FLOAT
    return ACTIVATION_TYPES.get(tensor.dtype)


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def constant_values(model: Model) -> dict[int, np.ndarray]:
    """Compute values of every tensor that has data."""
    values = {}
    for tensor in model.tensors:
        value = constant_value(model, tensor)
        if value is not None:
            values[tensor.index] = value
    return values


def constant_value(model: Model, tensor: Tensor) -> np.ndarray | None:
    """A constant's compute value (float32 for float/quantized data), or None for activations."""
    if tensor.data is None or tensor.dtype not in NUMPY_TYPES:
        return None
    stored = stored_array(model, tensor)
    if is_quantized(tensor):
        return dequantize(model, tensor, stored)
    if tensor.dtype in FLOAT_TYPES:
        return stored.astype(np.float32)
    return stored


def stored_array(model: Model, tensor: Tensor) -> np.ndarray:
    """The dense array as stored (TFLite element type), densifying sparse tensors."""
    dtype = np.dtype(NUMPY_TYPES[tensor.dtype]).newbyteorder("<")
    data = tensor.data
    if tensor.sparsity is not None:
        if len(data) % dtype.itemsize:
            raise _bad(model, tensor, f"{len(data)} bytes of sparse values is not a whole number of {tensor.dtype}")
        return densify(model, tensor, np.frombuffer(data, dtype=dtype))
    expected = numel(tensor.shape) * dtype.itemsize
    if len(data) != expected:
        raise _bad(model, tensor, f"has {len(data)} bytes of data, but shape {list(tensor.shape)} of "
                                  f"{tensor.dtype} needs {expected}")
    return np.frombuffer(data, dtype=dtype).reshape(tensor.shape)


def dequantize(model: Model, tensor: Tensor, stored: np.ndarray) -> np.ndarray:
    """``scale * (q - zero_point)`` in float32, per tensor or along the quantized axis."""
    quant = tensor.quant
    scale = np.asarray(quant.scale, dtype=np.float32)
    zero = np.asarray(quant.zero_point or (0,), dtype=np.int64)
    if scale.size > 1 or zero.size > 1:
        axis = quant.axis
        if not 0 <= axis < stored.ndim or scale.size != stored.shape[axis] or zero.size not in (1, scale.size):
            raise _bad(model, tensor, f"has {scale.size} scales and {zero.size} zero points for axis {axis} "
                                      f"of shape {list(stored.shape)}")
        bcast = [1] * stored.ndim
        bcast[axis] = -1
        scale = scale.reshape(bcast)
        zero = zero.reshape(bcast) if zero.size > 1 else zero
    return (stored.astype(np.int64) - zero).astype(np.float32) * scale


def densify(model: Model, tensor: Tensor, values: np.ndarray) -> np.ndarray:
    """Expand a sparse constant exactly as TFLite's FormatConverter::SparseToDense does."""
    shape, sparsity = tensor.shape, tensor.sparsity
    _check_sparsity(model, tensor, sparsity)
    if numel(shape) > MAX_DENSE_ELEMENTS:
        raise _bad(model, tensor, f"expands to {numel(shape)} elements, more than this tool accepts")
    coords = _traverse(model, tensor, sparsity)
    if coords.shape[1] != values.size:
        raise _bad(model, tensor, f"has {values.size} sparse values, but its index arrays address "
                                  f"{coords.shape[1]}")
    index = _original_index(sparsity, coords, len(shape))
    if np.any(index < 0) or np.any(index >= np.asarray(shape, dtype=np.int64)[:, None]):
        raise _bad(model, tensor, "has sparse indices outside its dense shape")
    dense = np.zeros(numel(shape), dtype=values.dtype)
    dense[np.ravel_multi_index(tuple(index), shape) if shape else 0] = values
    return dense.reshape(shape)


def _check_sparsity(model: Model, tensor: Tensor, sparsity: Sparsity) -> None:
    rank, blocks = len(tensor.shape), len(sparsity.block_map)
    order = sparsity.traversal_order
    if len(order) != rank + blocks or len(sparsity.dims) != len(order):
        raise _bad(model, tensor, f"has {len(order)} traversal levels and {len(sparsity.dims)} dimension "
                                  f"metadata entries for rank {rank} with {blocks} block dimensions")
    if sorted(order[:rank]) != list(range(rank)) or sorted(order[rank:]) != list(range(rank, rank + blocks)):
        raise _bad(model, tensor, f"has an invalid traversal order {list(order)}")
    if any(not 0 <= d < rank for d in sparsity.block_map):
        raise _bad(model, tensor, f"has an invalid block map {list(sparsity.block_map)}")
    for level in range(rank, rank + blocks):
        if not sparsity.dims[level].dense or sparsity.dims[level].dense_size < 1:
            raise _bad(model, tensor, "has a block dimension that is not dense with a positive size")


def _traverse(model: Model, tensor: Tensor, sparsity: Sparsity) -> np.ndarray:
    """Coordinates (one row per level) of every stored value, in storage order."""
    coords = np.zeros((0, 1), dtype=np.int64)
    position = np.zeros(1, dtype=np.int64)  # the segment index each path continues from
    for dim in sparsity.dims:
        if coords.shape[1] * max(dim.dense_size, 1) > MAX_DENSE_ELEMENTS:
            raise _bad(model, tensor, "has sparse metadata addressing too many elements")
        if dim.dense:
            size = max(dim.dense_size, 0)
            parent = np.repeat(np.arange(position.size), size)
            level = np.tile(np.arange(size, dtype=np.int64), position.size)
            position = position[parent] * size + level
        else:
            parent, position = _csr_children(model, tensor, dim.segments, dim.indices.size, position)
            level = dim.indices[position]
        coords = np.vstack([coords[:, parent], level[None, :]])
    return coords


def _csr_children(model: Model, tensor: Tensor, segments: np.ndarray, n_indices: int,
                  position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each parent position, the range ``segments[p]:segments[p+1]`` of child positions."""
    if position.size and (position.max() + 1 >= segments.size):
        raise _bad(model, tensor, "has an array_segments vector shorter than its parent dimension")
    starts, ends = segments[position], segments[position + 1]
    if np.any(ends < starts) or np.any(starts < 0) or (ends.size and ends.max() > n_indices):
        raise _bad(model, tensor, "has array_segments that are not increasing within array_indices")
    counts = ends - starts
    if counts.sum() > MAX_DENSE_ELEMENTS:
        raise _bad(model, tensor, "has sparse metadata addressing too many elements")
    parent = np.repeat(np.arange(position.size), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return parent, starts[parent] + offsets


def _original_index(sparsity: Sparsity, coords: np.ndarray, rank: int) -> np.ndarray:
    """Map traversal-level coordinates back to dense-tensor coordinates (block dims folded in)."""
    order, dims = sparsity.traversal_order, sparsity.dims
    index = np.zeros((rank, coords.shape[1]), dtype=np.int64)
    for level in range(rank):
        index[order[level]] = coords[level]
    for level in range(rank, len(order)):
        block = order[level] - rank
        block_size = dims[order[rank + block]].dense_size
        dim = sparsity.block_map[block]
        index[dim] = index[dim] * block_size + coords[level]
    return index


def _bad(model: Model, tensor: Tensor, message: str) -> InputFileError:
    return InputFileError(model.path, f"malformed TFLite file: tensor {tensor.name!r} {message}")
