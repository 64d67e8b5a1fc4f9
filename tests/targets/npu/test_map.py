"""The npu map stage's guards: a layer on the NPU holds its quantization, or the build fails saying which."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.errors import StageError
from accelbuild.targets.npu.hardware import load_npu_hardware
from accelbuild.targets.npu.map_stage import _check_npu_layers_quantized, host_reasons
from accelbuild.targets.npu.partition import Offload, partition
from accelbuild.testing import npu_graphs

from conftest import run_cli, write


def test_float_weights_on_the_npu_fail_naming_the_layers() -> None:
    float_model = npu_graphs.chain(["conv", "relu", "conv"], channels=64, size=56)
    part = partition(float_model, load_npu_hardware("tda4vm"), Offload())
    assert any(sg.unit == "npu" for sg in part.subgraphs)
    with pytest.raises(StageError, match=r"2 layer\(s\) placed on the NPU were not quantized .*deny_layers"):
        _check_npu_layers_quantized("chain", part)


def _byte_classifier(path: Path) -> None:
    """bytes (int32) -> embedding Gather -> Conv1d -> ReLU -> pool -> MatMul: a file-type classifier's shape."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("bytes", TensorProto.INT32, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    inits = [numpy_helper.from_array(rng.standard_normal((256, 16)).astype(np.float32), "emb"),
             numpy_helper.from_array(rng.standard_normal((32, 16, 3)).astype(np.float32) * 0.2, "w1"),
             numpy_helper.from_array(rng.standard_normal((32,)).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal((32, 10)).astype(np.float32), "w2")]
    nodes = [helper.make_node("Gather", ["emb", "bytes"], ["e"], name="embed"),
             helper.make_node("Transpose", ["e"], ["et"], perm=[0, 2, 1], name="to_ncw"),
             helper.make_node("Conv", ["et", "w1", "b1"], ["c"], pads=[1, 1], name="conv1d"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "w2"], ["y"], name="fc")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_a_model_with_an_integer_input_is_quantized_after_its_lookup(tmp_path: Path) -> None:
    """It quantized nothing and reported cosine 1.00000, float against float, with 32 layers "on the NPU"."""
    _byte_classifier(tmp_path / "bytes.onnx")
    write(tmp_path / "p.yaml", "accelbuild: 1\ntarget: {family: npu, platform: x5}\n"
                               "models:\n  - path: bytes.onnx\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    record = json.loads((tmp_path / "build/p/bytes/quantize.json").read_text())
    assert sorted(layer["name"] for layer in record["layers"]) == ["conv1d", "fc"]
    assert record["weight_bytes"] > 0 and record["output"]["sqnr_db"] < 100
    crop = json.loads((tmp_path / "build/p/bytes/crop.json").read_text())
    assert crop["mode"] == "integer_inputs" and crop["inputs"] == ["e"]  # the lookup is the host pre section


def test_the_summary_says_when_a_model_runs_mostly_on_the_host(tmp_path: Path) -> None:
    """Every layer denied to the NPU: the build goes through, and its summary line says so."""
    _byte_classifier(tmp_path / "bytes.onnx")
    write(tmp_path / "p.yaml", "accelbuild: 1\ntarget: {family: npu, platform: tda4vm, offload: {deny_ops: "
                               "[Conv, MatMul, Transpose, Relu, GlobalAveragePool, Flatten]}}\n"
                               "models:\n  - path: bytes.onnx\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "runs entirely on the host (" in result.stderr
    assert "on the host (" in result.stderr and "offload.deny_ops names" in result.stderr, result.stderr


def test_host_reasons_count_the_commonest_first() -> None:
    reasons = {"a": "merged", "b": "merged", "c": "unsupported: Softmax", "d": "denied", "e": "merged"}
    assert host_reasons(reasons) == " (3: merged; 1: unsupported: Softmax; 1 for other reasons)"
    assert host_reasons({}) == ""
