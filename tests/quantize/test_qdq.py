"""Post-training QDQ quantization: the graph onnxruntime runs equals a numpy model of the same integer
arithmetic, and the rules integer engines follow hold (fusion, pass-through, shared Concat scales,
per-layer bits, float nodes, shape arithmetic left alone)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

from accelbuild.frontends.onnx_model import save_onnx, serialize
from accelbuild.quantize import measure
from accelbuild.quantize.calibration import QuantParams
from accelbuild.quantize.qdq import QdqConfig, QdqResult, build, calibrate, quantize_qdq
from accelbuild.quantize.qdq.integers import INT32_MAX, integer_weights


def _init(name: str, shape: list[int], scale: float = 0.3) -> onnx.TensorProto:
    """Weights seeded by the tensor's name: every call builds the same model."""
    rng = np.random.default_rng(sum(map(ord, name)) + len(shape))
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _vi(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes, inits, inputs, outputs, opset: int = 13) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def residual_model() -> onnx.ModelProto:
    """x -> Conv -> Relu (r1) -> Conv (c2) -> Add(c2, r1) -> Concat(add, r1) -> y."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["a"], name="add"),
             helper.make_node("Concat", ["a", "r1"], ["y"], name="concat", axis=1)]
    inits = [_init("w1", [4, 3, 3, 3]), _init("b1", [4], 0.1), _init("w2", [4, 4, 3, 3]), _init("b2", [4], 0.1)]
    return _model(nodes, inits, [_vi("x", [1, 3, 8, 8])], [_vi("y", [1, 8, 8, 8])])


def frames(n: int = 12, shape: tuple[int, ...] = (1, 3, 8, 8), name: str = "x") -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [{name: rng.random(shape, dtype=np.float32)} for _ in range(n)]


def run(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The QDQ graph as the ONNX operators define it, in the session the quantize stage measures with.

    onnxruntime's default optimisations fuse DequantizeLinear -> Conv -> QuantizeLinear into its integer
    kernels; on x86 CPUs without VNNI those multiply with VPMADDUBSW, whose int16 pair sums saturate
    (onnxruntime documents it and offers 7-bit ``reduce_range`` weights), so their codes are not the
    integer arithmetic an accelerator performs: up to 26 steps off here on an AVX2-only EPYC, exact on
    AVX-512 VNNI. That the fused form loads and runs is tested below."""
    return measure.session(model).run(None, feed)


def initializer(result: QdqResult, name: str) -> np.ndarray:
    return next(numpy_helper.to_array(t) for t in result.model.graph.initializer if t.name == name)


def nodes_of(result: QdqResult, op: str) -> list[onnx.NodeProto]:
    return [n for n in result.model.graph.node if n.op_type == op]


# --- the numpy model of the integer engine --------------------------------------------------------

