"""Constant operands of the QDQ model (accelbuild/quantize/qdq): each gets a grid, an empty one too."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from accelbuild.quantize import measure
from accelbuild.quantize.qdq import QdqConfig, quantize_qdq


def _concat_with_empty_constant() -> onnx.ModelProto:
    """relu(x) concatenated with an empty [1, 0, 4] constant (an exporter's leftover: valid, adds nothing)."""
    empty = numpy_helper.from_array(np.zeros((1, 0, 4), np.float32), "empty")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Concat", ["r", "empty"], ["y"], axis=1, name="cat")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4])], [empty])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_empty_constant_operand_quantizes() -> None:
    model = _concat_with_empty_constant()
    frames = [{"x": np.random.default_rng(i).normal(0, 1, (1, 3, 4)).astype(np.float32)} for i in range(4)]
    for config in (QdqConfig(), QdqConfig(symmetric=True), QdqConfig(conventions="tflite")):
        result = quantize_qdq(model, frames, config)
        out = measure.session(result.model).run(None, frames[0])[0]
        assert out.shape == (1, 3, 4)
        assert np.abs(out - np.maximum(frames[0]["x"], 0)).max() < 0.05
