"""Depthwise-pointwise equalization (accelbuild/quantize/qdq/equalization.py) on small generated models."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from accelbuild.quantize import measure
from accelbuild.quantize.qdq import QdqConfig, calibrate, equalization, prepare, quantize_qdq
from accelbuild.quantize.weights import cosine_similarity

C, M = 8, 4


def separable(wide: float = 100.0, pointwise_kernel: int = 1, extra_reader: bool = False,
              depthwise_is_output: bool = False) -> onnx.ModelProto:
    """x -> depthwise 3x3 (channel 0 ``wide`` times the others) -> Conv k x k to M channels -> y.

    Channel 0's 1x1 weights are ``1 / wide`` of the others', so every channel counts in y about as much:
    the case of BlazeFace's last block (one depthwise channel at 304, the median at 3)."""
    rng = np.random.default_rng(0)
    dw = rng.normal(0, 0.3, (C, 1, 3, 3)).astype(np.float32)
    dw[0] *= wide
    pw = rng.normal(0, 0.3, (M, C, pointwise_kernel, pointwise_kernel)).astype(np.float32)
    pw[:, 0] /= wide
    nodes = [helper.make_node("Conv", ["x", "dw_w", "dw_b"], ["d"], name="dw", group=C, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d", "pw_w"], ["y"], name="pw")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["d"], ["r"], name="relu"))
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
    if depthwise_is_output:
        outputs.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, None))
    inits = [numpy_helper.from_array(dw, "dw_w"),
             numpy_helper.from_array(rng.normal(0, 0.1, C).astype(np.float32), "dw_b"),
             numpy_helper.from_array(pw, "pw_w")]
    graph = helper.make_graph(nodes, "separable", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  [1, C, 12, 12])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def frames(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(0, 1, (1, C, 12, 12)).astype(np.float32)} for _ in range(count)]


def worst_cosine(model: onnx.ModelProto, quantized: onnx.ModelProto, feeds: list[dict]) -> float:
    reference, approx = measure.session(model), measure.session(quantized)
    return min(cosine_similarity(reference.run(["y"], f)[0].ravel().astype(np.float64),
                                 approx.run(["y"], f)[0].ravel().astype(np.float64)) for f in feeds)


def test_one_wide_depthwise_channel_no_longer_costs_the_others_their_codes() -> None:
    model, held_out = separable(), frames(4, seed=1)
    config = QdqConfig(conventions="tflite")
    plain = quantize_qdq(model, frames(8, seed=0), QdqConfig(conventions="tflite", equalize_depthwise=False))
    equalized = quantize_qdq(model, frames(8, seed=0), config)
    before, after = worst_cosine(model, plain.model, held_out), worst_cosine(model, equalized.model, held_out)
    assert before < 0.99  # the other seven channels get a couple of codes each
    assert after > 0.999
    records = {layer["name"]: layer["equalized"] for layer in equalized.layers}
    assert records == {"dw": True, "pw": True}
    assert not any(layer["equalized"] for layer in plain.layers)


def test_the_equalized_float_model_computes_the_same_function() -> None:
    model = separable()
    calibrated = calibrate(model, frames(4, seed=0), QdqConfig())
    assert calibrated.equalized == {"dw", "pw"}
    feed = frames(1, seed=2)[0]
    want = measure.session(model).run(["y"], feed)[0]
    got = measure.session(calibrated.model).run(["y"], feed)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    weights = {t.name: numpy_helper.to_array(t) for t in calibrated.model.graph.initializer}
    peaks = [float(np.abs(weights["dw_w"][c]).max()) for c in range(C)]
    assert max(peaks) / min(peaks) < 20  # was about 100 x apart


def test_only_a_depthwise_conv_read_by_a_1x1_conv_alone_is_rescaled() -> None:
    assert [p.depthwise for p in equalization.pairs(prepare(separable()))] == ["dw"]
    assert equalization.pairs(prepare(separable(pointwise_kernel=3))) == []  # 3x3 mixes positions
    assert equalization.pairs(prepare(separable(extra_reader=True))) == []  # a Relu reads it too
    assert equalization.pairs(prepare(separable(depthwise_is_output=True))) == []  # the user sees its values
    assert equalization.pairs(prepare(separable()), float_nodes={"pw"}) == []  # left float


def test_zero_ranges_keep_their_channels() -> None:
    pointwise = np.ones((M, 3, 1, 1), dtype=np.float32)
    pointwise[:, 2] = 0.0
    scales = equalization.scales(np.array([4.0, 0.0, 9.0]), pointwise)
    np.testing.assert_allclose(scales, [2.0, 1.0, 1.0])
