"""Crop-point prediction on graph shapes that real models have."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from accelbuild.passes.auto_crop import predict
from accelbuild.passes.cleanup import name_nodes


def _model(nodes, inits, inputs, outputs) -> onnx.ModelProto:
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    name_nodes(model)
    return model


def _vi(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _w(name: str, shape: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.random.default_rng(0).standard_normal(shape).astype(np.float32), name)


def test_dbnet_style_tail_keeps_its_small_upsampling_on_the_chip() -> None:
    """PP-OCR det: ... -> ConvTranspose(16 -> 1 channel, 2x2) -> Sigmoid: only the Sigmoid is host work."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["feat"], pads=[1, 1, 1, 1]),
             helper.make_node("ConvTranspose", ["feat", "wt"], ["logit"], strides=[2, 2]),
             helper.make_node("Sigmoid", ["logit"], ["prob"])]
    model = _model(nodes, [_w("w1", [16, 3, 3, 3]), _w("wt", [16, 1, 2, 2])], [_vi("x", [1, 3, 8, 8])],
                   [_vi("prob", [1, 1, 16, 16])])
    assert predict(model).outputs == ["logit"]


def test_softmax_integral_conv_is_post_processing() -> None:
    """YOLOv8 DFL: Softmax over 16 bins -> 1x1 Conv with arange weights: part of the decode head."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["box"]),
             helper.make_node("Reshape", ["box", "shape"], ["bins"]),
             helper.make_node("Softmax", ["bins"], ["probs"], axis=1),
             helper.make_node("Conv", ["probs", "dfl"], ["dist"])]
    inits = [_w("w1", [64, 8, 1, 1]), numpy_helper.from_array(np.array([1, 16, 4, 16], np.int64), "shape"),
             numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1), "dfl")]
    model = _model(nodes, inits, [_vi("x", [1, 8, 4, 4])], [_vi("dist", [1, 1, 4, 16])])
    assert predict(model).outputs == ["box"]


def test_a_network_without_a_head_is_not_cropped() -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"])]
    model = _model(nodes, [_w("w", [8, 3, 1, 1])], [_vi("x", [1, 3, 4, 4])], [_vi("y", [1, 8, 4, 4])])
    prediction = predict(model)
    assert prediction.outputs == ["y"] and prediction.inputs == ["x"]
