"""Layout Transposes moved below layout-agnostic ops (``frontends/tflite/transpose_sinking.py``): the
converted model keeps LiteRT's results, the TFLite names, and loses the Transpose pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from accelbuild.frontends.tflite import layout
from accelbuild.frontends.tflite.transpose_sinking import sink_transposes
from accelbuild.testing import tflite_models as tm
from frontends.test_tflite import compare


def _transposes(model: onnx.ModelProto) -> list[str]:
    return [n.name for n in model.graph.node if n.op_type == "Transpose"]


@pytest.mark.parametrize("keep_dims", [True, False])
def test_blaze_blocks_run_channel_first_between_input_and_output(tmp_path: Path, keep_dims: bool) -> None:
    model, _ = compare(tm.blaze_blocks(keep_dims=keep_dims), tmp_path)
    nodes = {n.name: n for n in model.graph.node}
    # PAD, ADD, its RELU, PRELU, CONCATENATION and MUL read channel-first values: no Transpose between them
    assert nodes["block/pad"].input[0] == "stem/nchw"
    assert nodes["block/add"].input == ["block/pw/nchw", "block/pad/nchw"]
    assert nodes["joined"].input == ["block/prelu/nchw", "gate/nchw"]
    assert helper.get_attribute_value(next(a for a in nodes["joined"].attribute if a.name == "axis")) == 1
    alpha = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}[nodes["block/prelu"].input[1]]
    assert alpha.shape == (1, 16, 1, 1)  # the per-channel slope follows the channels
    assert nodes["features"].input[0] == "scaled/nchw"  # the MEAN too, over H and W as axes 2, 3
    axes = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}[nodes["features"].input[1]]
    assert axes.tolist() == [2, 3]
    assert _transposes(model) == ["stem/nchw_in"]  # no Transpose after the input's
    if keep_dims:  # [1, 24, 1, 1] back to [1, 1, 1, 24] moves no value: a Reshape
        assert nodes["features/nhwc"].op_type == "Reshape"
    else:  # [1, 24] whichever layout it was taken in
        assert "features/nhwc" not in nodes
    assert [o.name for o in model.graph.output] == ["features"]


def test_channel_slices_and_splits_run_channel_first(tmp_path: Path) -> None:
    model, _ = compare(tm.channel_slices(), tmp_path)
    nodes = {n.name: n for n in model.graph.node}
    assert _transposes(model) == ["stem/nchw_in", "output/nhwc"]
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert constants[nodes["first"].input[3]].tolist() == [0, 2, 3, 1]  # the sliced axes, channel-first
    assert helper.get_attribute_value(next(a for a in nodes["low"].attribute if a.name == "axis")) == 1
    assert nodes["halves"].input == ["low/nchw", "high/nchw"]


def test_squeeze_and_excitation_needs_no_transpose(tmp_path: Path) -> None:
    """Keras' SE block: MEAN over H, W without keep_dims, RESHAPE to [1, 1, 1, C], 1x1 convs, LOGISTIC, MUL
    with the block's input. The [1, 1, 1, C] -> [1, C, 1, 1] move into the conv is a Reshape."""
    b = tm.TFLiteBuilder(0)
    image = b.add_tensor("input", (1, 8, 8, 3))
    x = tm.conv(b, "stem", image, 16, 3, act="RELU")
    pooled = b.add_tensor("se/pool", (1, 16))
    b.add_op("MEAN", [x, b.const("se/axes", np.array([1, 2], np.int32), "int32")], [pooled], {"keep_dims": False})
    squeezed = tm.conv(b, "se/reduce", tm.reshape(b, "se/reshape", pooled, (1, 1, 1, 16)), 4, 1, act="RELU")
    gate = tm.unary(b, "LOGISTIC", "se/gate", tm.conv(b, "se/expand", squeezed, 16, 1))
    scaled = b.add_tensor("se/excite", (1, 8, 8, 16))
    b.add_op("MUL", [x, gate], [scaled])
    model, _ = compare(b.finish([image], [tm.conv(b, "project", scaled, 8, 1)]), tmp_path)
    nodes = {n.name: n for n in model.graph.node}
    assert _transposes(model) == ["stem/nchw_in", "project/nhwc"]
    assert nodes["se/reduce/nchw_in"].op_type == "Reshape"
    assert nodes["se/excite"].input == ["stem/nchw", "se/gate/nchw"]


def test_moves_that_would_leave_more_transposes_are_not_made(tmp_path: Path) -> None:
    """conv -> SPLIT in two -> each part flattened channel-last: moving the one Transpose below the Split
    would need one per part, so the graph keeps the Split channel-last."""
    b = tm.TFLiteBuilder(0)
    image = b.add_tensor("input", (1, 8, 8, 3))
    x = tm.conv(b, "stem", image, 8, 3)
    low, high = b.add_tensor("low", (1, 8, 8, 4)), b.add_tensor("high", (1, 8, 8, 4))
    b.add_op("SPLIT", [b.const("split/axis", np.array([3], np.int32), "int32"), x], [low, high], {"num_splits": 2})
    flat = [tm.reshape(b, f"{name}/flat", part, (1, 256)) for name, part in (("low", low), ("high", high))]
    out = b.add_tensor("joined", (1, 512))
    b.add_op("CONCATENATION", flat, [out], {"axis": 1, "fused_activation_function": "NONE"})
    model, _ = compare(b.finish([image], [out]), tmp_path)
    assert _transposes(model) == ["stem/nchw_in", "stem/nhwc"]
    assert {n.name: n for n in model.graph.node}["low"].input[0] == "stem"


def test_an_op_with_a_channel_last_operand_stays_as_it_is() -> None:
    """Add(Transpose(a), b) with b an activation in the other layout cannot move."""
    nodes = [helper.make_node("Transpose", ["a"], ["t"], name="t", perm=[0, 2, 3, 1]),
             helper.make_node("Add", ["t", "b"], ["y"], name="y")]
    assert sink_transposes(nodes, {}, lambda name: name) == nodes


def test_a_constant_with_more_dimensions_than_the_transpose_blocks_the_move() -> None:
    nodes = [helper.make_node("Transpose", ["a"], ["t"], name="t", perm=[1, 0]),
             helper.make_node("Mul", ["t", "c"], ["y"], name="y")]
    constants = {"c": numpy_helper.from_array(np.ones((2, 3, 4), np.float32), "c")}
    assert sink_transposes(nodes, constants, lambda name: name) == nodes


@pytest.mark.parametrize(("shape", "perm", "reshaped"), [
    ((1, 1, 1, 8), (0, 3, 1, 2), True),    # [1, 1, 1, C] -> [1, C, 1, 1]: the values keep their order
    ((1, 4, 1, 8), (0, 3, 1, 2), False),   # H and C swap their order
    ((1, 8, 1, 1), (0, 2, 3, 1), True),
])
def test_a_transpose_of_unit_axes_is_a_reshape(shape: tuple, perm: tuple, reshaped: bool) -> None:
    nodes = [helper.make_node("Transpose", ["x"], ["y"], name="t", perm=list(perm))]
    made: dict[str, list[int]] = {}

    def add_ints(name: str, values) -> str:
        made[name] = list(values)
        return name

    [node] = layout.trivial_transposes_as_reshapes(nodes, {"x": shape}, add_ints)
    assert node.op_type == ("Reshape" if reshaped else "Transpose") and node.output == ["y"]
    if reshaped:
        assert made == {"t/shape": [shape[a] for a in perm]}

