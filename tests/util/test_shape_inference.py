"""accelbuild.util.shape_inference: onnx's result, with the large weights kept out of inference."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.util.shape_inference import infer_shapes


def _model(ir_version: int = 8, weights_as_inputs: bool = False) -> onnx.ModelProto:
    """Conv (a 64x32x3x3 weight: large) -> Reshape by an int64 initializer (inference reads its value) ->
    an If whose branches read a large outer weight (a subgraph's value_info is inferred too)."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((64, 32, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(np.zeros(64, np.float32), "b")
    shape = numpy_helper.from_array(np.array([1, 64, -1], np.int64), "shape")
    table = numpy_helper.from_array(rng.standard_normal((1, 64, 4096)).astype(np.float32), "table")
    flag = numpy_helper.from_array(np.array(True), "flag")

    def branch(name: str, op: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node(op, ["r", "table"], [f"{name}_out"], name=f"{name}_op")], name, [],
                                 [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None)])

    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["c", "shape"], ["r"], name="reshape"),
        helper.make_node("If", ["flag"], ["y"], name="if", then_branch=branch("then", "Add"),
                         else_branch=branch("else", "Mul")),
    ]
    initializers = [weight, bias, shape, table, flag]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 64, 64])]
    if weights_as_inputs:  # IR 3: every initializer is a graph input too
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in initializers]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=ir_version,
                             producer_name="test")


@pytest.mark.parametrize("options", [{}, {"check_type": True, "strict_mode": True, "data_prop": True}])
@pytest.mark.parametrize("ir_version, weights_as_inputs", [(8, False), (3, True)])
def test_the_same_bytes_as_onnx(options: dict, ir_version: int, weights_as_inputs: bool) -> None:
    model = _model(ir_version, weights_as_inputs)
    ours = infer_shapes(model, **options)
    theirs = onnx.shape_inference.infer_shapes(model, **options)
    assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(deterministic=True)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in ours.graph.value_info}
    assert shapes["r"] == [1, 64, 4096]  # the int64 shape was read
    assert [d.dim_value for d in ours.graph.output[0].type.tensor_type.shape.dim] == [1, 64, 4096]


def test_the_input_model_is_untouched() -> None:
    model = _model()
    before = model.SerializeToString(deterministic=True)
    infer_shapes(model)
    assert model.SerializeToString(deterministic=True) == before


def test_a_shape_error_is_onnx_s_error() -> None:
    model = _model()
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 32  # r is 1x64x1024: no Add with 1x64x4096
    with pytest.raises(onnx.shape_inference.InferenceError) as theirs:
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    with pytest.raises(onnx.shape_inference.InferenceError) as ours:
        infer_shapes(model, strict_mode=True)
    assert str(ours.value) == str(theirs.value)


def test_large_weights_stay_out_of_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[onnx.ModelProto] = []
    real = onnx.shape_inference.infer_shapes

    def spy(model: onnx.ModelProto, **options: object) -> onnx.ModelProto:
        handed.append(model)
        return real(model, **options)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", spy)
    infer_shapes(_model())
    assert sorted(t.name for t in handed[0].graph.initializer) == ["b", "flag", "shape"]  # small or integer
    assert {"w", "table"} <= {v.name for v in handed[0].graph.input}
