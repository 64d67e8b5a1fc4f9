"""The NPU's layers: which nodes a layer groups beyond the profile's fusion chains (a chain op no head took,
a rescale by one constant), on float and on quantized (Q/DQ) models."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq
from accelbuild.targets.npu.graph_info import GraphInfo
from accelbuild.targets.npu.hardware import load_npu_hardware
from accelbuild.targets.npu.layers import layers_of

MLSOC = load_npu_hardware("mlsoc")
SHAPE = [1, 16, 8, 8]


def _nfnet_block(gain_shape: tuple[int, ...] = ()) -> onnx.ModelProto:
    """NFNet's pre-activation block: r = Conv(x) + x; GELU(r) in its erf form, times a gain, into a Conv whose
    output is added to r again, so r has three readers (GELU's Div and Mul, the second Add)."""
    w = np.full((16, 16, 1, 1), 0.01, np.float32)
    consts = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
              (("root2", 2 ** 0.5), ("one", 1.0), ("half", 0.5))]
    consts += [numpy_helper.from_array(w, "w1"), numpy_helper.from_array(w, "w2"),
               numpy_helper.from_array(np.full(gain_shape, 1.7, np.float32), "gain")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], name="conv1", kernel_shape=[1, 1]),
             helper.make_node("Add", ["c", "x"], ["r"], name="residual1"),
             helper.make_node("Div", ["r", "root2"], ["d"], name="div"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="add"),
             helper.make_node("Mul", ["r", "a"], ["m"], name="mul"),
             helper.make_node("Mul", ["m", "half"], ["g"], name="half_mul"),
             helper.make_node("Mul", ["g", "gain"], ["b"], name="gain_mul"),
             helper.make_node("Conv", ["b", "w2"], ["c2"], name="conv2", kernel_shape=[1, 1]),
             helper.make_node("Add", ["c2", "r"], ["y"], name="residual2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)], consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _members(model: onnx.ModelProto) -> list[tuple[str, ...]]:
    return [layer.members for layer in layers_of(GraphInfo.of(model), MLSOC)]


def _quantized(model: onnx.ModelProto) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(2)]
    return quantize_qdq(model, feeds, QdqConfig()).model


@pytest.mark.parametrize("quantized", [False, True], ids=["float", "qdq"])
def test_a_gelu_after_a_residual_add_is_one_layer_and_its_gain_a_rescale(quantized: bool) -> None:
    model = _nfnet_block()
    assert _members(_quantized(model) if quantized else model) == [
        ("conv1", "residual1"),
        ("div", "erf", "add", "mul", "half_mul", "gain_mul"),  # one activation; the 0.5 and the gain rescale it
        ("conv2", "residual2")]


def test_a_gain_of_more_than_one_value_is_work_of_its_own() -> None:
    per_channel = _members(_nfnet_block(gain_shape=(1, 16, 1, 1)))
    assert ("div", "erf", "add", "mul", "half_mul") in per_channel and ("gain_mul",) in per_channel


def test_an_activation_whose_intermediate_is_read_elsewhere_stays_apart() -> None:
    model = _nfnet_block()
    model.graph.node.append(helper.make_node("Relu", ["e"], ["leak"], name="relu"))
    model.graph.output.append(helper.make_tensor_value_info("leak", TensorProto.FLOAT, SHAPE))
    assert [m for m in _members(model) if "div" in m or "erf" in m] == [("div",), ("erf",)]


def _transposes(perms: list[tuple[int, ...]], shape: list[int]) -> onnx.ModelProto:
    """A Relu, then each Transpose in turn (as an exporter writes NCHW <-> NHWC around a LayerNorm)."""
    nodes = [helper.make_node("Relu", ["x"], ["t0"], name="relu")]
    for i, perm in enumerate(perms):
        nodes.append(helper.make_node("Transpose", [f"t{i}"], [f"t{i + 1}"], name=f"transpose{i}", perm=list(perm)))
    out = shape
    for perm in perms:
        out = [out[p] for p in perm]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(f"t{len(perms)}", TensorProto.FLOAT, out)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_channel_move_is_free_only_where_feature_maps_are_stored_channel_last() -> None:
    """With ``channels_last`` NCHW -> NHWC and back move no byte; a swap of H and W does, and so does a 3-D
    transpose. Without it (TIDL keeps NCHW) every Transpose is a layout pass."""
    nchw = load_npu_hardware("tda4vm")
    nhwc = dataclasses.replace(nchw, channels_last=True)
    assert not nchw.channels_last
    four = GraphInfo.of(_transposes([(0, 2, 3, 1), (0, 1, 3, 2), (0, 3, 1, 2)], [1, 32, 16, 8]))
    assert [layer.free for layer in layers_of(four, nhwc)] == [False, True, False, True]
    assert [layer.free for layer in layers_of(four, nchw)] == [False, False, False, False]
    three = GraphInfo.of(_transposes([(0, 2, 1)], [1, 32, 49]))
    assert [layer.free for layer in layers_of(three, nhwc)] == [False, False]


def _cuts() -> onnx.ModelProto:
    """YOLOv8's C2f opening: a Relu, its channels split in two (Split), each half cut again (a Slice of the
    channels, a Slice of the rows), and a 3-D Split of a token tensor."""
    starts, axes = (numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("starts", [0]), ("axes", [1])))
    rows, top = (numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("rows", [2]), ("top", [4])))
    half = numpy_helper.from_array(np.array([8, 8], np.int64), "half")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Split", ["r", "half"], ["a", "b"], name="split", axis=1),
             helper.make_node("Slice", ["a", "starts", "top", "axes"], ["a1"], name="channels"),
             helper.make_node("Slice", ["b", "starts", "top", "rows"], ["b1"], name="rows"),
             helper.make_node("Reshape", ["r", "tokens_shape"], ["tokens"], name="tokens"),
             helper.make_node("Split", ["tokens", "half"], ["t1", "t2"], name="split_tokens", axis=1)]
    shape = numpy_helper.from_array(np.array([1, 16, 64], np.int64), "tokens_shape")
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("a1", "b1", "t1", "t2")],
        [starts, axes, rows, top, half, shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("platform", ["tda4vm", "x5"])
def test_a_cut_of_the_channels_alone_is_free(platform: str) -> None:
    """A Split or Slice that only cuts a 4-D tensor's channels moves no byte (each reader reads its channels in
    place, as a Concat's producers write theirs), whatever the layout; a cut of the rows does, and so does a
    split of a 3-D tensor."""
    layers = {layer.name: layer for layer in layers_of(GraphInfo.of(_cuts()), load_npu_hardware(platform))}
    assert layers["split"].free and layers["channels"].free
    assert not layers["rows"].free and not layers["split_tokens"].free and not layers["relu"].free
