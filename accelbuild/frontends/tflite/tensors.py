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
from accelbuild.frontends.tflite.reader import Model, Tensor

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
MAX_DENSE_ELEMENTS = 1 << 27  # a sparse tensor may not expand to more than 512 MiB of float32


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
    """A constant's compute value (float32 for float/quantized data), or None for activations; a variable
    (recurrent state) is its value after allocation or a reset: zeros."""
    if tensor.variable and tensor.data is None and tensor.dtype in NUMPY_TYPES and not is_quantized(tensor):
        return np.zeros(tensor.shape, np.float32 if tensor.dtype in FLOAT_TYPES else NUMPY_TYPES[tensor.dtype])
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
    if not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise _bad(model, tensor, "has quantization scales that are negative or not finite")
    # exact integer difference, one rounding of the product: what TFLite's float32 arithmetic gives
    return ((stored.astype(np.float64) - zero.astype(np.float64)) * scale.astype(np.float64)).astype(np.float32)


def densify(model: Model, tensor: Tensor, values: np.ndarray) -> np.ndarray:
    """Expand a sparse constant exactly as TFLite's FormatConverter::SparseToDense does."""
    shape = tensor.shape
    if numel(shape) > MAX_DENSE_ELEMENTS:
        raise _bad(model, tensor, f"expands to {numel(shape)} elements, more than this tool accepts")
    sizes, factors = _level_geometry(model, tensor)
    flat = _traverse(model, tensor, sizes, factors)
    if flat.size != values.size:
        raise _bad(model, tensor, f"has {values.size} sparse values, but its index arrays address {flat.size}")
    dense = np.zeros(numel(shape), dtype=values.dtype)
    dense[flat] = values
    return dense.reshape(shape)


def _level_geometry(model: Model, tensor: Tensor) -> tuple[list[int], list[int]]:
    """Per traversal level: its size, and how far one step along it moves in the dense tensor."""
    shape, sparsity = tensor.shape, tensor.sparsity
    rank, order, block_map = len(shape), sparsity.traversal_order, sparsity.block_map
    if len(order) != rank + len(block_map) or len(sparsity.dims) != len(order):
        raise _bad(model, tensor, f"has {len(order)} traversal levels and {len(sparsity.dims)} dimension "
                                  f"metadata entries for rank {rank} with {len(block_map)} block dimensions")
    if sorted(order) != list(range(len(order))) or sorted(order[:rank]) != list(range(rank)):
        raise _bad(model, tensor, f"has an invalid traversal order {list(order)}")
    if len(set(block_map)) != len(block_map) or any(not 0 <= d < rank for d in block_map):
        raise _bad(model, tensor, f"has an invalid block map {list(block_map)}")
    block = {d: sparsity.dims[order[rank + b]].dense_size for b, d in enumerate(block_map)}
    if any(size < 1 or shape[d] % size for d, size in block.items()):
        raise _bad(model, tensor, f"has block sizes {list(block.values())} that do not divide its shape")
    strides = [numel(shape[d + 1:]) for d in range(rank)]
    sizes, factors = [], []
    for level, dim in enumerate(order):
        if level < rank:
            sizes.append(shape[dim] // block.get(dim, 1))
            factors.append(strides[dim] * block.get(dim, 1))
        else:
            sizes.append(block[block_map[dim - rank]])
            factors.append(strides[block_map[dim - rank]])
    for level, dim in enumerate(sparsity.dims):
        if dim.dense and dim.dense_size != sizes[level]:
            raise _bad(model, tensor, f"has dense level {level} of size {dim.dense_size}, expected {sizes[level]}")
    return sizes, factors


def _traverse(model: Model, tensor: Tensor, sizes: list[int], factors: list[int]) -> np.ndarray:
    """Dense (flat) index of every stored value, in storage order, level by level."""
    limit = numel(tensor.shape)
    flat = np.zeros(1, dtype=np.int64)
    position = np.zeros(1, dtype=np.int64)  # the segment index each path continues from
    for level, dim in enumerate(tensor.sparsity.dims):
        if dim.dense:
            if flat.size * sizes[level] > limit:
                raise _bad(model, tensor, "has sparse metadata addressing too many elements")
            parent = np.repeat(np.arange(flat.size), sizes[level])
            coord = np.tile(np.arange(sizes[level], dtype=np.int64), flat.size)
            position = position[parent] * sizes[level] + coord
        else:
            parent, position = _csr_children(model, tensor, dim.segments, dim.indices.size, position, limit)
            coord = dim.indices[position]
            if coord.size and (coord.min() < 0 or coord.max() >= sizes[level]):
                raise _bad(model, tensor, f"has sparse indices outside [0, {sizes[level]}) at level {level}")
        flat = flat[parent] + coord * factors[level]
    return flat


def _csr_children(model: Model, tensor: Tensor, segments: np.ndarray, n_indices: int,
                  position: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """For each parent position, the range ``segments[p]:segments[p+1]`` of child positions."""
    if position.size and (position.max() + 1 >= segments.size):
        raise _bad(model, tensor, "has an array_segments vector shorter than its parent dimension")
    starts, ends = segments[position], segments[position + 1]
    if np.any(ends < starts) or np.any(starts < 0) or (ends.size and ends.max() > n_indices):
        raise _bad(model, tensor, "has array_segments that are not increasing within array_indices")
    counts = ends - starts
    if counts.sum() > limit:
        raise _bad(model, tensor, "has sparse metadata addressing too many elements")
    parent = np.repeat(np.arange(position.size), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return parent, starts[parent] + offsets


def _bad(model: Model, tensor: Tensor, message: str) -> InputFileError:
    return InputFileError(model.path, f"malformed TFLite file: tensor {tensor.name!r} {message}")
