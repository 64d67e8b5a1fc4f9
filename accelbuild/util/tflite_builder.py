"""A deterministic writer of TFLite flatbuffers (the ``tflite`` package's schema and generated builder
functions): tensors (constant data, per-tensor or per-axis quantization, sparsity), operators with builtin
options given as a dict of snake_case fields (``{"padding": "SAME", "fused_activation_function":
"RELU6"}``), custom operators with raw custom options bytes, a main subgraph and the subgraphs its operators call
(:meth:`TFLiteBuilder.subgraph`, :meth:`TFLiteBuilder.add_subgraph`). Buffers and custom options can
be stored inline or after the flatbuffer (the offset/size "large model" format). Equal calls give equal
bytes. Used by family ethos-u's int8 TFLite writer and by the test model builders.
"""


from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flatbuffers
import numpy as np
import tflite

SCHEMA_VERSION = 3
NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16, "int32": np.int32, "uint8": np.uint8,
          "int64": np.int64, "bool": np.bool_, "int16": np.int16, "int8": np.int8}
_INDEX_VECTOR = {np.dtype(np.int32): "Int32Vector", np.dtype(np.uint16): "Uint16Vector",
                 np.dtype(np.uint8): "Uint8Vector"}
_ENUMS = {"padding": tflite.Padding, "fused_activation_function": tflite.ActivationFunctionType,
          "mode": tflite.MirrorPadMode, "out_type": tflite.TensorType}
# builtin -> options table, for the operators the tests and canned models use
OPTIONS_TABLE = {
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions", "FULLY_CONNECTED": "FullyConnectedOptions",
    "ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions",
    "CONCATENATION": "ConcatenationOptions", "RESHAPE": "ReshapeOptions", "SQUEEZE": "SqueezeOptions",
    "PAD": "PadOptions", "PADV2": "PadV2Options", "MAX_POOL_2D": "Pool2DOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions", "MEAN": "ReducerOptions", "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions", "LEAKY_RELU": "LeakyReluOptions",
    "SOFTMAX": "SoftmaxOptions", "DEPTH_TO_SPACE": "DepthToSpaceOptions",
    "SPACE_TO_DEPTH": "SpaceToDepthOptions", "STRIDED_SLICE": "StridedSliceOptions",
    "SLICE": "SliceOptions", "SPLIT": "SplitOptions", "SPLIT_V": "SplitVOptions",
    "TRANSPOSE": "TransposeOptions", "GATHER": "GatherOptions", "HARD_SWISH": "HardSwishOptions",
    "DENSIFY": "DensifyOptions", "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions",
    "EXPAND_DIMS": "ExpandDimsOptions", "PACK": "PackOptions", "MIRROR_PAD": "MirrorPadOptions",
    "NEG": "NegOptions", "SHAPE": "ShapeOptions", "EQUAL": "EqualOptions", "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions", "SUM": "ReducerOptions", "SELECT_V2": "SelectV2Options",
    "SQUARE": "SquareOptions", "BATCH_MATMUL": "BatchMatMulOptions", "GELU": "GeluOptions",
    "REDUCE_PROD": "ReducerOptions", "REDUCE_ANY": "ReducerOptions", "REDUCE_ALL": "ReducerOptions",
    "ARG_MAX": "ArgMaxOptions", "ARG_MIN": "ArgMinOptions", "ONE_HOT": "OneHotOptions", "CUMSUM": "CumsumOptions",
    "LOCAL_RESPONSE_NORMALIZATION": "LocalResponseNormalizationOptions", "L2_POOL_2D": "Pool2DOptions",
    "UNPACK": "UnpackOptions", "REVERSE_SEQUENCE": "ReverseSequenceOptions", "L2_NORMALIZATION": "L2NormOptions",
    "BUCKETIZE": "BucketizeOptions", "FAKE_QUANT": "FakeQuantOptions", "CONV_3D": "Conv3DOptions", "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "SPARSE_TO_DENSE": "SparseToDenseOptions", "RNN": "RNNOptions", "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions", "LSTM": "LSTMOptions",
    "BIDIRECTIONAL_SEQUENCE_RNN": "BidirectionalSequenceRNNOptions",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions", "SVDF": "SVDFOptions",
    "STABLEHLO_PAD": "StablehloPadOptions", "REDUCE_WINDOW": "ReduceWindowOptions",
    "IF": "IfOptions", "WHILE": "WhileOptions", "CALL_ONCE": "CallOnceOptions", "VAR_HANDLE": "VarHandleOptions",
    "STABLEHLO_COMPOSITE": "StableHLOCompositeOptions", "STABLEHLO_REDUCE_WINDOW": "StablehloReduceWindowOptions",
    "STABLEHLO_SCATTER": "StablehloScatterOptions", "STABLEHLO_GATHER": "StablehloGatherOptions",
    "EMBEDDING_LOOKUP_SPARSE": "EmbeddingLookupSparseOptions",
}


