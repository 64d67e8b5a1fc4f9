"""Hard-swish spelled out (Paddle's x * clip(x + 3, 0, 6) / 6 and its variants) becomes one HardSwish."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.passes import run_passes
from accelbuild.passes.hard_swish import fuse_hard_swish

SHAPE = (1, 4, 6, 6)


def _model(nodes: list[onnx.NodeProto], constants: dict[str, float], opset: int = 21,
           outputs: tuple[str, ...] = ("y",)) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))
    ys = [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(SHAPE)) for name in outputs]
    inits = [numpy_helper.from_array(np.array([v], np.float32) if k.startswith("v") else np.array(v, np.float32), k)
             for k, v in constants.items()]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], ys, inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _gate(add_inputs: tuple[str, str] = ("x", "v3")) -> list[onnx.NodeProto]:
    return [helper.make_node("Add", list(add_inputs), ["shifted"], name="shift"),
            helper.make_node("Clip", ["shifted", "zero", "six"], ["gate"], name="relu6")]


CONSTANTS = {"v3": 3.0, "zero": 0.0, "six": 6.0, "v6": 6.0, "sixth": 1.0 / 6.0}
FORMS = {
    "paddle: (x * relu6(x + 3)) / 6": _gate() + [
        helper.make_node("Mul", ["x", "gate"], ["product"], name="product"),
        helper.make_node("Div", ["product", "v6"], ["y"], name="hswish")],
    "(relu6(3 + x) * x) * 1/6": _gate(("v3", "x")) + [
        helper.make_node("Mul", ["gate", "x"], ["product"], name="product"),
        helper.make_node("Mul", ["sixth", "product"], ["y"], name="hswish")],
    "x * (relu6(x + 3) / 6)": _gate() + [
        helper.make_node("Div", ["gate", "v6"], ["scaled"], name="scaled"),
        helper.make_node("Mul", ["x", "scaled"], ["y"], name="hswish")],
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_spelling_becomes_one_hard_swish_with_the_same_values(form: str) -> None:
    model = _model(FORMS[form], CONSTANTS)
    x = np.random.default_rng(0).uniform(-5, 5, SHAPE).astype(np.float32)
    want = _run(model, x)
    notes = fuse_hard_swish(model)
    assert len(notes) == 1 and notes[0].startswith("hard-swish hswish of x:"), notes
    assert [(n.op_type, n.name, list(n.input), list(n.output)) for n in model.graph.node] == [
        ("HardSwish", "hswish", ["x"], ["y"])]
    np.testing.assert_allclose(_run(model, x), want, rtol=1e-6, atol=1e-6)


def test_import_fuses_a_conv_followed_by_paddles_hard_swish_and_records_it() -> None:
    weights = numpy_helper.from_array(np.random.default_rng(1).normal(0, 0.5, (4, 4, 1, 1)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv")] + [
        _renamed(n, {"x": "c"}) for n in FORMS["paddle: (x * relu6(x + 3)) / 6"]]
    model = _model(nodes, CONSTANTS)
    model.graph.initializer.append(weights)
    record = run_passes(model, verify=True)
    entry = next(r for r in record if r["pass"] == "fuse_hard_swish")
    assert entry == {"pass": "fuse_hard_swish", "approximate": False, "changes": 1,
                     "notes": ["hard-swish hswish of c: Add + Clip + Mul + Div -> HardSwish"]}
    assert [n.op_type for n in model.graph.node] == ["Conv", "HardSwish"]


def _renamed(node: onnx.NodeProto, names: dict[str, str]) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.input[:] = [names.get(name, name) for name in node.input]
    return copy


@pytest.mark.parametrize("case", ["shared intermediate", "other offset", "another tensor", "old opset",
                                  "x times its hard sigmoid"])
def test_lookalikes_are_left_alone(case: str) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="other_x")] + _gate() + [
        helper.make_node("Mul", ["x", "gate"], ["product"], name="product"),
        helper.make_node("Div", ["product", "v6"], ["y"], name="hswish")]
    constants, outputs, opset = dict(CONSTANTS), ("y",), 21
    if case == "shared intermediate":  # the gate is read elsewhere too: fusing would lose it
        outputs = ("y", "gate")
    elif case == "other offset":
        constants["v3"] = 2.0
    elif case == "another tensor":  # x * relu6(r + 3) / 6 with r != x
        nodes[1] = helper.make_node("Add", ["r", "v3"], ["shifted"], name="shift")
    elif case == "old opset":  # HardSwish is opset 14
        opset = 13
    elif case == "x times its hard sigmoid":  # two operators already; phase-1 builds hold it
        nodes = [helper.make_node("HardSigmoid", ["x"], ["gate"], name="hsig", alpha=1.0 / 6.0, beta=0.5),
                 helper.make_node("Mul", ["gate", "x"], ["y"], name="hswish")]
    model = _model(nodes, constants, opset=opset, outputs=outputs)
    assert fuse_hard_swish(model) == []
    assert "HardSwish" not in {n.op_type for n in model.graph.node}
