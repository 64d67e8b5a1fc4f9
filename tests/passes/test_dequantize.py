"""Dynamically quantized models (onnxruntime's own quantize_dynamic) turned back into float at import."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from accelbuild.passes.dequantize import dequantize_dynamic, remaining

from conftest import run_cli, write


def _save(nodes, inits, inputs, outputs, path: Path) -> Path:
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _conv_mlp(folder: Path, size: int = 16) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "w1"),
             numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal((8, 10)).astype(np.float32), "w2")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "w2"], ["y"], name="fc")]
    float_path = _save(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], folder / "float.onnx")
    quantize_dynamic(float_path, folder / "dynamic.onnx", weight_type=QuantType.QInt8,
                     op_types_to_quantize=["Conv", "MatMul"])
    return float_path, folder / "dynamic.onnx"


def _run(model: onnx.ModelProto | Path, x: np.ndarray) -> np.ndarray:
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_conv_integer_and_matmul_integer_become_float_layers(tmp_path: Path) -> None:
    float_path, dynamic_path = _conv_mlp(tmp_path)
    model = onnx.load(dynamic_path)
    assert {"ConvInteger", "MatMulInteger", "DynamicQuantizeLinear"} <= {n.op_type for n in model.graph.node}
    notes = dequantize_dynamic(model)
    assert len(notes) == 2 and remaining(model) == []
    assert [n.op_type for n in model.graph.node if n.op_type in ("Conv", "MatMul")] == ["Conv", "MatMul"]
    onnx.checker.check_model(model, full_check=True)
    x = np.random.default_rng(1).random((1, 3, 16, 16), dtype=np.float32)
    want = _run(float_path, x)
    # only the 8-bit weights' rounding is left (the per-frame activation rounding is gone)
    rewritten, dynamic = np.abs(_run(model, x) - want).max(), np.abs(_run(dynamic_path, x) - want).max()
    assert rewritten <= dynamic and rewritten < 0.02 * np.abs(want).max()


def test_dynamic_quantize_lstm_becomes_an_onnx_lstm(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    hidden, features, steps = 16, 8, 5
    inits = [numpy_helper.from_array(rng.standard_normal((1, 4 * hidden, features)).astype(np.float32) * 0.3, "W"),
             numpy_helper.from_array(rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32) * 0.3, "R"),
             numpy_helper.from_array(rng.standard_normal((1, 8 * hidden)).astype(np.float32) * 0.1, "B")]
    float_path = _save([helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=hidden, name="lstm")],
                       inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, features])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [steps, 1, 1, hidden])],
                       tmp_path / "lstm.onnx")
    quantize_dynamic(float_path, tmp_path / "dynamic.onnx", weight_type=QuantType.QInt8, op_types_to_quantize=["LSTM"])
    model = onnx.load(tmp_path / "dynamic.onnx")
    assert [n.op_type for n in model.graph.node] == ["DynamicQuantizeLSTM"]
    assert dequantize_dynamic(model) == ["DynamicQuantizeLSTM lstm_quant -> LSTM with dequantized W_quantized, "
                                         "R_quantized"]
    assert [(n.domain, n.op_type) for n in model.graph.node] == [("", "LSTM")]
    assert "com.microsoft" not in {o.domain for o in model.opset_import}
    x = rng.standard_normal((steps, 1, features)).astype(np.float32)
    np.testing.assert_allclose(_run(model, x), _run(float_path, x), atol=0.02)
    # through import: the com.microsoft operator is not refused before it can be turned into an LSTM
    write(tmp_path / "p.yaml", "accelbuild: 1\nmodels:\n  - path: dynamic.onnx\n")
    result = run_cli("run", "p.yaml", "--until", "import", cwd=tmp_path)
    assert result.code == 0, result.stderr
    imported = onnx.load(tmp_path / "build/p/dynamic/imported.onnx")
    assert [n.op_type for n in imported.graph.node] == ["LSTM"]


def test_a_dynamically_quantized_model_builds_on_npu_with_its_layers_on_the_npu(tmp_path: Path) -> None:
    """It ran every layer on the host (15 of 15), ConvInteger being no NPU operator. (At 16x16 the dequantized
    convolution, its bias folded in, is too small to pay for tda4vm's hand-overs; so x3, whose hand-over is
    5 us, at 128x128.)"""
    _conv_mlp(tmp_path, size=128)
    write(tmp_path / "p.yaml", "accelbuild: 1\ntarget: {family: npu, platform: x3}\n"
                               "models:\n  - path: dynamic.onnx\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "on the host" not in result.stderr
    record = json.loads((tmp_path / "build/p/dynamic/import.json").read_text())
    assert len(record["dequantized"]["layers"]) == 2 and record["dequantized"]["max_relative_error"] < 0.05
    partition = json.loads((tmp_path / "build/p/partition.json").read_text())
    assert partition["npu_layers"] >= 2


def test_an_operator_left_is_named_in_a_warning(tmp_path: Path) -> None:
    """DynamicQuantizeLinear feeding something other than an integer layer has no float form to take: the
    model stays valid ONNX as it is (family cpu runs it; the accelerators place or refuse it by name)."""
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"], name="dq"),
             helper.make_node("Cast", ["q"], ["qf"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("Mul", ["qf", "s"], ["y"], name="scale")]
    _save(nodes, [], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], tmp_path / "m.onnx")
    write(tmp_path / "p.yaml", "accelbuild: 1\nmodels:\n  - path: m.onnx\n")
    result = run_cli("run", "p.yaml", "--until", "import", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "dynamically quantized operators left as they are (no float form matched): DynamicQuantizeLinear" \
        in result.stderr
