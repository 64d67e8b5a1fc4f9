"""floats: graph inputs the QDQ model leaves float, int64 or bool are TFLite inputs of their own type."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

pytest.importorskip("ai_edge_litert")
pytest.importorskip("ethosu.vela")

from ethos_u_models import Net, _stem, feeds  # noqa: E402

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq  # noqa: E402
from accelbuild.targets.ethos_u.tflite.verify import check  # noqa: E402
from accelbuild.targets.ethos_u.tflite.writer import write  # noqa: E402


def _build(model: onnx.ModelProto, inputs: list[dict]) -> tuple[bytes, list[dict], onnx.ModelProto]:
    q = quantize_qdq(model, inputs, QdqConfig(conventions="tflite", share_concat_scales=True))
    data, written_float = write(q.model)
    return data, written_float, q.model


def _cast_mask_model() -> onnx.ModelProto:
    """A bool mask input, negated and Cast to float, multiplies the features: bool graph input, LOGICAL_NOT,
    CAST, QUANTIZE."""
    n = Net()
    mask = n.op("Cast", [n.op("Not", ["mask"], "keep")], "mask_f", to=TensorProto.FLOAT)
    y = n.op("Mul", [_stem(n), mask], "masked")
    graph = helper.make_graph(n.nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8]),
                                               helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 8, 8, 8])], n.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_bool_input_cast_and_mask() -> None:
    rng = np.random.default_rng(3)
    inputs = [{**f, "mask": rng.random((1, 1, 8, 8)) > 0.5} for f in feeds()]
    data, written_float, qdq = _build(_cast_mask_model(), inputs)
    assert [entry["node"] for entry in written_float] == ["keep", "mask_f"]  # LOGICAL_NOT, CAST
    checked = check(data, qdq, inputs)
    assert checked.layers.max_steps <= 1 and checked.outputs.worst <= 1.01, checked


def test_float_graph_input_read_by_a_float_operator() -> None:
    """An input only a float operator reads stays float in the QDQ model: a float32 TFLite input."""
    n = Net()
    y = n.op("Sqrt", [n.op("Abs", ["x"], "abs")], "sqrt")
    inputs = feeds()
    data, written_float, qdq = _build(n.model(n.conv(y, 4, 8, 1, "head"), [1, 8, 8, 8]), inputs)
    assert [entry["node"] for entry in written_float] == ["abs", "sqrt"]
    checked = check(data, qdq, inputs)
    assert checked.layers.max_steps <= 1 and checked.outputs.worst <= 1.01, checked


def test_int64_token_ids_look_up_an_embedding() -> None:
    """int64 graph input (token ids) read by a Gather of a constant table: GATHER with int64 indices, float."""
    n = Net()
    table = n.const("table", n.rng.normal(0, 1, (10, 8)))
    y = n.op("Gather", [table, "ids"], "embed", axis=0)
    y = n.op("MatMul", [y, n.const("w", n.rng.normal(0, 0.5, (8, 4)))], "proj")
    graph = helper.make_graph(n.nodes, "net", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 6])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 6, 4])], n.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(5)
    inputs = [{"ids": rng.integers(0, 10, (1, 6)).astype(np.int64)} for _ in range(6)]
    data, written_float, qdq = _build(model, inputs)
    assert [entry["node"] for entry in written_float] == ["embed"]
    checked = check(data, qdq, inputs)
    assert checked.layers.max_steps <= 1 and checked.outputs.worst <= 1.01, checked
