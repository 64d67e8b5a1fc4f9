"""Activation ranges cut where every reader is flat: exact for HardSwish / HardSigmoid / Clip / Relu, within
half an output step for Sigmoid, Tanh and SiLU; a tensor with any other reader keeps its range."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.frontends.onnx_model import serialize
from accelbuild.quantize.qdq import QdqConfig, quantize_qdq
from accelbuild.quantize.qdq.integers import INT32_MAX, integer_weights
from accelbuild.quantize.qdq.saturation import _silu_floor

SHAPE = [1, 3, 8, 8]


def _model(activation: list[onnx.NodeProto], extra_outputs: tuple[str, ...] = ()) -> onnx.ModelProto:
    """x -> Conv (c: spans about -30..30) -> activation (y) -> Conv (z)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((4, 3, 1, 1)) * 6).astype(np.float32), "w"),
             numpy_helper.from_array((rng.standard_normal((4, 4, 1, 1)) * 0.5).astype(np.float32), "w2")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), *activation,
             helper.make_node("Conv", ["y", "w2"], ["z"], name="conv2")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 8, 8]) for n in ("z", *extra_outputs)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)], outputs,
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _feeds(n: int = 8) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [{"x": rng.standard_normal(SHAPE).astype(np.float32) * 2} for _ in range(n)]


ACTIVATIONS = {
    "HardSwish": ([helper.make_node("HardSwish", ["c"], ["y"], name="act")], (-3.0, None)),
    "HardSigmoid": ([helper.make_node("HardSigmoid", ["c"], ["y"], name="act", alpha=0.2, beta=0.5)], (-2.5, 2.5)),
    "Sigmoid": ([helper.make_node("Sigmoid", ["c"], ["y"], name="act")], "sigmoid"),
    "SiLU": ([helper.make_node("Sigmoid", ["c"], ["s"], name="gate"),
              helper.make_node("Mul", ["c", "s"], ["y"], name="act")], "silu"),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_the_input_of_a_saturating_activation_stops_where_it_is_flat(name: str) -> None:
    nodes, limits = ACTIVATIONS[name]
    model, feeds = _model(nodes), _feeds()
    wide = quantize_qdq(model, feeds, QdqConfig(saturation_ranges=False))
    cut = quantize_qdq(model, feeds, QdqConfig())
    c_wide, c_cut = wide.params["c"], cut.params["c"]
    assert c_wide.low < -8 and c_wide.high > 8  # the convolution spans well past every flat point
    flat = cut.tensors["c"]["readers_flat_outside"]
    if limits == "sigmoid":  # within half a step of 0 or 1 on the sigmoid output's own grid
        half = cut.params["y"].scale / 2
        assert flat == pytest.approx([math.log(half / (1 - half)), -math.log(half / (1 - half))], rel=1e-6)
    elif limits == "silu":  # below, |x sigmoid(x)| < half a step of the Mul's output; the Sigmoid's own limit is wider
        floor = _silu_floor(cut.params["y"].scale / 2)
        assert abs(floor * (1 / (1 + math.exp(-floor)))) < cut.params["y"].scale / 2
        assert flat[1] is None and flat[0] <= floor
    else:
        assert flat == [limits[0], limits[1]]
    assert c_cut.low == pytest.approx(max(c_wide.low, flat[0]), abs=1e-6)
    assert c_cut.high == pytest.approx(c_wide.high if flat[1] is None else min(c_wide.high, flat[1]), abs=1e-6)
    assert "readers_flat_outside" not in wide.tensors["c"]
    # the model computes what it did, more finely: the output is at least as close to float
    reference = ort.InferenceSession(serialize(model), providers=["CPUExecutionProvider"]).run(None, feeds[0])[0]
    errors = [np.abs(ort.InferenceSession(serialize(r.model), providers=["CPUExecutionProvider"])
                     .run(None, feeds[0])[0] - reference).mean() for r in (wide, cut)]
    assert errors[1] <= errors[0]


def test_a_tensor_with_another_reader_or_that_is_an_output_keeps_its_range() -> None:
    feeds = _feeds()
    for model in (_model([helper.make_node("HardSwish", ["c"], ["h"], name="act"),
                          helper.make_node("Add", ["h", "c"], ["y"], name="add")]),  # c also read by an Add
                  _model(ACTIVATIONS["HardSwish"][0], extra_outputs=("c",))):
        wide = quantize_qdq(model, feeds, QdqConfig(saturation_ranges=False))
        cut = quantize_qdq(model, feeds, QdqConfig())
        assert cut.params["c"] == wide.params["c"]
        assert "readers_flat_outside" not in cut.tensors["c"]


def test_an_int32_bias_leaves_the_accumulator_room_for_the_products() -> None:
    """TFLite's kernels add the bias to an int32 sum of fan_in products: a bias code near 2^31 wraps around."""
    weight = np.full((1, 64, 3, 3), 0.01, np.float32)
    ints = integer_weights(weight, 0, 8, input_scale=1e-7, bias=np.array([200.0], np.float32))
    products = 64 * 9 * 255 * 127
    assert abs(int(ints.bias_codes[0])) + products <= INT32_MAX
    assert ints.raised_for_bias == 1
