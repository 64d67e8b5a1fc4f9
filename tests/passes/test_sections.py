"""Sections of models whose If/Loop branches read weights and values from the graph around them."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from accelbuild.passes import sections


def _if_model() -> onnx.ModelProto:
    """pre: Relu -> AI: If(cond) whose branches Conv with outer weights ``w_then`` / ``w_else`` and add an
    outer value ``bias_src`` -> post: Sigmoid."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((3, 2, 1, 1)).astype(np.float32), "w_then"),
             numpy_helper.from_array(rng.standard_normal((3, 2, 1, 1)).astype(np.float32), "w_else"),
             numpy_helper.from_array(np.array(True), "cond"),
             numpy_helper.from_array(np.full((1, 3, 1, 1), 0.5, np.float32), "b")]

    def branch(weight: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"{weight}_out", TensorProto.FLOAT, [1, 3, 4, 4])
        nodes = [helper.make_node("Conv", ["pre_out", weight], [f"{weight}_conv"], name=f"{weight}_conv"),
                 helper.make_node("Add", [f"{weight}_conv", "bias_src"], [f"{weight}_out"], name=f"{weight}_add")]
        return helper.make_graph(nodes, f"{weight}_branch", [], [out])

    nodes = [helper.make_node("Relu", ["x"], ["pre_out"], name="pre_relu"),
             helper.make_node("Mul", ["b", "b"], ["bias_src"], name="bias_mul"),
             helper.make_node("If", ["cond"], ["ai_out"], name="if", then_branch=branch("w_then"),
                              else_branch=branch("w_else")),
             helper.make_node("Sigmoid", ["ai_out"], ["y"], name="post_sigmoid")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_an_if_branch_keeps_the_outer_weights_and_values_it_reads() -> None:
    model = _if_model()
    cut = sections.cut(model, ["pre_out"], ["ai_out"])
    ai = cut["ai"].model
    assert ai is not None
    assert {"w_then", "w_else", "cond", "b"} <= {t.name for t in ai.graph.initializer}
    assert "bias_mul" in cut["ai"].nodes  # the producer of a value only a branch reads belongs to the section
    onnx.checker.check_model(ai, full_check=True)
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 4)).astype(np.float32)
    pre = _run(cut["pre"].model, {"x": x})[0]
    (mid,) = _run(ai, {"pre_out": pre})
    (out,) = _run(cut["post"].model, {"ai_out": mid})
    np.testing.assert_allclose(out, _run(model, {"x": x})[0], rtol=1e-6)
