"""recurrent: forward LSTM and GRU unrolled into float CPU operators, against onnxruntime and through Vela."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

pytest.importorskip("ai_edge_litert")
pytest.importorskip("ethosu.vela")

from ethos_u_models import Net, feeds  # noqa: E402

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq  # noqa: E402
from accelbuild.targets.ethos_u import vela  # noqa: E402
from accelbuild.targets.ethos_u.tflite.verify import check  # noqa: E402
from accelbuild.targets.ethos_u.tflite.writer import write  # noqa: E402


def _build(model: onnx.ModelProto, inputs: list[dict]) -> tuple[bytes, list[dict], onnx.ModelProto]:
    q = quantize_qdq(model, inputs, QdqConfig(conventions="tflite", share_concat_scales=True))
    data, written_float = write(q.model)
    return data, written_float, q.model


def _lstm_model(peepholes: bool) -> onnx.ModelProto:
    """x + c (int8) -> LSTM (hidden 5, biases, optional peepholes) -> Y reshaped -> MatMul (int8); Y_h a float
    graph output."""
    n = Net()
    y = n.op("Add", ["x", n.const("c", n.rng.normal(0, 0.3, (8,)))], "shift")
    lstm_inputs = [y, n.const("W", n.rng.normal(0, 0.4, (1, 20, 8))), n.const("R", n.rng.normal(0, 0.4, (1, 20, 5))),
                   n.const("B", n.rng.normal(0, 0.2, (1, 40))), "", "", ""]
    if peepholes:
        lstm_inputs.append(n.const("P", n.rng.normal(0, 0.3, (1, 15))))
    n.nodes.append(helper.make_node("LSTM", lstm_inputs, ["Y", "Y_h"], name="lstm", hidden_size=5))
    flat = n.op("Reshape", ["Y", n.const("shape", [6, 5], np.int64)], "flat")
    out = n.op("MatMul", [flat, n.const("proj", n.rng.normal(0, 0.5, (5, 3)))], "proj_out")
    graph = helper.make_graph(n.nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 1, 8])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [6, 3]),
                               helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, 1, 5])], n.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("peepholes", [False, True])
def test_lstm_is_unrolled_into_float_operators(peepholes: bool) -> None:
    inputs = feeds(shape=(6, 1, 8))
    data, written_float, qdq = _build(_lstm_model(peepholes), inputs)
    assert [(entry["node"], entry["op"]) for entry in written_float] == [("lstm", "LSTM")]
    checked = check(data, qdq, inputs)
    assert checked.layers.max_steps <= 1, checked.layers
    assert checked.outputs.max_steps["Y_h"] <= 1e-4, checked.outputs  # float output: in its own units
    assert checked.outputs.max_steps["proj_out"] <= 1.01, checked.outputs
    result = vela.compile_tflite(data, vela.VelaOptions("ethos-u55-128"))
    assert {"FULLY_CONNECTED", "LOGISTIC", "TANH"} <= {op["op"] for op in result.cpu_ops}


def _gru_model(linear_before_reset: int) -> onnx.ModelProto:
    n = Net()
    y = n.op("Add", ["x", n.const("c", n.rng.normal(0, 0.3, (8,)))], "shift")
    n.nodes.append(helper.make_node("GRU", [y, n.const("W", n.rng.normal(0, 0.4, (1, 15, 8))),
                                            n.const("R", n.rng.normal(0, 0.4, (1, 15, 5))),
                                            n.const("B", n.rng.normal(0, 0.2, (1, 30)))], ["Y", "Y_h"], name="gru",
                                    hidden_size=5, linear_before_reset=linear_before_reset))
    flat = n.op("Reshape", ["Y", n.const("shape", [6, 5], np.int64)], "flat")
    out = n.op("MatMul", [flat, n.const("proj", n.rng.normal(0, 0.5, (5, 3)))], "proj_out")
    graph = helper.make_graph(n.nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 1, 8])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [6, 3]),
                               helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, 1, 5])], n.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru_is_unrolled_into_float_operators(linear_before_reset: int) -> None:
    inputs = feeds(shape=(6, 1, 8))
    data, written_float, qdq = _build(_gru_model(linear_before_reset), inputs)
    assert [(entry["node"], entry["op"]) for entry in written_float] == [("gru", "GRU")]
    checked = check(data, qdq, inputs)
    assert checked.layers.max_steps <= 1, checked.layers
    assert checked.outputs.max_steps["Y_h"] <= 1e-4 and checked.outputs.max_steps["proj_out"] <= 1.01, checked
    result = vela.compile_tflite(data, vela.VelaOptions("ethos-u55-128"))
    assert {"FULLY_CONNECTED", "LOGISTIC", "TANH"} <= {op["op"] for op in result.cpu_ops}


def test_a_reverse_lstm_is_refused_naming_it() -> None:
    from accelbuild.targets.ethos_u.tflite.writer import UnsupportedOperatorsError

    model = _lstm_model(False)
    node = next(n for n in model.graph.node if n.op_type == "LSTM")
    node.attribute.append(helper.make_attribute("direction", "reverse"))
    with pytest.raises(UnsupportedOperatorsError, match=r"LSTM \(lstm\): .*bidirectional"):
        _build(model, feeds(shape=(6, 1, 8)))
