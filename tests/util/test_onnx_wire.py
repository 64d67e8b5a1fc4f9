"""util/onnx_wire.py: the graph's nodes, initializer shapes and outputs, as onnx itself parses them."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.testing import models
from accelbuild.util import onnx_wire


def _as_onnx_reads(model: onnx.ModelProto) -> tuple[list, dict, list]:
    graph = model.graph
    return ([(n.op_type, tuple(n.input), tuple(n.output)) for n in graph.node],
            {t.name: list(t.dims) for t in graph.initializer}, [o.name for o in graph.output])


def _as_wire_reads(data: bytes) -> tuple[list, dict, list]:
    graph = onnx_wire.read_graph(data)
    return [(n.op_type, n.input, n.output) for n in graph.node], graph.initializer_dims, graph.output


@pytest.mark.parametrize("make", [models.tiny_detector, models.tiny_classifier, models.multi_input_model,
                                  models.static_mlp])
def test_generated_models_read_as_onnx_reads_them(make) -> None:
    model = make()
    assert _as_wire_reads(model.SerializeToString()) == _as_onnx_reads(model)


def test_unpacked_dims_empty_names_and_a_graph_field_given_twice() -> None:
    """dims written one varint each (older writers), an optional input left empty, a negative dim, and two
    graph fields (protobuf merges them: their nodes and outputs concatenate)."""
    weight = numpy_helper.from_array(np.zeros((4, 3), np.float32), "w")
    odd = helper.make_tensor("odd", TensorProto.FLOAT, [2], [1.0, 2.0])
    odd.ClearField("dims")
    first = helper.make_graph([helper.make_node("Gemm", ["x", "w", ""], ["y"], name="gemm")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], initializer=[weight, odd])
    model = helper.make_model(first)
    unpacked = b"".join(b"\x08" + _varint(d) for d in (5, 1 << 40))  # TensorProto.dims, field 1, wire type 0
    negative = b"\x08" + _varint((1 << 64) - 1)  # -1 as int64
    name = b"B\x04more"  # TensorProto.name = 8
    tensor = unpacked + negative + name
    extra = helper.make_graph([helper.make_node("Relu", ["y"], ["z"])], "h", [],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    extra_bytes = extra.SerializeToString() + b"*" + _varint(len(tensor)) + tensor  # GraphProto.initializer = 5
    data = model.SerializeToString() + b"\x3a" + _varint(len(extra_bytes)) + extra_bytes  # ModelProto.graph = 7
    merged = onnx.ModelProto()
    merged.ParseFromString(data)
    assert _as_wire_reads(data) == _as_onnx_reads(merged)
    assert onnx_wire.read_graph(data).initializer_dims["more"] == [5, 1 << 40, -1]


@pytest.mark.parametrize("data", [b"\x3a\x10abc", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x3b"])
def test_bytes_that_are_not_a_model_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        onnx_wire.read_graph(data)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)
