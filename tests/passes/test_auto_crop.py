"""Crop-point prediction on graph shapes that real models have."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.passes.auto_crop import integer_front, predict
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


def byte_classifier() -> onnx.ModelProto:
    """Magika's front: int32 bytes -> Reshape -> Expand -> Equal against 0..15 -> Cast (a one-hot) -> MatMuls."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array([1, 512, 1], np.int64), "column"),
             numpy_helper.from_array(np.array([1, 512, 16], np.int64), "wide"),
             numpy_helper.from_array(np.arange(16, dtype=np.int32).reshape(1, 1, 16), "values"),
             numpy_helper.from_array(rng.standard_normal((16, 128)).astype(np.float32), "embed"),
             numpy_helper.from_array(rng.standard_normal((128, 128)).astype(np.float32) / 10, "head")]
    nodes = [helper.make_node("Reshape", ["bytes", "column"], ["col"], name="col"),
             helper.make_node("Expand", ["col", "wide"], ["wide_bytes"], name="wide_bytes"),
             helper.make_node("Equal", ["wide_bytes", "values"], ["hot"], name="hot"),
             helper.make_node("Cast", ["hot"], ["one_hot"], to=TensorProto.FLOAT, name="one_hot"),
             helper.make_node("MatMul", ["one_hot", "embed"], ["h"], name="embed"),
             helper.make_node("Relu", ["h"], ["hr"], name="relu"),
             helper.make_node("MatMul", ["hr", "head"], ["logits"], name="logits")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("bytes", TensorProto.INT32, [1, 512])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 512, 128])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return onnx.shape_inference.infer_shapes(model)


def test_integer_inputs_and_the_ops_on_them_are_the_pre_section() -> None:
    front = integer_front(byte_classifier())
    assert front is not None
    assert front.inputs == ["one_hot"] and front.outputs == ["logits"]
    assert front.reasons == ["integer input 'bytes': 4 node(s) (Cast, Equal, Expand, Reshape) run on the host in "
                             "the pre section; the ai section starts at 'one_hot'"]


def test_a_float_model_has_no_integer_front() -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [], [_vi("x", [1, 8])], [_vi("y", [1, 8])])
    assert integer_front(model) is None


def test_the_prediction_walks_the_graph_a_fixed_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deep swish network with a sigmoid head: the producers and readers of the whole graph are found a
    fixed number of times, not once per node asked about (quadratic in a large model)."""
    from accelbuild.util import onnx_graph as g

    nodes, inits, x = [], [], "x"
    for i in range(30):
        nodes += [helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"]),
                  helper.make_node("Sigmoid", [f"c{i}"], [f"s{i}"]),
                  helper.make_node("Mul", [f"c{i}", f"s{i}"], [f"a{i}"])]
        inits.append(_w(f"w{i}", [4, 4, 1, 1]))
        x = f"a{i}"
    nodes.append(helper.make_node("Sigmoid", [x], ["score"]))
    model = _model(nodes, inits, [_vi("x", [1, 4, 4, 4])], [_vi("score", [1, 4, 4, 4])])
    walks = {"producers": 0, "consumers": 0}
    real = {name: getattr(g, name) for name in walks}
    for name in walks:
        def counted(graph: onnx.GraphProto, name: str = name) -> object:
            walks[name] += 1
            return real[name](graph)
        monkeypatch.setattr(g, name, counted)
    assert predict(model).outputs == ["a29"]
    assert walks["producers"] <= 2 and walks["consumers"] <= 2, walks
