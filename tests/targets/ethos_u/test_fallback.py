"""fallback: operators without an int8 form are written as float CPU operators between DEQUANTIZE and QUANTIZE;
LiteRT runs them like quantized.onnx runs in onnxruntime and Vela places them on the CPU."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest

pytest.importorskip("ai_edge_litert")
pytest.importorskip("ethosu.vela")

from ethos_u_models import Net, feeds  # noqa: E402

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq  # noqa: E402
from accelbuild.targets.ethos_u import vela  # noqa: E402
from accelbuild.targets.ethos_u.tflite.verify import check  # noqa: E402
from accelbuild.targets.ethos_u.tflite.writer import write  # noqa: E402


def _stem(n: Net) -> str:
    return n.conv("x", 4, 8, 1, "stem")


def sqrt_reciprocal() -> onnx.ModelProto:
    n = Net()
    y = n.op("Sigmoid", [_stem(n)], "sigmoid")
    y = n.op("Reciprocal", [n.op("Sqrt", [y], "sqrt")], "reciprocal")
    return n.model(n.conv(y, 8, 8, 1, "head"), [1, 8, 8, 8])


def gather_channels() -> onnx.ModelProto:
    n = Net()
    y = n.op("Gather", [_stem(n), n.const("idx", [0, 2, -1], np.int64)], "gather", axis=1)
    return n.model(n.conv(y, 3, 4, 1, "head"), [1, 4, 8, 8])


def reduce_sum() -> onnx.ModelProto:
    """Float SUM: LiteRT's int8 SUM reference kernel saturates every code here (127 steps off quantized.onnx,
    where its optimised kernel is within one), so the writer has no int8 form for it."""
    n = Net()
    y = n.op("ReduceSum", [_stem(n), n.const("axes", [2, 3], np.int64)], "sum", keepdims=1)
    return n.model(n.conv(y, 8, 4, 1, "head"), [1, 4, 1, 1])


def gemm_negative_alpha() -> onnx.ModelProto:
    """alpha < 0 has no int8 form (the weights' scales would turn negative): float FULLY_CONNECTED with alpha
    folded into the weights, after a float transpose of A (transA)."""
    n = Net()
    y = n.op("GlobalAveragePool", [_stem(n)], "gap")
    y = n.op("Reshape", [y, n.const("shape", [8, 1], np.int64)], "column")
    w = n.const("fc.w", n.rng.normal(0, 0.5, (6, 8)))
    return n.model(n.op("Gemm", [y, w, n.const("fc.b", n.rng.normal(0, 0.1, 6))], "fc", transA=1, transB=1,
                        alpha=-0.5, beta=2.0), [1, 6])


def layer_norm_float_output() -> onnx.ModelProto:
    """A decomposed LayerNorm stays float in the QDQ model (the engine computes it as one operator): its nodes
    are float CPU operators, and the graph's output is float."""
    n = Net()
    x = n.op("Reshape", [_stem(n), n.const("shape", [1, 8, 64], np.int64)], "tokens")
    mean = n.op("ReduceMean", [x], "mean", axes=[-1], keepdims=1)
    centred = n.op("Sub", [x, mean], "centred")
    var = n.op("ReduceMean", [n.op("Pow", [centred, n.const("two", 2.0)], "square")], "var", axes=[-1], keepdims=1)
    std = n.op("Sqrt", [n.op("Add", [var, n.const("eps", 1e-5)], "var_eps")], "std")
    return n.model(n.op("Div", [centred, std], "normed"), [1, 8, 64])


CASES: dict[str, tuple[Callable[[], onnx.ModelProto], set[str]]] = {
    # name -> (model, the nodes written as float CPU operators)
    "sqrt_reciprocal": (sqrt_reciprocal, {"sqrt", "reciprocal"}),
    "gather_channels": (gather_channels, {"gather"}),
    "reduce_sum": (reduce_sum, {"sum"}),
    "gemm_negative_alpha": (gemm_negative_alpha, {"fc"}),
    "layer_norm_float_output": (layer_norm_float_output, {"mean", "centred", "square", "var", "var_eps", "std",
                                                          "normed"}),
}


def _build(model: onnx.ModelProto, inputs: list[dict], bits: int = 8) -> tuple[bytes, list[dict], onnx.ModelProto]:
    q = quantize_qdq(model, inputs, QdqConfig(conventions="tflite", share_concat_scales=True, activation_bits=bits))
    data, written_float = write(q.model)
    return data, written_float, q.model


@pytest.mark.parametrize("name", sorted(CASES))
def test_float_operators_match_qdq_in_litert(name: str) -> None:
    make, expected = CASES[name]
    inputs = feeds()
    data, written_float, qdq = _build(make(), inputs)
    assert {entry["node"] for entry in written_float} == expected
    assert all(entry["why"] for entry in written_float)
    checked = check(data, qdq, inputs)
    assert checked.layers.max_steps <= 1, checked.layers  # each quantized tensor within one step
    # end to end a code one step off before a LayerNorm moves its float output by a tenth (in its own units)
    assert checked.outputs.worst <= (0.25 if name == "layer_norm_float_output" else 2.01), checked.outputs


def test_int16_matmul_of_two_tensors_is_a_float_batch_matmul() -> None:
    """int8 BATCH_MATMUL is written for two int8 tensors (test_writer); int16 ones fall back to float."""
    from ethos_u_models import matmul_two_activations

    inputs = feeds()
    data, written_float, qdq = _build(matmul_two_activations(), inputs, bits=16)
    assert [(entry["node"], entry["op"]) for entry in written_float] == [("gram", "MatMul")]
    assert "int16" in written_float[0]["why"]
    checked = check(data, qdq, inputs)
    assert checked.layers.max_steps <= 1 and checked.outputs.worst <= 2.01, checked


@pytest.mark.parametrize("name", ["sqrt_reciprocal", "gather_channels", "layer_norm_float_output"])
def test_vela_places_the_float_operators_on_the_cpu(name: str) -> None:
    make, expected = CASES[name]
    data, written_float, _ = _build(make(), feeds())
    result = vela.compile_tflite(data, vela.VelaOptions("ethos-u55-128"))
    cpu = {op["op"] for op in result.cpu_ops}
    assert result.npu_ops > 0 and {"DEQUANTIZE"} <= cpu or name == "layer_norm_float_output", result.cpu_ops
    assert len(result.cpu_ops) >= len(expected)
