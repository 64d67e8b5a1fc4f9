"""Nodes that pass their input through unchanged leave the graph; nodes that change it stay."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.passes import run_passes
from accelbuild.passes.cleanup import remove_identities
from accelbuild.passes.fold_constants import fold_constants

SHAPE = [1, 4, 3, 3]


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto] = (), out_type: int = TensorProto.FLOAT,
           in_type: int = TensorProto.FLOAT) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", in_type, SHAPE)],
                              [helper.make_tensor_value_info("y", out_type, None)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _wrapped(node: onnx.NodeProto, inits: list[onnx.TensorProto] = ()) -> onnx.ModelProto:
    """Relu -> node -> Relu, the node under test in the middle (its input and output named a and b)."""
    return _model([helper.make_node("Relu", ["x"], ["a"]), node, helper.make_node("Relu", ["b"], ["y"])], inits)


def _int64(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


WIRES = {
    "cast to float": (helper.make_node("Cast", ["a"], ["b"], name="n", to=TensorProto.FLOAT), []),
    "reshape to the same shape": (helper.make_node("Reshape", ["a", "s"], ["b"], name="n"),
                                  [_int64("s", [1, 4, -1, 3])]),
    "expand to the same shape": (helper.make_node("Expand", ["a", "s"], ["b"], name="n"), [_int64("s", [1, 4, 1, 1])]),
    "tile by ones": (helper.make_node("Tile", ["a", "s"], ["b"], name="n"), [_int64("s", [1, 1, 1, 1])]),
    "squeeze nothing": (helper.make_node("Squeeze", ["a", "s"], ["b"], name="n"), [_int64("s", [])]),
    "transpose in order": (helper.make_node("Transpose", ["a"], ["b"], name="n", perm=[0, 1, 2, 3]), []),
    "dropout": (helper.make_node("Dropout", ["a"], ["b"], name="n"), []),
}
NOT_WIRES = {
    "cast to half": (helper.make_node("Cast", ["a"], ["h"], name="n", to=TensorProto.FLOAT16), []),
    "reshape that moves axes": (helper.make_node("Reshape", ["a", "s"], ["b"], name="n"),
                                [_int64("s", [1, 4, 9, 1])]),
    "expand that repeats": (helper.make_node("Expand", ["a", "s"], ["b"], name="n"), [_int64("s", [2, 4, 3, 3])]),
    "transpose that swaps": (helper.make_node("Transpose", ["a"], ["b"], name="n", perm=[0, 1, 3, 2]), []),
}


@pytest.mark.parametrize("kind", WIRES)
def test_a_node_that_changes_nothing_is_removed(kind: str) -> None:
    node, inits = WIRES[kind]
    model = _wrapped(node, inits)
    fold_constants(model)  # the shapes and types the pass reads, as in the pass list
    assert remove_identities(model) == [f"{node.op_type} n"]
    assert [n.op_type for n in model.graph.node] == ["Relu", "Relu"]


@pytest.mark.parametrize("kind", NOT_WIRES)
def test_a_node_that_changes_its_input_stays(kind: str) -> None:
    node, inits = NOT_WIRES[kind]
    if kind == "cast to half":  # back to float, so the output keeps its type
        model = _model([helper.make_node("Relu", ["x"], ["a"]), node,
                        helper.make_node("Cast", ["h"], ["b"], to=TensorProto.FLOAT),
                        helper.make_node("Relu", ["b"], ["y"])])
    else:
        model = _wrapped(node, inits)
    fold_constants(model)
    assert remove_identities(model) == []


def test_int64_and_float_casts_feeding_outputs_go_and_the_function_stays() -> None:
    """int64 -> int64 and float -> float Casts, each feeding a graph output, as converters leave them."""
    nodes = [helper.make_node("ArgMax", ["x"], ["index"], axis=1),
             helper.make_node("Cast", ["index"], ["i"], name="c64", to=TensorProto.INT64),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Cast", ["r"], ["rc"], name="c1", to=TensorProto.FLOAT),
             helper.make_node("Sigmoid", ["rc"], ["s"]),
             helper.make_node("Cast", ["s"], ["y"], name="c2", to=TensorProto.FLOAT)]
    model = _model(nodes)
    model.graph.output.append(helper.make_tensor_value_info("i", TensorProto.INT64, None))
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})
    record = run_passes(model, verify=True)
    assert [n.op_type for n in model.graph.node] == ["ArgMax", "Relu", "Sigmoid"]
    assert [v.name for v in model.graph.output] == ["y", "i"]
    entry = next(r for r in record if r["pass"] == "remove_identities")
    assert sorted(entry["notes"]) == ["Cast c1", "Cast c2", "Cast c64"]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for got, expected in zip(session.run(None, {"x": x}), want):
        np.testing.assert_array_equal(got, expected)