_INT64_VECTORS = frozenset({"StablehloPadOptions", "StablehloReduceWindowOptions", "StablehloScatterOptions",
                            "StablehloGatherOptions"})  # options tables whose integer vectors are int64


def _module(name: str) -> Any:
    return importlib.import_module(f"tflite.{name}")


@dataclass(frozen=True)
class Quant:
    """``real = scale * (q - zero_point)``; several scales mean per-axis along ``axis``."""

    scale: Sequence[float]
    zero_point: Sequence[int]
    axis: int = 0


@dataclass(frozen=True)
class SparseDim:
    """A traversal level: dense (``dense_size``) or CSR (``segments``/``indices``, dtype picks the vector)."""

    dense_size: int = 0
    segments: np.ndarray | None = None
    indices: np.ndarray | None = None


@dataclass(frozen=True)
class SparseSpec:
    traversal_order: Sequence[int]
    block_map: Sequence[int]
    dims: Sequence[SparseDim]


@dataclass
class _Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    buffer: int
    quant: Quant | None
    sparsity: SparseSpec | None
    signature: tuple[int, ...] | None
    variable: bool = False


@dataclass
class _Op:
    opcode: int
    inputs: list[int]
    outputs: list[int]
    options: dict[str, Any] | None
    table: str | None
    custom_options: bytes | None = None


