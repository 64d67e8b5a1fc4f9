"""A mean over H and W kept 4-D (squeeze-and-excitation pooling) becomes GlobalAveragePool; other means stay."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.passes import run_passes
from accelbuild.passes.spatial_mean import spatial_mean_to_global_pool

SHAPE = (1, 8, 5, 7)


def _model(axes: list[int], keepdims: int = 1, opset: int = 21) -> onnx.ModelProto:
    """x -> ReduceMean -> Mul(x, mean): the SE pattern's shape (the mean broadcasts back over x)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    if opset >= 18:
        mean = helper.make_node("ReduceMean", ["x", "axes"], ["m"], name="se_mean", keepdims=keepdims)
        inits = [numpy_helper.from_array(np.array(axes, np.int64), "axes")]
    else:
        mean = helper.make_node("ReduceMean", ["x"], ["m"], name="se_mean", axes=axes, keepdims=keepdims)
        inits = []
    scale = helper.make_node("Mul", ["x", "m"], ["y"], name="scale") if keepdims else \
        helper.make_node("Identity", ["m"], ["y"], name="out")
    model = helper.make_model(helper.make_graph([mean, scale], "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize(("axes", "opset"), [([2, 3], 21), ([-1, -2], 21), ([2, 3], 13)])
def test_spatial_mean_becomes_global_average_pool(axes: list[int], opset: int) -> None:
    model = _model(axes, opset=opset)
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    expected = _run(model, x)
    notes = spatial_mean_to_global_pool(model)
    assert notes == ["ReduceMean se_mean over H and W -> GlobalAveragePool"]
    assert [n.op_type for n in model.graph.node] == ["GlobalAveragePool", "Mul"]
    onnx.checker.check_model(model)
    np.testing.assert_allclose(_run(model, x), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("axes", "keepdims"), [([1], 1), ([2], 1), ([1, 2, 3], 1), ([2, 3], 0)])
def test_other_means_stay(axes: list[int], keepdims: int) -> None:
    model = _model(axes, keepdims)
    assert spatial_mean_to_global_pool(model) == []
    assert model.graph.node[0].op_type == "ReduceMean"


def test_import_records_the_rewrite_only_when_it_changed_something() -> None:
    record = run_passes(_model([2, 3]))
    assert any(r["pass"] == "spatial_mean" for r in record)
    assert not any(r["pass"] == "spatial_mean" for r in run_passes(_model([1])))