def int_conv(codes: np.ndarray, zero: int, weights: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """3x3, pad 1, stride 1, on integer codes: exact int64 accumulators."""
    x = np.pad(codes.astype(np.int64) - zero, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = sliding_window_view(x, (3, 3), axis=(2, 3))  # [n, c, h, w, 3, 3]
    return np.einsum("nchwij,mcij->nmhw", windows, weights.astype(np.int64)) + bias.astype(np.int64)[None, :, None, None]


def requantize(acc: np.ndarray, acc_scale: np.ndarray, out: QuantParams, relu: bool = False) -> np.ndarray:
    real = acc.astype(np.float64) * acc_scale.astype(np.float64)[None, :, None, None]
    if relu:
        real = np.maximum(real, 0.0)
    return np.clip(np.rint(real / out.scale) + out.zero_point, out.qmin, out.qmax).astype(np.int64)


def reference_codes(result: QdqResult, x: np.ndarray) -> np.ndarray:
    p = result.params
    qx = p["x"].quantize(x).astype(np.int64)
    w1, w2 = initializer(result, "conv1/weight_quantized"), initializer(result, "conv2/weight_quantized")
    s1, s2 = initializer(result, "conv1/weight_scale"), initializer(result, "conv2/weight_scale")
    b1, b2 = initializer(result, "conv1/bias_quantized"), initializer(result, "conv2/bias_quantized")
    r1 = requantize(int_conv(qx, p["x"].zero_point, w1, b1), p["x"].scale * s1, p["r1"], relu=True)
    c2 = requantize(int_conv(r1, p["r1"].zero_point, w2, b2), p["r1"].scale * s2, p["c2"])
    add = (c2 - p["c2"].zero_point) * p["c2"].scale + (r1 - p["r1"].zero_point) * p["r1"].scale
    a = np.clip(np.rint(add / p["a"].scale) + p["a"].zero_point, p["a"].qmin, p["a"].qmax)
    if p["y"] == p["a"] == p["r1"]:  # shared scale: the engine concatenates codes
        return np.concatenate([a, r1], axis=1)
    real = np.concatenate([(a - p["a"].zero_point) * p["a"].scale, (r1 - p["r1"].zero_point) * p["r1"].scale], 1)
    return np.clip(np.rint(real / p["y"].scale) + p["y"].zero_point, p["y"].qmin, p["y"].qmax)


@pytest.mark.parametrize("share", [False, True])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("bits", [8, 16])
def test_onnxruntime_runs_the_same_integer_arithmetic_as_numpy(share: bool, symmetric: bool, bits: int) -> None:
    feeds = frames()
    config = QdqConfig(activation_bits=bits, weight_bits=bits, symmetric=symmetric, share_concat_scales=share,
                       method="minmax")
    result = quantize_qdq(residual_model(), feeds[:8], config)
    out = result.params["y"]
    for feed in feeds[8:]:
        got = np.rint(run(result.model, feed)[0] / out.scale) + out.zero_point
        want = reference_codes(result, feed["x"])
        diff = np.abs(got - want)
        assert diff.max() <= 1 and np.mean(diff == 0) >= 0.97, (diff.max(), np.mean(diff == 0))
    float_out, q_out = run(residual_model(), feeds[9])[0], run(result.model, feeds[9])[0]
    cosine = np.dot(float_out.ravel(), q_out.ravel()) / np.linalg.norm(float_out) / np.linalg.norm(q_out)
    assert cosine > 0.999


def test_model_form_opset_ir_and_records(tmp_path) -> None:
    result = quantize_qdq(residual_model(), frames(4), QdqConfig(method="entropy"))
    model = result.model
    assert next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) == 19  # 8-bit only
    save_onnx(model, tmp_path / "q.onnx")
    session = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["x"] and [o.name for o in session.get_outputs()] == ["y"]
    onnx.checker.check_model(onnx.load(str(tmp_path / "q.onnx")), full_check=True)
    assert initializer(result, "conv1/weight_quantized").dtype == np.int8
    assert initializer(result, "conv1/bias_quantized").dtype == np.int32
    np.testing.assert_allclose(initializer(result, "conv1/bias_scale"),
                               result.params["x"].scale * initializer(result, "conv1/weight_scale"), rtol=1e-6)
    record = result.calibration_record()
    assert set(record["tensors"]) == {"x", "r1", "c2", "a", "y"}
    assert set(record["tensors"]["r1"]) >= {"range", "scale", "zero_point", "bits", "method", "frames"}
    assert record["tensors"]["r1"]["frames"] == 4 and record["tensors"]["r1"]["method"] == "entropy"
    assert [layer["name"] for layer in record["layers"]] == ["conv1", "conv2"]


def test_conv_and_relu_share_one_output_quantization() -> None:
    result = quantize_qdq(residual_model(), frames(4))
    quantized_inputs = {n.input[0] for n in nodes_of(result, "QuantizeLinear")}
    relu = next(n for n in result.model.graph.node if n.name == "relu1")
    conv = next(n for n in result.model.graph.node if n.name == "conv1")
    assert relu.input[0] == conv.output[0] == "c1" and "c1" not in quantized_inputs
    assert "c1" not in result.params and result.params["r1"].low == 0.0


def test_concat_shares_one_scale_only_when_asked() -> None:
    separate = quantize_qdq(residual_model(), frames(4), QdqConfig(share_concat_scales=False)).params
    shared = quantize_qdq(residual_model(), frames(4), QdqConfig(share_concat_scales=True)).params
    assert len({separate[t] for t in ("a", "r1", "y")}) > 1
    assert shared["a"] == shared["r1"] == shared["y"]


def pass_through_model() -> onnx.ModelProto:
    shape = numpy_helper.from_array(np.array([1, 4, 4, 4], np.int64), "shape")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Sigmoid", ["c"], ["s"], name="sigmoid"),
             helper.make_node("MaxPool", ["s"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Transpose", ["p"], ["t"], name="transpose", perm=[0, 1, 3, 2]),
             helper.make_node("Reshape", ["t", "shape"], ["r"], name="reshape"),
             helper.make_node("Resize", ["r", "", "scales"], ["up"], name="nearest", mode="nearest"),
             helper.make_node("Resize", ["r", "", "scales"], ["lin"], name="linear", mode="linear"),
             helper.make_node("Flatten", ["up"], ["f"], name="flatten"),
             helper.make_node("Flatten", ["lin"], ["g"], name="flatten2")]
    return _model(nodes, [_init("w", [4, 3, 1, 1]), shape, scales], [_vi("x", [1, 3, 8, 8])],
                  [_vi("f", [1, 256]), _vi("g", [1, 256])])


def test_pass_through_operators_keep_the_input_scale() -> None:
    result = quantize_qdq(pass_through_model(), frames(4))
    p = result.params
    assert p["s"] == p["p"] == p["t"] == p["r"] == p["up"] == p["f"]
    assert p["lin"] != p["s"] and p["g"] == p["lin"]
    assert set(result.tensors["p"]["shared_with"]) == {"s", "t", "r", "up", "f"}


def test_per_layer_bits_set_weights_and_output_activation() -> None:
    result = quantize_qdq(residual_model(), frames(4), QdqConfig(bits={"conv2": 16}))
    assert initializer(result, "conv2/weight_quantized").dtype == np.int16
    assert initializer(result, "conv1/weight_quantized").dtype == np.int8
    assert result.params["c2"].bits == 16 and result.params["c2"].dtype == np.int16
    assert result.params["r1"].bits == 8 and result.params["a"].bits == 8
    # the fused pair answers to the weighted layer's name: conv1's output activation is relu1's
    assert quantize_qdq(residual_model(), frames(4), QdqConfig(bits={"conv1": 16})).params["r1"].bits == 16
    layers = {r["name"]: r for r in result.layers}
    assert layers["conv2"]["bits"] == 16 and layers["conv2"]["weight_bytes"] == 2 * layers["conv2"]["weights"]


def test_build_rebuilds_other_bits_from_one_calibration() -> None:
    calibrated = calibrate(residual_model(), frames(4), QdqConfig())
    eight, sixteen = build(calibrated), build(calibrated, bits={"add": 16})
    assert eight.params["a"].bits == 8 and sixteen.params["a"].bits == 16
    assert eight.params["a"].low == sixteen.params["a"].low and sixteen.tensors["a"]["frames"] == 4


def test_float_nodes_stay_float_without_qdq() -> None:
    result = quantize_qdq(residual_model(), frames(4), QdqConfig(float_nodes=frozenset({"concat"})))
    concat = next(n for n in result.model.graph.node if n.name == "concat")
    assert concat.output[0] == "y" and "y" not in result.params
    assert all(n.input[0] != "y" and not n.input[0].startswith("y/") for n in nodes_of(result, "QuantizeLinear"))
    # its inputs come from quantized layers, so the host reads their dequantized values
    assert "a" in result.params and "r1" in result.params
    host = quantize_qdq(residual_model(), frames(4), QdqConfig(float_nodes=frozenset({"conv2"})))
    conv2 = next(n for n in host.model.graph.node if n.name == "conv2")
    assert conv2.input[1] == "w2" and "c2" in host.params  # float weights; Add (quantized) reads c2


def test_shape_arithmetic_is_not_quantized() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Shape", ["r"], ["shape"], name="shape"),
             helper.make_node("Cast", ["shape"], ["shape_f"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["shape_f", "two"], ["sizes_f"], name="double"),
             helper.make_node("Cast", ["sizes_f"], ["sizes"], name="cast_back", to=TensorProto.INT64),
             helper.make_node("Resize", ["r", "", "", "sizes"], ["y"], name="resize", mode="nearest")]
    two = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "two")
    model = _model(nodes, [two], [_vi("x", [1, 3, 4, 4])], [_vi("y", [1, 3, 8, 8])])
    result = quantize_qdq(model, frames(3, (1, 3, 4, 4)))
    assert set(result.params) == {"x", "r", "y"}
    double = next(n for n in result.model.graph.node if n.name == "double")
    assert double.input[1] == "two"  # its constant operand stays float too
    np.testing.assert_allclose(run(result.model, frames(1, (1, 3, 4, 4))[0])[0].shape, (1, 3, 8, 8))


def test_constant_operands_are_quantized_per_tensor() -> None:
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"], name="mul"), helper.make_node("Add", ["m", "c"], ["y"], name="add")]
    inits = [_init("k", [1, 3, 1, 1]), _init("c", [1])]
    result = quantize_qdq(_model(nodes, inits, [_vi("x", [1, 3, 4, 4])], [_vi("y", [1, 3, 4, 4])]),
                          frames(3, (1, 3, 4, 4)))
    mul = next(n for n in result.model.graph.node if n.name == "mul")
    assert mul.input[1] == "mul/input1/dequantized"
    assert initializer(result, "mul/input1/quantized").dtype == np.int8


def test_gemm_and_matmul_layers() -> None:
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "m"], ["y"], name="proj")]
    inits = [_init("w", [8, 6]), _init("b", [8]), _init("m", [8, 5])]
    model = _model(nodes, inits, [_vi("x", [1, 6])], [_vi("y", [1, 5])])
    feeds = frames(10, (1, 6))
    result = quantize_qdq(model, feeds)
    assert "h" not in result.params and set(result.params) == {"x", "r", "y"}
    assert initializer(result, "fc/weight_scale").shape == (8,) and initializer(result, "proj/weight_scale").shape == (5,)
    want, got = run(model, feeds[0])[0], run(result.model, feeds[0])[0]
    assert np.dot(want.ravel(), got.ravel()) / np.linalg.norm(want) / np.linalg.norm(got) > 0.995


