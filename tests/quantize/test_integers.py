"""Integer weights of the QDQ path (accelbuild/quantize/qdq/integers.py): kernel sums kept."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from accelbuild.quantize import measure
from accelbuild.quantize.qdq import QdqConfig, quantize_qdq
from accelbuild.quantize.qdq.integers import integer_weights, keep_kernel_sums
from accelbuild.quantize.weights import quantize


def edge_kernels(seed: int = 0) -> np.ndarray:
    """[16, 3, 5, 5] kernels whose taps sum to zero per input channel (edge detectors, as a first layer
    learns): a flat patch gives no response in float."""
    weight = np.random.default_rng(seed).normal(0, 0.1, (16, 3, 5, 5))
    return (weight - weight.mean(axis=(2, 3), keepdims=True)).astype(np.float32)


def test_codes_add_up_to_the_float_kernel_sums_within_one_step_per_weight() -> None:
    weight = edge_kernels()
    nearest, scales = quantize(weight, 8, 0)
    kept = integer_weights(weight, 0, 8, input_scale=0.01, bias=None).codes
    exact = weight / scales[:, None, None, None]
    assert np.abs(nearest.astype(int).sum(axis=(2, 3))).max() >= 2  # rounding to nearest drifts
    np.testing.assert_array_equal(kept.astype(int).sum(axis=(2, 3)), np.rint(exact.sum(axis=(2, 3))))
    assert np.abs(kept - exact).max() < 1.0  # a changed weight rounds the other way, never further
    assert np.count_nonzero(kept != nearest) <= np.abs(nearest.astype(int).sum(axis=(2, 3))).sum()


def test_pointwise_weights_and_the_clipped_grid_are_left_alone() -> None:
    pointwise = np.random.default_rng(1).normal(0, 1, (8, 4, 1, 1)).astype(np.float32)
    codes, scales = quantize(pointwise, 8, 0)
    np.testing.assert_array_equal(keep_kernel_sums(codes, pointwise, scales, 8, 0), codes)
    full = np.full((1, 1, 1, 3), 127.4, dtype=np.float32)  # the sum asks for one more step: none is left
    codes = np.full((1, 1, 1, 3), 127, dtype=np.int8)
    np.testing.assert_array_equal(keep_kernel_sums(codes, full, np.ones(1, np.float32), 8, 0), codes)


def test_a_flat_input_patch_keeps_its_float_response() -> None:
    """A first convolution of edge detectors on flat images of several brightnesses: the float model gives
    its bias everywhere, and so does the quantized one, up to the output's own rounding (half a step).
    Rounding each weight to nearest was 0.73 to 1.8 steps off on these kernels (seeds 2, 5, 7)."""
    for seed in (2, 5, 7):
        weight = edge_kernels(seed)
        bias = np.random.default_rng(3).normal(0, 0.1, 16).astype(np.float32)
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[2, 2, 2, 2])], "first",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        frames = [{"x": np.full((1, 3, 16, 16), level, np.float32)} for level in (-1.0, -0.5, 0.5, 1.0)]
        result = quantize_qdq(model, frames, QdqConfig(conventions="tflite"))
        quantized = measure.session(result.model)
        for feed in frames:
            inner = quantized.run(["y"], feed)[0][:, :, 2:-2, 2:-2]  # away from the zero padding
            steps = np.abs(inner - bias[None, :, None, None]).max() / result.params["y"].scale
            assert steps <= 0.5 + 1e-3, (seed, feed["x"].flat[0], steps)
