"""Bytes of a ``.tflite`` file -> a validated, plain-Python :class:`Model`.

All flatbuffer access happens here, and nowhere else: the generated ``tflite`` accessors trust every
offset they read, so a truncated or hostile file would otherwise surface as ``IndexError``,
``struct.error`` or a loop over a four-billion-entry vector. Before anything is read this module checks
the file identifier and root offset; before any vector is walked it checks that the vector can fit in
the file and charges its length to a budget proportional to the file size (so decoding time is bounded
even for files whose tables alias each other); buffer data (inline vectors, or the ``offset``/``size``
fields of the large-model format of TFLite >= 2.10), operators' custom options (inline, or
``large_custom_options_offset``/``size``) and tensor buffer indices are checked against the file size
before any data is touched. Whatever decoding error remains becomes
``InputFileError(path, "malformed TFLite file: ...")``.

The first subgraph is the model's main function; the others (the branches, loop bodies, initializers and
decompositions that control-flow and StableHLO operators call by index) are decoded alike, each a
:class:`Model` of its own in ``Model.subgraphs``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tflite

from accelbuild.errors import InputFileError

FILE_IDENTIFIER = b"TFL3"
_BUDGET_PER_BYTE = 4  # vector entries we are willing to decode per byte of file
_DECODE_ERRORS = (IndexError, struct.error, ValueError, TypeError, OverflowError, KeyError,
                  UnicodeDecodeError, AttributeError)


def _enum_names(enum_class: type) -> dict[int, str]:
    return {v: k for k, v in vars(enum_class).items() if not k.startswith("_") and isinstance(v, int)}


OPERATOR_NAMES = _enum_names(tflite.BuiltinOperator)
TYPE_NAMES = _enum_names(tflite.TensorType)
_OPTION_TABLES = _enum_names(tflite.BuiltinOptions)
_OPTION_TABLES_2 = _enum_names(tflite.BuiltinOptions2)  # the newer operators' (StableHLO) option tables
_INDEX_VECTORS = {1: ("Int32Vector", np.int32), 2: ("Uint16Vector", np.uint16), 3: ("Uint8Vector", np.uint8)}


@dataclass(frozen=True)
class Quantization:
    """Affine quantization: ``real = scale * (q - zero_point)``, per tensor or along ``axis``."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int


@dataclass(frozen=True)
class DimMetadata:
    """One traversal level of a sparse tensor: DENSE (``dense_size``) or SPARSE_CSR (segments/indices)."""

    dense: bool
    dense_size: int
    segments: np.ndarray | None = None
    indices: np.ndarray | None = None


@dataclass(frozen=True)
class Sparsity:
    """TFLite sparsity parameters (the TACO-like format of schema.fbs)."""

    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    dims: tuple[DimMetadata, ...]


@dataclass(frozen=True)
class Tensor:
    index: int
    name: str
    shape: tuple[int, ...]
    signature: tuple[int, ...] | None
    dtype: str  # a tflite.TensorType name: FLOAT32, INT8, ...
    data: memoryview | None  # raw little-endian bytes of a constant, None for activations
    quant: Quantization | None
    sparsity: Sparsity | None
    variable: bool = False  # state LiteRT keeps between invocations (zeros after allocation or a reset)


@dataclass(frozen=True)
class Operator:
    index: int
    name: str  # a tflite.BuiltinOperator name, e.g. CONV_2D, or CUSTOM
    custom_code: str
    version: int
    inputs: tuple[int, ...]  # -1 marks an omitted optional input
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)  # snake_case option fields
    custom_options: bytes = b""  # raw custom options of a CUSTOM operator (flexbuffer or an op's own struct)