def test_unknown_layer_names_and_bad_settings() -> None:
    with pytest.raises(ValueError, match="no node named 'nope'"):
        quantize_qdq(residual_model(), frames(1), QdqConfig(bits={"nope": 16}))
    with pytest.raises(ValueError, match="float_nodes"):
        quantize_qdq(residual_model(), frames(1), QdqConfig(float_nodes=frozenset({"ghost"})))
    with pytest.raises(ValueError):
        QdqConfig(weight_bits=4)
    with pytest.raises(ValueError):
        QdqConfig(method="kl")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        quantize_qdq(residual_model(), [])


def test_int32_bias_overflow_raises_the_weight_scale() -> None:
    weight = np.full((2, 1, 1, 1), 1e-6, np.float32)
    bias = np.array([1000.0, 0.5], np.float32)
    ints = integer_weights(weight, 0, 8, input_scale=1e-6, bias=bias)
    assert np.all(np.abs(ints.bias_codes.astype(np.int64)) <= INT32_MAX)
    np.testing.assert_allclose(ints.bias_codes * ints.bias_scales, bias, rtol=1e-6)
    assert ints.scales[0] > ints.scales[1]
    assert ints.raised_for_bias == 2  # both channels; reported in the layer record, and once by the quantize stage


def test_bounded_activations_are_never_clipped() -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Sigmoid", ["c"], ["s"], name="sigmoid"),
             helper.make_node("Softmax", ["c"], ["y"], name="softmax", axis=1)]
    model = _model(nodes, [_init("w", [4, 3, 1, 1], 3.0)], [_vi("x", [1, 3, 8, 8])],
                   [_vi("s", [1, 4, 8, 8]), _vi("y", [1, 4, 8, 8])])
    feeds = frames(3)
    result = quantize_qdq(model, feeds, QdqConfig(method="entropy"))
    outputs = ort.InferenceSession(serialize(model), providers=["CPUExecutionProvider"]).run(None, feeds[0])
    assert result.params["y"].high == pytest.approx(max(float(o.max()) for o in outputs[1:]), rel=0.05)
    assert result.tensors["y"]["method"] == result.tensors["s"]["method"] == "minmax"
    assert result.tensors["c"]["method"] == "entropy"


