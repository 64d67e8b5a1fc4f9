"""accelbuild/targets/ethos_u/tflite/qgraph.py: every tensor of the graph it reads has a static shape."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from accelbuild.targets.ethos_u.tflite.qgraph import _with_static_shapes
from accelbuild.util import onnx_graph as g
from accelbuild.util.shape_inference import infer_shapes


def _shape_from_data() -> onnx.ModelProto:
    """``x + ConstantOfShape(Shape(x))``: onnx's inference (without data propagation) leaves the filled
    tensor's shape unknown, though the input's is fixed."""
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("ConstantOfShape", ["s"], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
         helper.make_node("Add", ["x", "c"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_shape_inference_leaves_open_is_taken_from_a_run() -> None:
    model = infer_shapes(_shape_from_data())
    assert g.static_shape(model, "c") is None  # the case this is about
    settled = _with_static_shapes(model)
    assert g.static_shape(settled, "c") == [1, 8] and g.static_shape(settled, "y") == [1, 8]
    assert g.static_shape(settled, "s") == [2]


def test_a_model_with_every_shape_known_is_left_alone() -> None:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    before = model.SerializeToString()
    assert _with_static_shapes(model).SerializeToString() == before
