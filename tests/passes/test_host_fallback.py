"""What a chip cannot run at the ai section's ends moves to the host; in its middle it stays, named."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from accelbuild.passes.host_fallback import listed, move_to_host
from accelbuild.testing import npu_graphs

CHIP_OPS = frozenset({"Conv", "Relu", "Add"})


def _points(words: list[str]) -> tuple:
    model = npu_graphs.chain(words, channels=4, size=8)
    return model, ["x"], [model.graph.output[0].name]


def test_a_chip_that_runs_everything_keeps_the_crop_points() -> None:
    model, inputs, outputs = _points(["conv", "relu", "conv"])
    moved = move_to_host(model, inputs, outputs, CHIP_OPS)
    assert (moved.inputs, moved.outputs, moved.moved) == (["x"], ["l2.conv"], [])


def test_an_unsupported_prefix_and_suffix_move_to_pre_and_post() -> None:
    model, inputs, outputs = _points(["sin", "transpose", "conv", "relu", "conv", "sigmoid", "sin"])
    moved = move_to_host(model, inputs, outputs, CHIP_OPS)
    assert moved.inputs == ["l1.transpose"] and moved.outputs == ["l4.conv"]
    assert moved.moved == [{"node": "l0.sin", "op": "Sin", "to": "pre"},
                           {"node": "l1.transpose", "op": "Transpose", "to": "pre"},
                           {"node": "l5.sigmoid", "op": "Sigmoid", "to": "post"},
                           {"node": "l6.sin", "op": "Sin", "to": "post"}]
    assert moved.record("chip")["reason"] == "Sigmoid, Sin, Transpose not among the operators chip runs"
    assert listed(moved.moved, limit=2) == "Sin (l0.sin), Transpose (l1.transpose) and 2 more"


@pytest.mark.parametrize("words, kept, moved", [
    (["conv", "sin", "conv"], [{"node": "l1.sin", "op": "Sin"}], []),
    (["sin", "conv", "custom", "relu", "sin"], [{"node": "l2.custom", "op": "Mystery"}],
     [{"node": "l0.sin", "op": "Sin", "to": "pre"}, {"node": "l4.sin", "op": "Sin", "to": "post"}])])
def test_an_unsupported_node_in_the_middle_is_kept_and_named(words: list[str], kept: list, moved: list) -> None:
    model, inputs, outputs = _points(words)
    found = move_to_host(model, inputs, outputs, CHIP_OPS)
    assert found.kept == kept and found.moved == moved and not found.idle


def test_nothing_the_chip_runs_moves_nothing() -> None:
    model, inputs, outputs = _points(["sin", "sigmoid"])
    found = move_to_host(model, inputs, outputs, CHIP_OPS)
    assert (found.inputs, found.outputs, found.moved) == (["x"], ["l1.sigmoid"], [])
    assert [k["op"] for k in found.kept] == ["Sin", "Sigmoid"]
    assert found.idle


def test_a_branch_that_rejoins_chip_work_is_not_a_prefix() -> None:
    """x -> Sin -> Add(x, sin(x)) -> Conv: the Sin reads only the input, so it is a prefix; the Add then reads
    the input and the moved Sin's output, both new ai inputs."""
    model = npu_graphs.chain(["conv"], channels=4, size=8)
    graph = model.graph
    conv = graph.node[0]
    conv.input[0] = "sum"
    graph.node.insert(0, helper.make_node("Add", ["x", "s"], ["sum"], name="add"))
    graph.node.insert(0, helper.make_node("Sin", ["x"], ["s"], name="sin"))
    graph.value_info.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 4, 8, 8]))
    moved = move_to_host(model, ["x"], [graph.output[0].name], CHIP_OPS)
    assert moved.inputs == ["x", "s"] and moved.moved == [{"node": "sin", "op": "Sin", "to": "pre"}]