def test_matmul_bias_add_is_an_int32_bias_without_qdq_between() -> None:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="fc"),
             helper.make_node("Add", ["m", "b"], ["a"], name="fc.bias"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    model = _model(nodes, [_init("w", [6, 4]), _init("b", [1, 4], 0.5)], [_vi("x", [2, 6])], [_vi("y", [2, 4])])
    feeds = frames(6, (2, 6))
    result = quantize_qdq(model, feeds, QdqConfig(bits={"fc": 16}))
    assert set(result.params) == {"x", "y"} and result.params["y"].bits == 16  # the fused chain answers to fc
    bias = initializer(result, "fc/bias_quantized")
    assert bias.dtype == np.int32 and bias.shape == (1, 4)
    np.testing.assert_allclose(initializer(result, "fc/bias_scale"),
                               result.params["x"].scale * initializer(result, "fc/weight_scale"), rtol=1e-6)
    want, got = run(model, feeds[0])[0], run(result.model, feeds[0])[0]
    assert np.abs(want - got).max() < 0.01 * np.abs(want).max()


def test_decomposed_layer_norm_stays_float_between_quantized_neighbours() -> None:
    two, eps = numpy_helper.from_array(np.array(2.0, np.float32), "two"), numpy_helper.from_array(
        np.array(1e-5, np.float32), "eps")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
             helper.make_node("ReduceMean", ["h"], ["mean"], name="ln.mean", axes=[-1]),
             helper.make_node("Sub", ["h", "mean"], ["centred"], name="ln.sub"),
             helper.make_node("Pow", ["centred", "two"], ["squared"], name="ln.pow"),
             helper.make_node("ReduceMean", ["squared"], ["var"], name="ln.var", axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["var_eps"], name="ln.eps"),
             helper.make_node("Sqrt", ["var_eps"], ["std"], name="ln.sqrt"),
             helper.make_node("Div", ["centred", "std"], ["normed"], name="ln.div"),
             helper.make_node("Mul", ["normed", "gamma"], ["scaled"], name="ln.scale"),
             helper.make_node("Add", ["scaled", "beta"], ["ln"], name="ln.shift"),
             helper.make_node("MatMul", ["ln", "w2"], ["y"], name="out")]
    inits = [_init("w", [8, 8]), two, eps, _init("gamma", [8]), _init("beta", [8]), _init("w2", [8, 3])]
    model = _model(nodes, inits, [_vi("x", [1, 4, 8])], [_vi("y", [1, 4, 3])])
    result = quantize_qdq(model, frames(4, (1, 4, 8)))
    assert set(result.params) == {"x", "h", "ln", "y"}
    ln = next(n for n in result.model.graph.node if n.name == "ln.shift")
    assert ln.input[1] == "beta"  # the affine part keeps float parameters


