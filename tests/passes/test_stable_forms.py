"""Exporter spellings rewritten into stable forms: LeakyReLU as Max(x, a*x), variance as E[x^2] - E[x]^2."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from accelbuild.passes import run_passes
from accelbuild.passes.stable_forms import fuse_leaky_relu, stable_variance
from accelbuild.quantize import measure


def _model(nodes, inits, shape=(1, 4, 6, 6)) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return onnx.shape_inference.infer_shapes(model)


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_max_of_x_and_a_scaled_x_becomes_one_leaky_relu() -> None:
    nodes = [helper.make_node("Mul", ["x", "alpha"], ["ax"], name="scale"),
             helper.make_node("Max", ["ax", "x"], ["y"], name="leaky")]
    model = _model(nodes, [numpy_helper.from_array(np.array(0.1, np.float32), "alpha")])
    x = np.random.default_rng(0).standard_normal((1, 4, 6, 6)).astype(np.float32)
    want = _run(model, x)
    assert fuse_leaky_relu(model) == ["Max leaky of x and 0.1 * x -> LeakyRelu"]
    assert [(n.op_type, n.name) for n in model.graph.node] == [("LeakyRelu", "leaky")]
    np.testing.assert_allclose(_run(model, x), want, rtol=1e-6)


def test_max_with_a_slope_of_one_or_more_or_a_per_channel_slope_is_left_alone() -> None:
    for alpha in (np.array(1.5, np.float32), np.arange(4, dtype=np.float32).reshape(1, 4, 1, 1) / 10):
        nodes = [helper.make_node("Mul", ["x", "alpha"], ["ax"], name="scale"),
                 helper.make_node("Max", ["x", "ax"], ["y"], name="m")]
        model = _model(nodes, [numpy_helper.from_array(alpha, "alpha")])
        assert fuse_leaky_relu(model) == []


def _layer_norm_by_hand(eps: float = 1e-5) -> onnx.ModelProto:
    """LayerNorm over the last axis as exporters decompose it, with variance = E[x^2] - E[x]^2."""
    axes = numpy_helper.from_array(np.array([-1], np.int64), "axes")
    eps_t = numpy_helper.from_array(np.array(eps, np.float32), "eps")
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["mean"], name="mean", keepdims=1),
             helper.make_node("Mul", ["x", "x"], ["xsq"], name="xsq"),
             helper.make_node("ReduceMean", ["xsq", "axes"], ["mean_sq"], name="mean_sq", keepdims=1),
             helper.make_node("Mul", ["mean", "mean"], ["sq_mean"], name="sq_mean"),
             helper.make_node("Sub", ["mean_sq", "sq_mean"], ["var"], name="var"),
             helper.make_node("Add", ["var", "eps"], ["var_eps"], name="var_eps"),
             helper.make_node("Sqrt", ["var_eps"], ["std"], name="std"),
             helper.make_node("Sub", ["x", "mean"], ["centred"], name="centred"),
             helper.make_node("Div", ["centred", "std"], ["y"], name="norm")]
    return _model(nodes, [axes, eps_t], shape=(1, 16, 64))


def test_variance_by_cancellation_becomes_the_centred_form_and_survives_bfloat16() -> None:
    model = _layer_norm_by_hand()
    # a large offset and a small spread: E[x^2] and E[x]^2 agree in their first ~5 digits
    x = (100.0 + np.random.default_rng(1).standard_normal((1, 16, 64))).astype(np.float32)
    want = _run(model, x)
    naive = _run(measure.with_bf16_activations(model), x)
    assert stable_variance(model) == ["variance var: E[x^2] - E[x]^2 -> E[(x - E[x])^2]"]
    np.testing.assert_allclose(_run(model, x), want, rtol=1e-3, atol=1e-3)
    stable = _run(measure.with_bf16_activations(model), x)

    def cosine(a: np.ndarray) -> float:
        return float(np.dot(a.ravel(), want.ravel()) / (np.linalg.norm(a) * np.linalg.norm(want)))
    assert cosine(np.nan_to_num(naive)) < 0.9  # negative "variances" even give NaN
    assert cosine(stable) > 0.99


def _layer_norm_by_sums(eps: float = 1e-6) -> onnx.ModelProto:
    """Magika's LayerNorm as jax2tf exports it: means as ReduceSum(keepdims=0) * 1/N, broadcast back by
    Unsqueeze, and variance = E[x^2] - E[x]^2."""
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "axes"),
             numpy_helper.from_array(np.array(1 / 64, np.float32), "inv_n"),
             numpy_helper.from_array(np.array(eps, np.float32), "eps")]
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["sum"], name="sum", keepdims=0),
             helper.make_node("Mul", ["x", "x"], ["xsq"], name="xsq"),
             helper.make_node("ReduceSum", ["xsq", "axes"], ["sum_sq"], name="sum_sq", keepdims=0),
             helper.make_node("Mul", ["sum", "inv_n"], ["mean"], name="mean"),
             helper.make_node("Mul", ["inv_n", "sum_sq"], ["mean_sq"], name="mean_sq"),
             helper.make_node("Mul", ["mean", "mean"], ["sq_mean"], name="sq_mean"),
             helper.make_node("Sub", ["mean_sq", "sq_mean"], ["var"], name="var"),
             helper.make_node("Add", ["var", "eps"], ["var_eps"], name="var_eps"),
             helper.make_node("Sqrt", ["var_eps"], ["std"], name="std"),
             helper.make_node("Unsqueeze", ["std", "axes"], ["std_kept"], name="std_kept"),
             helper.make_node("Unsqueeze", ["mean", "axes"], ["mean_kept"], name="mean_kept"),
             helper.make_node("Sub", ["x", "mean_kept"], ["centred"], name="centred"),
             helper.make_node("Div", ["centred", "std_kept"], ["y"], name="norm")]
    return _model(nodes, inits, shape=(1, 16, 64))


def test_a_variance_from_sums_times_one_over_n_is_rewritten_too() -> None:
    """Before: the pass knew only ReduceMean, and Magika lost its accuracy on mx3 (cosine 0.387)."""
    model = _layer_norm_by_sums()
    x = (100.0 + np.random.default_rng(1).standard_normal((1, 16, 64))).astype(np.float32)
    want = _run(model, x)
    assert stable_variance(model) == ["variance var: E[x^2] - E[x]^2 -> E[(x - E[x])^2]"]
    assert [n.op_type for n in model.graph.node if n.name.startswith("var/")] == ["Unsqueeze", "Sub", "Mul"]
    np.testing.assert_allclose(_run(model, x), want, rtol=1e-3, atol=1e-3)
    stable = _run(measure.with_bf16_activations(model), x)
    cosine = float(np.dot(stable.ravel(), want.ravel()) / (np.linalg.norm(stable) * np.linalg.norm(want)))
    assert cosine > 0.99


def test_sums_times_another_factor_are_not_a_mean() -> None:
    model = _layer_norm_by_sums()
    next(t for t in model.graph.initializer if t.name == "inv_n").CopyFrom(
        numpy_helper.from_array(np.array(1 / 32, np.float32), "inv_n"))
    assert stable_variance(model) == []


def test_the_rewrites_are_recorded_only_where_they_happen() -> None:
    record = run_passes(_layer_norm_by_hand(), verify=True)
    assert [r["changes"] for r in record if r["pass"] == "stable_variance"] == [1]
    assert "fuse_leaky_relu" not in [r["pass"] for r in record]  # quiet: nothing to fuse


def test_max_or_min_with_one_constant_becomes_a_one_sided_clip() -> None:
    from accelbuild.passes.stable_forms import clip_from_bound

    nodes = [helper.make_node("LeakyRelu", ["x"], ["l"], alpha=0.2, name="leaky"),
             helper.make_node("Max", ["l", "floor"], ["m"], name="floor_max"),
             helper.make_node("Min", ["ceiling", "m"], ["y"], name="ceiling_min")]
    model = _model(nodes, [numpy_helper.from_array(np.array([[[[-0.4]]]], np.float32), "floor"),
                           numpy_helper.from_array(np.array(2.0, np.float32), "ceiling")])
    x = (np.random.default_rng(2).standard_normal((1, 4, 6, 6)) * 4).astype(np.float32)
    want = _run(model, x)
    assert clip_from_bound(model) == ["Max floor_max of l and -0.4 -> Clip", "Min ceiling_min of m and 2 -> Clip"]
    assert [n.op_type for n in model.graph.node] == ["LeakyRelu", "Clip", "Clip"]
    np.testing.assert_allclose(_run(model, x), want, rtol=1e-6)
