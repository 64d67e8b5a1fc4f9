"""Models with If branches that read weights from the graph around them (openWakeWord's verifier head,
Silero VAD) build on every family that takes them: the outer weights travel with each cut and copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import run_cli, write


def _gated_head(path: Path) -> None:
    """features -> Gemm -> Sigmoid score; If(score > 0.5) runs a verifier Gemm on outer weights, else zeros."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w_head"),
             numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w_verifier"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half"),
             numpy_helper.from_array(np.zeros((1, 4), np.float32), "zeros")]
    then = helper.make_graph([helper.make_node("MatMul", ["h", "w_verifier"], ["v"], name="verifier")], "then", [],
                             [helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 4])])
    other = helper.make_graph([helper.make_node("Identity", ["zeros"], ["z"], name="none")], "else", [],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4])])
    nodes = [helper.make_node("MatMul", ["x", "w_head"], ["h"], name="head"),
             helper.make_node("Sigmoid", ["h"], ["s"], name="score"),
             helper.make_node("ReduceMax", ["s"], ["top"], keepdims=0, name="top"),
             helper.make_node("Greater", ["top", "half"], ["gate"], name="gate"),
             helper.make_node("If", ["gate"], ["y"], then_branch=then, else_branch=other, name="verify")]
    model = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                         [1, 16])],
                                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                                                inits), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


@pytest.mark.parametrize("target", ["{family: mx3}", "{family: npu, platform: tda4vm}", "{family: cpu}"])
def test_an_if_branch_reading_outer_weights_builds(tmp_path: Path, target: str) -> None:
    """It crashed npu's map (the cut subgraph lacked the weight) and failed mx3's benchmark (its chip copy
    dropped the weight as unread)."""
    _gated_head(tmp_path / "m.onnx")
    write(tmp_path / "p.yaml", f"accelbuild: 1\ntarget: {target}\nbenchmark: {{frames: 20}}\n"
                               "models:\n  - path: m.onnx\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "internal error" not in result.stderr
