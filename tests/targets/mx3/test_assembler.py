"""The DFP's ports: an output of the chip's section that is also its input (a host post section that reads the
model's input beside the chip's outputs, as openWakeWord's gated verifier heads do) names the layer that reads
it, instead of no layer (a crash in assemble)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from accelbuild.targets.mx3.dfp import read_dfp

from conftest import run_cli, write


def _gate_reading_the_input(path: Path) -> None:
    """x -> MatMul -> Sigmoid score; If(max score > 0.5) runs a verifier MatMul on the model input x itself."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w_head"),
             numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w_verifier"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half"),
             numpy_helper.from_array(np.zeros((1, 8), np.float32), "zeros")]
    then = helper.make_graph([helper.make_node("MatMul", ["x", "w_verifier"], ["v"], name="verifier")], "then", [],
                             [helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 8])])
    other = helper.make_graph([helper.make_node("Identity", ["zeros"], ["z"], name="none")], "else", [],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8])])
    nodes = [helper.make_node("MatMul", ["x", "w_head"], ["h"], name="head"),
             helper.make_node("Sigmoid", ["h"], ["s"], name="score"),
             helper.make_node("ReduceMax", ["s"], ["top"], keepdims=0, name="top"),
             helper.make_node("GreaterOrEqual", ["top", "half"], ["gate"], name="gate"),
             helper.make_node("If", ["gate"], ["y"], then_branch=then, else_branch=other, name="verify")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_an_output_that_is_the_input_names_the_layer_reading_it(tmp_path: Path) -> None:
    _gate_reading_the_input(tmp_path / "m.onnx")
    write(tmp_path / "p.yaml", "accelbuild: 1\ntarget: {family: mx3}\nbenchmark: {frames: 20}\n"
                               "models:\n  - path: m.onnx\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    crop = (tmp_path / "build" / "p" / "m" / "crop.json").read_text()
    assert '"post"' in crop  # the gate and If went to the host, reading x beside the chip's outputs
    (entry,) = read_dfp(tmp_path / "build" / "p" / "p.dfp").header.models
    ports = {port.name: port.layer for port in entry.outputs}
    assert ports["x"] == next(port.layer for port in entry.inputs if port.name == "x") != ""
