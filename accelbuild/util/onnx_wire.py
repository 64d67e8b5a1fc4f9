"""The nodes, initializer shapes and outputs of a serialised ONNX model's graph, read from the protobuf wire
format without the onnx package.

Loading a pipeline checks a few facts of its model files (mx3's weight floor: which layers hold how many
weights); importing onnx for that costs as much as everything else a warm ``validate`` does. Only the fields
read here are decoded; tensor data and everything else is skipped by length. Repeated occurrences of the
graph field merge as protobuf merges them (their repeated fields concatenate).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_OUTPUT = 1, 5, 12
_NODE_INPUT, _NODE_OUTPUT, _NODE_OP_TYPE = 1, 2, 4
_TENSOR_DIMS, _TENSOR_NAME = 1, 8
_VALUE_INFO_NAME = 1
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


@dataclass(frozen=True)
class Node:
    op_type: str
    input: tuple[str, ...]
    output: tuple[str, ...]


@dataclass
class Graph:
    node: list[Node] = field(default_factory=list)
    initializer_dims: dict[str, list[int]] = field(default_factory=dict)  # the last of a name, as a dict of them
    output: list[str] = field(default_factory=list)


def read_graph(data: bytes) -> Graph:
    """The graph of a serialised ModelProto; ``ValueError`` when the bytes are not one."""
    graph = Graph()
    view = memoryview(data)
    try:
        for number, wire, start, end in fields(view, 0, len(view)):
            if number == _MODEL_GRAPH and wire == _LEN:
                _read_graph(view, start, end, graph)
    except (IndexError, UnicodeDecodeError) as error:
        raise ValueError(f"not a serialised ONNX model: {error}") from None
    return graph


def _read_graph(data: memoryview, start: int, end: int, graph: Graph) -> None:
    for number, wire, s, e in fields(data, start, end):
        if wire != _LEN:
            continue
        if number == _GRAPH_NODE:
            graph.node.append(_node(data, s, e))
        elif number == _GRAPH_INITIALIZER:
            name, dims = _tensor(data, s, e)
            graph.initializer_dims[name] = dims
        elif number == _GRAPH_OUTPUT:
            graph.output.append(next((_text(data, a, b) for n, w, a, b in fields(data, s, e)
                                      if n == _VALUE_INFO_NAME and w == _LEN), ""))


def _node(data: memoryview, start: int, end: int) -> Node:
    inputs, outputs, op_type = [], [], ""
    for number, wire, s, e in fields(data, start, end):
        if wire != _LEN:
            continue
        if number == _NODE_INPUT:
            inputs.append(_text(data, s, e))
        elif number == _NODE_OUTPUT:
            outputs.append(_text(data, s, e))
        elif number == _NODE_OP_TYPE:
            op_type = _text(data, s, e)
    return Node(op_type, tuple(inputs), tuple(outputs))


def _tensor(data: memoryview, start: int, end: int) -> tuple[str, list[int]]:
    name, dims = "", []
    for number, wire, s, e in fields(data, start, end):
        if number == _TENSOR_NAME and wire == _LEN:
            name = _text(data, s, e)
        elif number == _TENSOR_DIMS and wire == _VARINT:
            dims.append(_int64(s))
        elif number == _TENSOR_DIMS and wire == _LEN:  # packed
            position = s
            while position < e:
                value, position = _varint(data, position)
                dims.append(_int64(value))
    return name, dims


def _text(data: memoryview, start: int, end: int) -> str:
    return bytes(data[start:end]).decode("utf-8")


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(data: bytes | memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, a) for each field: a varint's value as ``a`` (and its end), a length-delimited
    field's payload as ``data[a:b]``; fixed-width fields are skipped."""
    position = start
    while position < end:
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, position = _varint(data, position)
            yield number, wire, value, position
        elif wire == _FIXED64:
            position += 8
        elif wire == _FIXED32:
            position += 4
        elif wire == _LEN:
            length, position = _varint(data, position)
            if position + length > end:
                raise ValueError("a field runs past its message")
            yield number, wire, position, position + length
            position += length
        else:
            raise ValueError(f"wire type {wire}")
    if position != end:
        raise ValueError("a field runs past its message")
