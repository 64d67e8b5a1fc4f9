"""Quantization arithmetic, channel axes, the quantized model, bf16 measurement, auto precision."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.quantize import auto_precision, measure, precision_measures
from accelbuild.quantize.rewrite import quantize_layers, quantized_model
from accelbuild.quantize.weights import dequantize, qmax, quantize, weight_bytes, weighted_layers


@pytest.mark.parametrize("bits", [4, 8, 16])
def test_error_is_at_most_half_a_step_inside_the_clipping_range(bits: int) -> None:
    w = np.random.default_rng(bits).standard_normal((6, 5, 3, 3)).astype(np.float32)
    w[2] = 0.0  # an all-zero channel stays exactly zero
    codes, scales = quantize(w, bits, axis=0)
    assert codes.min() >= -qmax(bits) and codes.max() <= qmax(bits)
    approx = dequantize(codes, scales, 0)
    for c in range(6):
        inside = np.abs(w[c]) <= scales[c] * qmax(bits)
        assert np.abs(approx[c] - w[c])[inside].max(initial=0) <= scales[c] / 2 + 1e-7
        assert scales[c] <= max(np.abs(w[c]).max(), 1e-30) / qmax(bits) * (1 + 1e-6) or c == 2
    assert np.all(approx[2] == 0.0)


@pytest.mark.parametrize("bits", [4, 8, 16])
def test_clipping_search_never_loses_to_max_abs_scaling(bits: int) -> None:
    w = np.random.default_rng(bits).standard_t(3, (16, 64)).astype(np.float32)  # heavy tails
    codes, scales = quantize(w, bits, axis=0)
    peak = np.abs(w).max(axis=1, keepdims=True) / qmax(bits)
    plain = np.clip(np.rint(w / peak), -qmax(bits), qmax(bits)) * peak
    ours = np.square(dequantize(codes, scales, 0) - w).sum(axis=1)
    assert np.all(ours <= np.square(plain - w).sum(axis=1) * (1 + 1e-6))


def test_weight_bytes_pack_four_bits_two_per_byte() -> None:
    assert weight_bytes(9, 4) == 5 and weight_bytes(9, 8) == 9 and weight_bytes(9, 16) == 18


def _model(nodes, inits, inputs, outputs) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _vi(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_channel_axes_of_each_weighted_op() -> None:
    rng = np.random.default_rng(0)
    def init(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
    nodes = [
        helper.make_node("Conv", ["x", "dw"], ["a"], name="depthwise", group=4, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["a", "gw"], ["b"], name="grouped", group=2),
        helper.make_node("ConvTranspose", ["b", "tw"], ["c"], name="transposed", strides=[2, 2]),
        helper.make_node("Flatten", ["c"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fw"], ["d"], name="gemm_t", transB=1),
        helper.make_node("MatMul", ["d", "mw"], ["y"], name="matmul"),
    ]
    inits = [init("dw", [4, 1, 3, 3]), init("gw", [6, 2, 1, 1]), init("tw", [6, 2, 2, 2]),
             init("fw", [5, 2 * 8 * 8]), init("mw", [5, 3])]
    model = _model(nodes, inits, [_vi("x", [1, 4, 4, 4])], [_vi("y", [1, 3])])
    axes = {layer.name: (layer.axis, layer.shape[layer.axis]) for layer in weighted_layers(model)}
    assert axes == {"depthwise": (0, 4), "grouped": (0, 6), "transposed": (1, 2), "gemm_t": (0, 5),
                    "matmul": (1, 3)}
    layers = weighted_layers(model)
    quantized = quantize_layers(model, layers, {layer.name: 8 for layer in layers})
    assert {q.layer.name: q.scales.size for q in quantized} == {
        "depthwise": 4, "grouped": 6, "transposed": 2, "gemm_t": 5, "matmul": 3}
    q_model = quantized_model(model, quantized)
    onnx.checker.check_model(q_model, full_check=True)
    x = rng.standard_normal((1, 4, 4, 4)).astype(np.float32)
    float_out = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    q_out = ort.InferenceSession(q_model.SerializeToString()).run(None, {"x": x})[0]
    assert measure.compare([[float_out]], [[q_out]])["cosine"] > 0.999


@pytest.mark.parametrize("bits", [4, 8, 16])
def test_quantized_model_matches_numpy_arithmetic(bits: int) -> None:
    rng = np.random.default_rng(7)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc")]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    model = _model(nodes, inits, [_vi("x", [2, 16])], [_vi("y", [2, 8])])
    layers = weighted_layers(model)
    q_model = quantized_model(model, quantize_layers(model, layers, {"fc": bits}))
    kinds = {t.name: t.data_type for t in q_model.graph.initializer}
    assert kinds[f"fc.weight_q{bits}"] == {4: TensorProto.INT4, 8: TensorProto.INT8, 16: TensorProto.INT16}[bits]
    assert kinds["b"] == TensorProto.FLOAT  # biases stay float
    x = rng.standard_normal((2, 16)).astype(np.float32)
    got = measure.session(q_model).run(None, {"x": x})[0]
    codes, scales = quantize(w, bits, axis=1)
    want = x @ dequantize(codes, scales, 1) + b
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_onnxruntime_bf16_casts_round_like_ml_dtypes() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    model = measure.with_bf16_activations(_model(nodes, [], [_vi("x", [4096])], [_vi("y", [4096])]))
    x = np.random.default_rng(1).standard_normal(4096).astype(np.float32) * 1000
    got = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    assert np.array_equal(got, np.maximum(x, 0).astype(ml_dtypes.bfloat16).astype(np.float32))


def test_auto_precision_raises_the_planted_sensitive_layer() -> None:
    rng = np.random.default_rng(3)
    smooth = rng.standard_normal((32, 8, 3, 3)).astype(np.float32)  # most of the weight memory
    spiky = (rng.standard_normal((8, 8, 1, 1)) * 0.01).astype(np.float32)
    spiky[:, 0] = 1.0  # one large weight per channel: at 4 bits every small weight rounds to zero
    nodes = [helper.make_node("Conv", ["x", "w2"], ["a"], name="spiky"),
             helper.make_node("Conv", ["a", "w1"], ["y"], name="smooth", pads=[1, 1, 1, 1])]
    inits = [numpy_helper.from_array(smooth, "w1"), numpy_helper.from_array(spiky, "w2")]
    model = _model(nodes, inits, [_vi("x", [1, 8, 4, 4])], [_vi("y", [1, 32, 4, 4])])
    x = rng.standard_normal((1, 8, 4, 4)).astype(np.float32)
    x[:, 0] = 0.0  # the large weight reads a silent channel: the signal lives in the small ones
    layers = weighted_layers(model)
    candidates = precision_measures.weight_candidates(layers, 4)
    decision = auto_precision.raise_to_target(candidates, precision_measures.weight_cosine(model, layers, [{"x": x}]),
                                              min_cosine=0.99)
    assert decision.reached
    assert decision.bits == {"smooth": 4, "spiky": 16}
    assert decision.record["raised"] == ["spiky"]
    sensitivity = decision.record["sensitivity_cosine"]
    assert sensitivity["spiky"] < sensitivity["smooth"]
