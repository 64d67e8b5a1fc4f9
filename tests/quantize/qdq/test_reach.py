"""Graph outputs a Conv writes cover what it can reach (accelbuild/quantize/qdq/reach.py), on small generated models."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from accelbuild.quantize import measure
from accelbuild.quantize.qdq import QdqConfig, quantize_qdq
from accelbuild.quantize.qdq.reach import ChannelRange, reachable
from accelbuild.quantize.weights import cosine_similarity

C, M = 6, 3


def head(activation: str = "", hidden: bool = False, read_on: bool = False) -> onnx.ModelProto:
    """x [1, C, 8, 8] -> (a 1x1 Conv and Relu, when ``hidden``) -> 1x1 Conv to M channels (-> ``activation``) -> y.

    The head's weights are mostly negative, as a detector's score head: its output is most negative when
    every input channel is high at once. ``read_on``: a Relu reads y too, giving a second output."""
    rng = np.random.default_rng(0)
    weight = (-np.abs(rng.normal(0, 1, (M, C, 1, 1))) + 0.1).astype(np.float32)
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.full(M, 0.5, np.float32), "b")]
    nodes, tensor = [], "x"
    if hidden:
        inits.append(numpy_helper.from_array(np.eye(C, dtype=np.float32).reshape(C, C, 1, 1), "w0"))
        nodes += [helper.make_node("Conv", ["x", "w0"], ["h"], name="hidden"),
                  helper.make_node("Relu", ["h"], ["r"], name="relu_h")]
        tensor = "r"
    nodes.append(helper.make_node("Conv", [tensor, "w", "b"], ["z" if activation else "y"], name="head"))
    if activation:
        nodes.append(helper.make_node(activation, ["z"], ["y"], name="act"))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if read_on:
        nodes.append(helper.make_node("Relu", ["y"], ["after"], name="relu_y"))
        outputs.append(helper.make_tensor_value_info("after", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 8, 8])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def one_channel_frames(count: int) -> list[dict[str, np.ndarray]]:
    """Calibration frames in which one channel at a time is high (up to 2), the others near zero."""
    rng = np.random.default_rng(1)
    frames = []
    for i in range(count):
        x = np.abs(rng.normal(0, 0.05, (1, C, 8, 8))).astype(np.float32)
        x[0, i % C] = rng.uniform(0, 2, (8, 8))
        frames.append({"x": x})
    return frames


def all_channels_frame() -> dict[str, np.ndarray]:
    """Every channel high at once on the left half, one on the right: each within what calibration saw of it,
    the output's left half far beyond."""
    x = np.random.default_rng(2).uniform(0, 2, (1, C, 8, 8)).astype(np.float32)
    x[0, 1:, :, 4:] = 0.0
    return {"x": x}


def cosine(model: onnx.ModelProto, quantized: onnx.ModelProto, feed: dict[str, np.ndarray]) -> float:
    want, got = measure.session(model).run(["y"], feed)[0], measure.session(quantized).run(["y"], feed)[0]
    return cosine_similarity(want.ravel().astype(np.float64), got.ravel().astype(np.float64))


def test_an_output_beyond_the_calibration_frames_no_longer_saturates() -> None:
    model, held_out = head(), all_channels_frame()
    plain = quantize_qdq(model, one_channel_frames(12), QdqConfig(conventions="tflite", reachable_outputs=False))
    covered = quantize_qdq(model, one_channel_frames(12), QdqConfig(conventions="tflite"))
    before, after = cosine(model, plain.model, held_out), cosine(model, covered.model, held_out)
    assert before < 0.99 < 0.9999 < after, (before, after)
    low, high = covered.tensors["y"]["reachable_from_inputs"]
    assert covered.tensors["y"]["range"] == [low, high]
    assert low <= float(measure.session(model).run(["y"], held_out)[0].min())
    assert "reachable_from_inputs" not in plain.tensors["y"]


def test_only_graph_outputs_widen_and_only_with_tflite_conventions() -> None:
    model = head(hidden=True)
    tflite = quantize_qdq(model, one_channel_frames(12), QdqConfig(conventions="tflite"))
    onnx_rules = quantize_qdq(model, one_channel_frames(12), QdqConfig())
    assert "reachable_from_inputs" in tflite.tensors["y"]
    assert "reachable_from_inputs" not in tflite.tensors["r"]  # read by the head: its own range stands
    assert "reachable_from_inputs" not in onnx_rules.tensors["y"]
    read_on = quantize_qdq(head(read_on=True), one_channel_frames(12), QdqConfig(conventions="tflite"))
    assert "reachable_from_inputs" not in read_on.tensors["y"]  # the Relu reading it needs its resolution


def test_a_fused_relu_cuts_the_reachable_interval_at_zero() -> None:
    covered = quantize_qdq(head("Relu"), one_channel_frames(12), QdqConfig(conventions="tflite"))
    low, high = covered.tensors["y"]["reachable_from_inputs"]
    assert low == 0.0 and high > 0.0
    assert covered.tensors["y"]["range"][0] == 0.0


def test_reachable_is_the_tightest_interval_of_a_grouped_padded_conv() -> None:
    rng = np.random.default_rng(3)
    channels, outputs, groups = 4, 6, 2
    weight = rng.normal(0, 1, (outputs, channels // groups, 3, 3)).astype(np.float32)
    bias = rng.normal(0, 1, outputs).astype(np.float32)
    lo, hi = -rng.uniform(0, 1, channels), rng.uniform(0, 2, channels)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", group=groups, pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    low, high = reachable(node, graph, lo, hi)
    session = measure.session(model)
    samples = rng.uniform(lo[None, :, None, None], hi[None, :, None, None], (200, channels, 3, 3)).astype(np.float32)
    values = np.concatenate([session.run(["y"], {"x": s[None]})[0].ravel() for s in samples])
    assert low - 1e-5 <= values.min() and values.max() <= high + 1e-5
    # the centre output sees all nine taps: the input at each tap's extreme attains the interval's end
    sums = []
    for o in range(outputs):
        first = (o // (outputs // groups)) * (channels // groups)
        x = np.zeros((1, channels, 3, 3), np.float32)
        for k in range(channels // groups):
            x[0, first + k] = np.where(weight[o, k] > 0, hi[first + k], lo[first + k])
        sums.append(float(session.run(["y"], {"x": x})[0][0, o, 1, 1]))
    assert abs(max(sums) - high) < 1e-4, (sums, high)


def test_channel_range_keeps_each_channels_extremes_over_frames_and_skips_non_finite_values() -> None:
    ranges = ChannelRange()
    ranges.add(np.array([[[1.0, -2.0]], [[3.0, np.inf]]], np.float32).reshape(1, 2, 1, 2))
    ranges.add(np.array([[[0.5]], [[-1.0]]], np.float32).reshape(1, 2, 1, 1))
    low, high = ranges.range
    np.testing.assert_allclose(low, [-2.0, -1.0])
    np.testing.assert_allclose(high, [1.0, 3.0])