def test_bias_correction_removes_the_mean_output_shift_and_adds_a_missing_bias() -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]  # no bias
    model = _model(nodes, [_init("w", [8, 16, 1, 1], 1.0)], [_vi("x", [1, 16, 6, 6])], [_vi("y", [1, 8, 6, 6])])
    rng = np.random.default_rng(5)
    feeds = [{"x": (rng.standard_normal((1, 16, 6, 6)) * 0.1 + 4.0).astype(np.float32)} for _ in range(8)]
    config = QdqConfig(method="minmax", activation_bits=16)  # 16-bit activations: the weight error shows
    corrected = quantize_qdq(model, feeds, config)
    plain = quantize_qdq(model, feeds, QdqConfig(method="minmax", activation_bits=16, bias_correction=False))
    want = np.stack([run(model, f)[0] for f in feeds])
    shift = {name: np.abs((np.stack([run(r.model, f)[0] for f in feeds]) - want).mean(axis=(0, 1, 3, 4))).max()
             for name, r in (("corrected", corrected), ("plain", plain))}
    assert shift["corrected"] < 0.2 * shift["plain"]
    conv = next(n for n in corrected.model.graph.node if n.name == "conv")
    assert len(conv.input) == 3 and conv.input[2] == "conv/bias_dequantized"
    assert corrected.layers[0]["bias_corrected"] and not plain.layers[0]["bias_corrected"]
    assert len(next(n for n in plain.model.graph.node if n.name == "conv").input) == 2


