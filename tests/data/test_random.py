"""Seeded random inputs follow what the graph says about each input (docs/data.md, "Random inputs")."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from accelbuild.data.random import describe_rule, index_bound, observed_shapes, random_inputs


def _model() -> onnx.ModelProto:
    """image [1, 4] float, mask [1, 4] bool, ids [1, 6] int64 -> Cast -> Gather(table 7 rows), pos [1, 6] into
    a 50-row table and a 3-row Constant table (the smaller bounds it), count [2] int64 into nothing, scale ()."""
    tables = [numpy_helper.from_array(np.zeros((7, 4), np.float32), "table"),
              numpy_helper.from_array(np.zeros((50, 4), np.float32), "big")]
    small = helper.make_node("Constant", [], ["small"], value=numpy_helper.from_array(np.zeros((3, 4), np.float32)))
    nodes = [small,
             helper.make_node("Cast", ["ids"], ["ids32"], to=TensorProto.INT32),
             helper.make_node("Gather", ["table", "ids32"], ["e"], axis=0),
             helper.make_node("Gather", ["big", "pos"], ["p1"]),
             helper.make_node("Unsqueeze", ["pos", "axes"], ["pos2"]),
             helper.make_node("Gather", ["small", "pos2"], ["p2"]),
             helper.make_node("Where", ["mask", "image", "scale"], ["y"]),
             helper.make_node("Cast", ["count"], ["c"], to=TensorProto.FLOAT)]
    inputs = [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 4]),
              helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 4]),
              helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 6]),
              helper.make_tensor_value_info("pos", TensorProto.INT64, [1, 6]),
              helper.make_tensor_value_info("count", TensorProto.INT64, [2]),
              helper.make_tensor_value_info("scale", TensorProto.FLOAT, [])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("e", "p1", "p2", "y", "c")]
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [*tables, numpy_helper.from_array(np.array([0], np.int64), "axes")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_each_input_follows_its_rule() -> None:
    model = _model()
    samples = random_inputs(model, 20, seed=3)
    stacked = {name: np.stack([s[name] for s in samples]) for name in samples[0]}
    assert stacked["mask"].all()  # masks keep everything
    assert set(np.unique(stacked["ids"])) == set(range(7))  # every row of the 7-row table, none past it
    assert stacked["pos"].min() >= 0 and stacked["pos"].max() == 2  # the smaller of its 50- and 3-row tables
    assert stacked["count"].max() < 4  # an integer that indexes nothing: [0, 4)
    assert (stacked["scale"] == 1.0).all() and stacked["scale"].shape == (20,)
    assert 0 <= stacked["image"].min() and stacked["image"].max() < 1
    assert len(np.unique(stacked["image"])) > 40


def test_the_values_are_seeded_and_the_rules_are_described() -> None:
    model = _model()
    first, again = random_inputs(model, 2, seed=5), random_inputs(model, 2, seed=5)
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(first, again) for k in a)
    assert index_bound(model.graph, "count") is None and index_bound(model.graph, "ids") == 7
    assert describe_rule(model, "ids") == "token ids in [0, 7) (the rows of the table it indexes)"
    assert [describe_rule(model, n) for n in ("mask", "scale", "image", "count")] == \
        ["all True", "1.0", "uniform in [0, 1)", "integers in [0, 4)"]


def test_a_scalar_still_takes_its_draw_so_later_inputs_keep_their_values() -> None:
    """Inputs after a floating scalar get the values they got when the scalar was drawn at random."""
    def two(scalar_shape: list[int]) -> onnx.ModelProto:
        inputs = [helper.make_tensor_value_info("s", TensorProto.FLOAT, scalar_shape),
                  helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])]
        nodes = [helper.make_node("Identity", [n], [f"{n}_out"]) for n in ("s", "x")]
        outputs = [helper.make_tensor_value_info(f"{n}_out", TensorProto.FLOAT, None) for n in ("s", "x")]
        return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs))

    scalar, vector = random_inputs(two([]), 1, 0)[0], random_inputs(two([1]), 1, 0)[0]
    assert scalar["s"] == 1.0 and vector["s"][0] != 1.0
    assert np.array_equal(scalar["x"], vector["x"])


def test_observed_shapes_are_one_run_of_outputs_or_named_tensors() -> None:
    """``observed_shapes``: the graph outputs by default, or any named tensors; {} for a model that cannot run."""
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert observed_shapes(model) == {"y": (TensorProto.FLOAT, [2, 3])}
    assert observed_shapes(model, ["s", "y"]) == {"s": (TensorProto.INT64, [2]), "y": (TensorProto.FLOAT, [2, 3])}
    broken = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                                 [helper.make_tensor_value_info("y", TensorProto.STRING, [2])]),
                               opset_imports=[helper.make_opsetid("", 17)])
    assert observed_shapes(broken) == {}