@dataclass(frozen=True)
class Model:
    path: Path
    version: int
    tensors: tuple[Tensor, ...]
    operators: tuple[Operator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    subgraphs: tuple[Model, ...] = ()  # subgraphs 1, 2, ... of the file (each with no subgraphs of its own)

    def subgraph(self, index: int) -> Model:
        """Subgraph ``index`` of the file (0 is this main graph); an ``IndexError`` past the last one."""
        if index == 0:
            return self
        if not 0 < index <= len(self.subgraphs):
            raise IndexError(f"subgraph {index} does not exist (the file has {len(self.subgraphs) + 1})")
        return self.subgraphs[index - 1]


def read_model(path: Path) -> Model:
    """Read and validate a ``.tflite`` file; every problem is an ``InputFileError``."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc.strerror}") from None
    return parse_model(path, raw)


def parse_model(path: Path, raw: bytes) -> Model:
    """Validate the header, then decode; decoding errors are reported as a malformed file."""
    _check_header(path, raw)
    try:
        return _Decoder(path, raw).model()
    except (struct.error, IndexError):
        raise InputFileError(path, f"malformed TFLite file: it refers to data past its end ({len(raw)} bytes); "
                                   "is it truncated?") from None
    except _DECODE_ERRORS as exc:
        raise InputFileError(path, f"malformed TFLite file: {type(exc).__name__}: {exc}") from None


def _check_header(path: Path, raw: bytes) -> None:
    if len(raw) < 8:
        raise InputFileError(path, f"not a TFLite file ({len(raw)} bytes, too short for a flatbuffer)")
    if raw[4:8] != FILE_IDENTIFIER:
        raise InputFileError(path, f"not a TFLite file (file identifier {bytes(raw[4:8])!r}, expected b'TFL3')")
    root = struct.unpack_from("<I", raw, 0)[0]
    if not 8 <= root <= len(raw) - 4:
        raise InputFileError(path, f"malformed TFLite file: root table offset {root} is outside the file")


COMPILED_CUSTOM_CODES = {"ethos-u": "Vela-compiled (Arm Ethos-U)"}


def _check_not_compiled(model: Model) -> None:
    """A TFLite file an NPU compiler has compiled holds its layers as one custom operator (Vela's ``ethos-u``,
    reading a command stream and a scratch area the NPU driver fills): a program, not a model to import."""
    for op in model.operators:
        if op.name == "CUSTOM" and op.custom_code in COMPILED_CUSTOM_CODES:
            raise InputFileError(
                model.path,
                f"a {COMPILED_CUSTOM_CODES[op.custom_code]} model: its layers were compiled into the "
                f"{op.custom_code!r} custom operator {op.index} (a command stream only the NPU's driver runs), so it "
                "cannot be imported or inspected as a model. Build from the model given to Vela (the int8.tflite "
                "beside it, or the float model); `accelbuild inspect` reads compiled programs of families mx3 "
                "(.dfp) and npu (.tar.gz)")


def _empty_constants(tensors: tuple[Tensor, ...], operators: tuple[Operator, ...],
                     inputs: tuple[int, ...]) -> tuple[Tensor, ...]:
    """A zero-element tensor that no operator writes and that is no graph input is a constant with no bytes.

    Its buffer is empty because there is nothing to store (RESHAPE's shape ``[]`` of a reshape to a scalar is
    a ``[0]`` int32 tensor with a zero-length buffer); LiteRT reads it as the empty constant it is.
    """
    written = set(inputs) | {index for op in operators for index in op.outputs}
    return tuple(dataclasses.replace(t, data=memoryview(b"")) if t.data is None and t.shape and 0 in t.shape
                 and t.index not in written and t.sparsity is None else t for t in tensors)


def _check_dataflow(model: Model) -> None:
    """Operators in execution order, each tensor written once, nothing read before it exists."""
    ready = set(model.inputs) | {t.index for t in model.tensors if t.data is not None or t.variable}

    def describe(index: int) -> str:
        return f"tensor {index} ({model.tensors[index].name!r})"

    for op in model.operators:
        for index in op.inputs:
            if index >= 0 and index not in ready:
                raise InputFileError(model.path, f"operator {op.index} ({op.name}) reads {describe(index)}, which is "
                                                 "not a constant, a graph input or an earlier operator's output")
        for index in op.outputs:
            if index in ready:
                raise InputFileError(model.path, f"malformed TFLite file: operator {op.index} ({op.name}) writes "
                                                 f"{describe(index)}, which already has a value")
            ready.add(index)
    for index in model.outputs:
        if index not in ready:
            raise InputFileError(model.path, f"graph output {describe(index)} is never computed")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@functools.cache
def _option_fields(table: str) -> tuple[type, tuple[tuple[str, bool], ...]]:
    """The options class and its fields as ``(accessor, is_vector)``."""
    cls = getattr(importlib.import_module(f"tflite.{table}"), table)
    fields = []
    for name, func in vars(cls).items():
        if not callable(func) or name.startswith(("GetRootAs", "_")) or name == "Init" or \
                name.endswith(("IsNone", "Length", "AsNumpy", "BufferHasIdentifier")):
            continue
        is_vector = hasattr(cls, name + "AsNumpy")
        if is_vector or func.__code__.co_argcount == 1:
            fields.append((name, is_vector))
    return cls, tuple(fields)


class _Decoder:
    """Walks the flatbuffer with bounds checks; one instance per file."""

    def __init__(self, path: Path, raw: bytes) -> None:
        self.path = path
        self.raw = raw
        self.size = len(raw)
        self.budget = _BUDGET_PER_BYTE * self.size + 4096

    def bad(self, message: str) -> InputFileError:
        return InputFileError(self.path, f"malformed TFLite file: {message}")

    def count(self, obj: Any, vector: str, elem_size: int) -> int:
        """Length of a vector field, checked against the file size and the decoding budget."""
        n = getattr(obj, vector + "Length")()
        if n < 0 or n * elem_size > self.size:
            raise self.bad(f"{_snake(vector)} vector of {n} entries does not fit in the file")
        self.budget -= n + 1
        if self.budget < 0:
            raise self.bad("more table entries than a file of this size can hold")
        return n

    def numbers(self, obj: Any, vector: str, elem_size: int) -> tuple:
        if self.count(obj, vector, elem_size) == 0:
            return ()
        return tuple(getattr(obj, vector + "AsNumpy")().tolist())

    def model(self) -> Model:
        model = tflite.Model.GetRootAs(self.raw, 0)
        if self.count(model, "Subgraphs", 4) == 0:
            raise self.bad("the model has no subgraph")
        buffers = self.buffers(model)
        opcodes = [self.opcode(model.OperatorCodes(i)) for i in range(self.count(model, "OperatorCodes", 4))]
        graphs = [self.graph(model, k, buffers, opcodes) for k in range(self.count(model, "Subgraphs", 4))]
        result = dataclasses.replace(graphs[0], subgraphs=tuple(graphs[1:]))
        _check_not_compiled(result)
        for graph in graphs:
            _check_dataflow(graph)
        return result

    def graph(self, model: Any, k: int, buffers: list, opcodes: list) -> Model:
        graph = model.Subgraphs(k)
        tensors = tuple(self.tensor(graph.Tensors(i), i, buffers) for i in range(self.count(graph, "Tensors", 4)))
        operators = tuple(self.operator(graph.Operators(i), i, opcodes, len(tensors))
                          for i in range(self.count(graph, "Operators", 4)))
        inputs = self.indices(graph, "Inputs", len(tensors), "subgraph input")
        outputs = self.indices(graph, "Outputs", len(tensors), "subgraph output")
        tensors = _empty_constants(tensors, operators, inputs)
        return Model(self.path, model.Version(), tensors, operators, inputs, outputs)

    def indices(self, obj: Any, vector: str, n_tensors: int, what: str, optional: bool = False) -> tuple[int, ...]:
        values = self.numbers(obj, vector, 4)
        low = -1 if optional else 0
        for value in values:
            if not low <= value < n_tensors:
                raise self.bad(f"{what} refers to tensor {value}, but the subgraph has {n_tensors} tensors")
        return values

    def buffers(self, model: Any) -> list[memoryview | None]:
        view = memoryview(self.raw)
        return [self.buffer_data(model.Buffers(i), i, view) for i in range(self.count(model, "Buffers", 4))]

    def buffer_data(self, buf: Any, index: int, view: memoryview) -> memoryview | None:
        """A buffer's bytes: the inline ``data`` vector, or ``offset``/``size`` past the flatbuffer."""
        slot = buf._tab.Offset(4)
        if slot:
            start, length = buf._tab.Vector(slot), buf._tab.VectorLen(slot)
            if start < 0 or start + length > self.size:
                raise self.bad(f"buffer {index} data (bytes {start}..{start + length}) lies past the end "
                               f"of the file ({self.size} bytes)")
            if length:
                return view[start:start + length]
        offset, size = buf.Offset(), buf.Size()
        if offset > 1 and size > 0:
            if offset + size > self.size:
                raise self.bad(f"buffer {index} (offset {offset}, size {size}) lies past the end of the "
                               f"file ({self.size} bytes)")
            return view[offset:offset + size]
        return None

    def opcode(self, code: Any) -> tuple[str, str, int]:
        builtin = code.BuiltinCode()
        name = OPERATOR_NAMES.get(builtin, f"BUILTIN_{builtin}")
        custom = code.CustomCode()
        self.budget -= len(custom or b"")
        return name, custom.decode("utf-8", "replace") if custom else "", code.Version()

    def tensor(self, t: Any, index: int, buffers: list) -> Tensor:
        buffer = t.Buffer()
        if not 0 <= buffer < max(len(buffers), 1):
            raise self.bad(f"tensor {index} refers to buffer {buffer}, but the model has {len(buffers)} buffers")
        shape = self.numbers(t, "Shape", 4)
        if any(d < 0 for d in shape):
            raise self.bad(f"tensor {index} has a negative dimension in its shape {list(shape)}")
        signature = self.numbers(t, "ShapeSignature", 4) if not t.ShapeSignatureIsNone() else None
        name = t.Name()
        self.budget -= len(name or b"")
        return Tensor(
            index=index, name=name.decode("utf-8", "replace") if name else "", shape=shape,
            signature=signature, dtype=TYPE_NAMES.get(t.Type(), f"TYPE_{t.Type()}"),
            data=buffers[buffer] if buffers else None, quant=self.quantization(t.Quantization()),
            sparsity=self.sparsity(t.Sparsity()), variable=bool(t.IsVariable()),
        )

    def quantization(self, q: Any) -> Quantization | None:
        if q is None:
            return None
        scale = self.numbers(q, "Scale", 4)
        if not scale:
            return None
        return Quantization(scale, self.numbers(q, "ZeroPoint", 8), q.QuantizedDimension())

    def sparsity(self, s: Any) -> Sparsity | None:
        if s is None:
            return None
        dims = tuple(self.dim_metadata(s.DimMetadata(i)) for i in range(self.count(s, "DimMetadata", 4)))
        return Sparsity(self.numbers(s, "TraversalOrder", 4), self.numbers(s, "BlockMap", 4), dims)

    def dim_metadata(self, d: Any) -> DimMetadata:
        if d.Format() == tflite.DimensionType.DENSE:
            return DimMetadata(True, d.DenseSize())
        segments = self.index_vector(d.ArraySegmentsType(), d.ArraySegments(), "array_segments")
        indices = self.index_vector(d.ArrayIndicesType(), d.ArrayIndices(), "array_indices")
        return DimMetadata(False, d.DenseSize(), segments, indices)

    def index_vector(self, kind: int, table: Any, what: str) -> np.ndarray:
        """An Int32Vector / Uint16Vector / Uint8Vector union member as an int64 array."""
        if kind not in _INDEX_VECTORS or table is None:
            raise self.bad(f"sparse dimension without a valid {what} vector (union type {kind})")
        name, dtype = _INDEX_VECTORS[kind]
        vec = getattr(importlib.import_module(f"tflite.{name}"), name)()
        vec.Init(table.Bytes, table.Pos)
        if self.count(vec, "Values", np.dtype(dtype).itemsize) == 0:
            return np.zeros(0, np.int64)
        return np.asarray(vec.ValuesAsNumpy(), dtype=np.int64)

    def operator(self, op: Any, index: int, opcodes: list, n_tensors: int) -> Operator:
        code = op.OpcodeIndex()
        if not 0 <= code < len(opcodes):
            raise self.bad(f"operator {index} uses opcode {code}, but the model has {len(opcodes)} opcodes")
        name, custom, version = opcodes[code]
        return Operator(
            index=index, name=name, custom_code=custom, version=version,
            inputs=self.indices(op, "Inputs", n_tensors, f"operator {index} ({name}) input", optional=True),
            outputs=self.indices(op, "Outputs", n_tensors, f"operator {index} ({name}) output"),
            options=self.options(op), custom_options=self.custom_options(op, index),
        )

    def custom_options(self, op: Any, index: int) -> bytes:
        """Raw custom options: the inline vector when present, else ``large_custom_options_offset``/``size``
        (data past the flatbuffer, as large models store it), in the order TFLite's interpreter reads them."""
        slot = op._tab.Offset(14)  # Operator.custom_options
        if slot:
            if self.count(op, "CustomOptions", 1) == 0:
                return b""
            start, length = op._tab.Vector(slot), op._tab.VectorLen(slot)
            if start < 0 or start + length > self.size:
                raise self.bad(f"operator {index} custom options (bytes {start}..{start + length}) lie past the "
                               f"end of the file ({self.size} bytes)")
            return bytes(self.raw[start:start + length])
        offset, size = op.LargeCustomOptionsOffset(), op.LargeCustomOptionsSize()
        if offset > 1 and size > 0:
            if offset + size > self.size:
                raise self.bad(f"operator {index} custom options (offset {offset}, size {size}) lie past the end "
                               f"of the file ({self.size} bytes)")
            self.budget -= size
            if self.budget < 0:
                raise self.bad("more custom option bytes than a file of this size can hold")
            return bytes(self.raw[offset:offset + size])
        return b""

    def options(self, op: Any) -> dict[str, Any]:
        """Builtin options as a dict of snake_case fields (scalars, or tuples for vectors)."""
        table_name = _OPTION_TABLES.get(op.BuiltinOptionsType())
        table = op.BuiltinOptions()
        if table is None or table_name in (None, "NONE"):
            table_name, table = _OPTION_TABLES_2.get(op.BuiltinOptions2Type()), op.BuiltinOptions2()
        if table is None or table_name in (None, "NONE"):
            return {}
        cls, fields = _option_fields(table_name)
        obj = cls()
        obj.Init(table.Bytes, table.Pos)
        options: dict[str, Any] = {}
        for name, is_vector in fields:
            value = self.numbers(obj, name, 4) if is_vector else getattr(obj, name)()
            if isinstance(value, bytes):  # a string field (a variable's shared_name, a composite's name)
                self.budget -= len(value)
                value = value.decode("utf-8", "replace")
            if isinstance(value, (int, float, bool, tuple, str)):
                options[_snake(name)] = value
        return options