class TFLiteBuilder:
    """Collects tensors and operators of one subgraph and serializes them as a TFLite model."""

    def __init__(self, seed: int = 0, description: str = "accelbuild.testing.tflite_models") -> None:
        self.rng = np.random.default_rng(seed)
        self.description = description
        self.tensors: list[_Tensor] = []
        self.ops: list[_Op] = []
        self.opcodes: list[tuple[int, str, int]] = []
        self.buffers: list[bytes] = [b""]
        self.called: list[tuple[TFLiteBuilder, list[int], list[int], str]] = []  # subgraphs 1, 2, ...

    def subgraph(self) -> TFLiteBuilder:
        """A builder of another subgraph of this model: tensors and operators of its own, this model's
        buffers and operator codes; :meth:`add_subgraph` gives it its index."""
        sub = TFLiteBuilder.__new__(TFLiteBuilder)
        sub.rng, sub.description, sub.opcodes, sub.buffers = self.rng, self.description, self.opcodes, self.buffers
        sub.tensors, sub.ops, sub.called = [], [], []
        return sub

    def add_subgraph(self, sub: TFLiteBuilder, inputs: Sequence[int], outputs: Sequence[int], name: str) -> int:
        """Store ``sub`` (from :meth:`subgraph`) with its inputs and outputs; its subgraph index."""
        self.called.append((sub, list(inputs), list(outputs), name))
        return len(self.called)

    def add_tensor(self, name: str, shape: Sequence[int], dtype: str = "float32", data: Any = None,
                   quant: Quant | None = None, sparsity: SparseSpec | None = None,
                   shape_signature: Sequence[int] | None = None, variable: bool = False) -> int:
        """A tensor; ``data`` makes it a constant (for sparse tensors: the stored values only); ``variable``
        marks state LiteRT keeps between invocations."""
        buffer = 0
        if data is not None:
            array = np.asarray(data, dtype=NUMPY_DTYPES[dtype])
            if sparsity is None and array.size != math.prod(shape):
                raise ValueError(f"{name}: {array.size} values for shape {list(shape)}")
            self.buffers.append(array.astype(array.dtype.newbyteorder("<")).tobytes())
            buffer = len(self.buffers) - 1
        self.tensors.append(_Tensor(name, tuple(int(d) for d in shape), dtype, buffer, quant, sparsity,
                                    None if shape_signature is None else tuple(shape_signature), variable))
        return len(self.tensors) - 1

    def const(self, name: str, data: Any, dtype: str = "float32", quant: Quant | None = None) -> int:
        array = np.asarray(data)
        return self.add_tensor(name, array.shape, dtype, array, quant)

    def shape(self, index: int) -> tuple[int, ...]:
        return self.tensors[index].shape

    def add_op(self, builtin: str, inputs: Sequence[int], outputs: Sequence[int],
               options: dict[str, Any] | None = None, custom_code: str = "", version: int = 1,
               custom_options: bytes | None = None) -> None:
        """An operator; ``builtin`` is a BuiltinOperator name (``"CUSTOM"`` with ``custom_code``, and
        ``custom_options`` stored as the operator's raw custom options bytes)."""
        key = (getattr(tflite.BuiltinOperator, builtin), custom_code, version)
        if key not in self.opcodes:
            self.opcodes.append(key)
        table = OPTIONS_TABLE.get(builtin) if options is not None else None
        self.ops.append(_Op(self.opcodes.index(key), list(inputs), list(outputs), options, table, custom_options))

    def finish(self, inputs: Sequence[int], outputs: Sequence[int], external_buffers: bool = False) -> bytes:
        """Serialize; with ``external_buffers`` constant data and custom options follow the flatbuffer
        (buffer ``offset``/``size``, operator ``large_custom_options_offset``/``size``)."""
        if not external_buffers:
            return self._serialize(inputs, outputs, None)
        # the blobs stored after the flatbuffer: every buffer, then every operator's custom options
        blobs = [*self.buffers, *(op.custom_options or b"" for op in self.ops)]
        probe = self._serialize(inputs, outputs, [(1 << 40, len(data)) for data in blobs])
        placed, end = [], _align(len(probe), 16)  # (offset, size) of each blob after the flatbuffer
        for data in blobs:
            placed.append((end, len(data)) if data else (0, 0))
            end = _align(end + len(data), 16)
        out = bytearray(self._serialize(inputs, outputs, placed))
        if len(out) != len(probe):
            raise AssertionError("flatbuffer size changed between passes")
        for (offset, _), data in zip(placed, blobs):
            if data:
                out.extend(bytes(offset - len(out)) + data)
        return bytes(out)

    # ------------------------------------------------------------------ serialization

    def _serialize(self, inputs: Sequence[int], outputs: Sequence[int],
                   placed: list[tuple[int, int]] | None) -> bytes:
        b = flatbuffers.Builder(1024)
        buffers = [self._buffer(b, data, None if placed is None else placed[i])
                   for i, data in enumerate(self.buffers)]
        tensors = [self._tensor(b, t) for t in self.tensors]
        ops = [self._operator(b, op, None if placed is None else placed[len(self.buffers) + i])
               for i, op in enumerate(self.ops)]
        graphs = [self._subgraph(b, tensors, ops, inputs, outputs)]
        for sub, sub_inputs, sub_outputs, name in self.called:
            graphs.append(sub._subgraph(b, [sub._tensor(b, t) for t in sub.tensors],
                                        [sub._operator(b, op, None) for op in sub.ops], sub_inputs, sub_outputs, name))
        codes = [self._opcode(b, *key) for key in self.opcodes]
        description = b.CreateString(self.description)
        m = _module("Model")
        vectors = [_offsets(b, codes), _offsets(b, graphs), _offsets(b, buffers)]
        m.Start(b)
        m.AddVersion(b, SCHEMA_VERSION)
        m.AddOperatorCodes(b, vectors[0])
        m.AddSubgraphs(b, vectors[1])
        m.AddDescription(b, description)
        m.AddBuffers(b, vectors[2])
        b.Finish(m.End(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    def _buffer(self, b: flatbuffers.Builder, data: bytes, placed: tuple[int, int] | None) -> int:
        vector = None
        if data and placed is None:
            b.StartVector(1, len(data), 16)
            b.head -= len(data)
            b.Bytes[b.head:b.head + len(data)] = data
            vector = b.EndVector()
        m = _module("Buffer")
        m.Start(b)
        if vector is not None:
            m.AddData(b, vector)
        if placed is not None and data:
            m.AddOffset(b, placed[0])
            m.AddSize(b, placed[1])
        return m.End(b)

    def _tensor(self, b: flatbuffers.Builder, t: _Tensor) -> int:
        name = b.CreateString(t.name)
        shape = b.CreateNumpyVector(np.asarray(t.shape, dtype=np.int32))
        signature = None if t.signature is None else b.CreateNumpyVector(np.asarray(t.signature, np.int32))
        quant = None if t.quant is None else _quantization(b, t.quant)
        sparsity = None if t.sparsity is None else _sparsity(b, t.sparsity)
        m = _module("Tensor")
        m.Start(b)
        m.AddShape(b, shape)
        m.AddType(b, getattr(tflite.TensorType, t.dtype.upper()))
        m.AddBuffer(b, t.buffer)
        m.AddName(b, name)
        if t.variable:
            m.AddIsVariable(b, True)
        for add, value in ((m.AddQuantization, quant), (m.AddSparsity, sparsity), (m.AddShapeSignature, signature)):
            if value is not None:
                add(b, value)
        return m.End(b)

    def _operator(self, b: flatbuffers.Builder, op: _Op, placed: tuple[int, int] | None) -> int:
        inputs = b.CreateNumpyVector(np.asarray(op.inputs, dtype=np.int32))
        outputs = b.CreateNumpyVector(np.asarray(op.outputs, dtype=np.int32))
        options = _options(b, op.table, op.options) if op.table else None
        inline = op.custom_options is not None and not (placed is not None and op.custom_options)
        custom = b.CreateByteVector(op.custom_options) if inline else None
        m = _module("Operator")
        m.Start(b)
        m.AddOpcodeIndex(b, op.opcode)
        m.AddInputs(b, inputs)
        m.AddOutputs(b, outputs)
        if options is not None and hasattr(tflite.BuiltinOptions, op.table):
            m.AddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions, op.table))
            m.AddBuiltinOptions(b, options)
        elif options is not None:  # the newer operators' tables (StableHLO) live in builtin_options_2
            m.AddBuiltinOptions2Type(b, getattr(tflite.BuiltinOptions2, op.table))
            m.AddBuiltinOptions2(b, options)
        if custom is not None:
            m.AddCustomOptions(b, custom)
        elif op.custom_options:
            m.AddLargeCustomOptionsOffset(b, placed[0])
            m.AddLargeCustomOptionsSize(b, placed[1])
        return m.End(b)

    def _subgraph(self, b: flatbuffers.Builder, tensors: list[int], ops: list[int],
                  inputs: Sequence[int], outputs: Sequence[int], name: str = "main") -> int:
        vectors = [_offsets(b, tensors), b.CreateNumpyVector(np.asarray(inputs, np.int32)),
                   b.CreateNumpyVector(np.asarray(outputs, np.int32)), _offsets(b, ops)]
        name = b.CreateString(name)
        m = _module("SubGraph")
        m.Start(b)
        m.AddTensors(b, vectors[0])
        m.AddInputs(b, vectors[1])
        m.AddOutputs(b, vectors[2])
        m.AddOperators(b, vectors[3])
        m.AddName(b, name)
        return m.End(b)

    def _opcode(self, b: flatbuffers.Builder, code: int, custom: str, version: int) -> int:
        custom_offset = b.CreateString(custom) if custom else None
        m = _module("OperatorCode")
        m.Start(b)
        m.AddDeprecatedBuiltinCode(b, min(code, 127))
        m.AddBuiltinCode(b, code)
        m.AddVersion(b, version)
        if custom_offset is not None:
            m.AddCustomCode(b, custom_offset)
        return m.End(b)


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def _offsets(b: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        b.PrependUOffsetTRelative(offset)
    return b.EndVector()


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _options(b: flatbuffers.Builder, table: str, values: dict[str, Any]) -> int:
    """An options table from snake_case fields; lists become int32 vectors (float32 where they hold floats),
    enum names are looked up, other strings are stored as strings, bytes as byte vectors."""
    m = _module(table)
    integer = np.int64 if table in _INT64_VECTORS else np.int32
    vectors = {k: b.CreateNumpyVector(np.asarray(v, np.float32 if any(isinstance(e, float) for e in v) else integer))
               for k, v in values.items() if isinstance(v, (list, tuple))}
    vectors.update({k: b.CreateString(v) for k, v in values.items() if isinstance(v, str) and k not in _ENUMS})
    vectors.update({k: b.CreateByteVector(v) for k, v in values.items() if isinstance(v, bytes)})
    m.Start(b)
    for key, value in values.items():
        if isinstance(value, str) and key in _ENUMS:
            value = getattr(_ENUMS[key], value)
        getattr(m, "Add" + _camel(key))(b, vectors.get(key, value))
    return m.End(b)


def _quantization(b: flatbuffers.Builder, q: Quant) -> int:
    scale = b.CreateNumpyVector(np.asarray(q.scale, np.float32))
    zero = b.CreateNumpyVector(np.asarray(q.zero_point, np.int64))
    m = _module("QuantizationParameters")
    m.Start(b)
    m.AddScale(b, scale)
    m.AddZeroPoint(b, zero)
    m.AddQuantizedDimension(b, q.axis)
    return m.End(b)


def _index_vector(b: flatbuffers.Builder, values: np.ndarray) -> tuple[int, int]:
    kind = _INDEX_VECTOR[values.dtype]
    vector = b.CreateNumpyVector(values)
    m = _module(kind)
    m.Start(b)
    m.AddValues(b, vector)
    return getattr(tflite.SparseIndexVector, kind), m.End(b)


def _sparsity(b: flatbuffers.Builder, s: SparseSpec) -> int:
    dims = []
    for dim in s.dims:
        arrays = None if dim.segments is None else (_index_vector(b, dim.segments), _index_vector(b, dim.indices))
        m = _module("DimensionMetadata")
        m.Start(b)
        m.AddFormat(b, tflite.DimensionType.DENSE if arrays is None else tflite.DimensionType.SPARSE_CSR)
        m.AddDenseSize(b, dim.dense_size)
        if arrays is not None:
            m.AddArraySegmentsType(b, arrays[0][0])
            m.AddArraySegments(b, arrays[0][1])
            m.AddArrayIndicesType(b, arrays[1][0])
            m.AddArrayIndices(b, arrays[1][1])
        dims.append(m.End(b))
    order = b.CreateNumpyVector(np.asarray(s.traversal_order, np.int32))
    block_map = b.CreateNumpyVector(np.asarray(s.block_map, np.int32)) if s.block_map else None
    dim_vector = _offsets(b, dims)
    m = _module("SparsityParameters")
    m.Start(b)
    m.AddTraversalOrder(b, order)
    if block_map is not None:
        m.AddBlockMap(b, block_map)
    m.AddDimMetadata(b, dim_vector)
    return m.End(b)