def test_output_shift_of_grouped_convs_and_matmul() -> None:
    from accelbuild.quantize.qdq.bias_correction import output_shift
    from accelbuild.quantize.weights import WeightedLayer

    rng = np.random.default_rng(6)
    delta, mean = rng.standard_normal((6, 2, 3, 3)), rng.standard_normal(6)  # 3 groups of 2 -> 2
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="c", group=3)
    shift = output_shift(conv, WeightedLayer("c", "Conv", "w", 1, 0, (6, 2, 3, 3)), mean)
    want = [sum(delta[m, c].sum() * mean[(m // 2) * 2 + c] for c in range(2)) for m in range(6)]
    np.testing.assert_allclose(shift(delta), want)
    matmul = helper.make_node("MatMul", ["x", "w"], ["y"], name="m")
    delta, mean = rng.standard_normal((4, 5)), rng.standard_normal(4)
    np.testing.assert_allclose(output_shift(matmul, WeightedLayer("m", "MatMul", "w", 1, 1, (4, 5)), mean)(delta),
                               mean @ delta)


def test_eight_bit_models_load_with_onnxruntimes_default_optimisations() -> None:
    """A float (host) MaxPool chain behind a DequantizeLinear made onnxruntime 1.32's QDQ propagation and
    S8->U8 transformers write an inconsistent QuantizeLinear at opset 21; 8-bit models are at opset 19."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", onnx.TensorProto.FLOAT, [4, 3, 3, 3], rng.normal(size=108).astype(np.float32))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["p0"], name="pool0", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["p0"], ["y"], name="pool1", kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    model = _model(nodes, [w], [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])],
                   [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 8, 8])])
    feeds = [{"x": rng.normal(size=(1, 3, 8, 8)).astype(np.float32)} for _ in range(4)]
    for bits, opset in (({}, 19), ({"conv": 16}, 21)):
        result = quantize_qdq(model, feeds, QdqConfig(float_nodes=frozenset({"pool0", "pool1"}), bits=bits))
        assert next(o.version for o in result.model.opset_import if o.domain in ("", "ai.onnx")) == opset
        session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
        assert session.run(None, feeds[0])[0].shape == (1, 4, 8, 8)


def test_a_node_reading_infinities_stays_float() -> None:
    """A -inf mask added before a Softmax (magika's shape): no integer grid holds it, so the Add stays float
    instead of crashing the quantizer on an infinite scale."""
    from onnx import TensorProto, helper, numpy_helper

    from accelbuild.quantize.qdq import QdqConfig, quantize_qdq

    mask = np.zeros((1, 8), np.float32)
    mask[0, 5:] = -np.inf
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "mask"], ["masked"], name="mask_add"),
             helper.make_node("Softmax", ["masked"], ["y"], axis=-1, name="softmax")]
    model = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
                                                [numpy_helper.from_array(mask, "mask")]),
                              opset_imports=[helper.make_opsetid("", 17)])
    feeds = [{"x": np.random.default_rng(i).standard_normal((1, 8)).astype(np.float32)} for i in range(4)]
    result = quantize_qdq(model, feeds, QdqConfig(conventions="tflite"))
    add = [n for n in result.model.graph.node if n.name == "mask_add"]
    assert add and all(t.name != "mask" or t.data_type == TensorProto.FLOAT for t in result.model.graph.initializer)
