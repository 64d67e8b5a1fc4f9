"""An If whose other branch cannot run at the pipeline's input shapes (Silero VAD v5's 8 kHz branch at 512
samples) is replaced by the branch that can: onnxruntime refuses such a model at static shapes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.passes.if_branches import specialize_if

from conftest import run_cli, write


def _rate_switch(samples: int | str) -> onnx.ModelProto:
    """y = x -> Mul -> If(sr == 16000, Relu, Reshape to [1, 4, -1] and back, Neg): the else branch only
    takes a multiple of 4 samples, like a front end made for another rate."""
    rng = np.random.default_rng(0)
    then = helper.make_graph([helper.make_node("Relu", ["h"], ["t_y"], name="t_relu")], "then", [],
                             [helper.make_tensor_value_info("t_y", TensorProto.FLOAT, [1, "n"])])
    other = helper.make_graph(
        [helper.make_node("Reshape", ["h", "e_by4"], ["e_a"], name="e_by4"),
         helper.make_node("Reshape", ["e_a", "e_flat"], ["e_b"], name="e_flat"),
         helper.make_node("Neg", ["e_b"], ["e_y"], name="e_neg")], "else", [],
        [helper.make_tensor_value_info("e_y", TensorProto.FLOAT, [1, "n"])],
        [numpy_helper.from_array(np.array([1, 4, -1], np.int64), "e_by4"),
         numpy_helper.from_array(np.array([1, -1], np.int64), "e_flat")])
    nodes = [helper.make_node("Equal", ["sr", "rate"], ["is_16k"], name="is_16k"),
             helper.make_node("Mul", ["x", "w"], ["h"], name="features"),
             helper.make_node("If", ["is_16k"], ["y"], then_branch=then, else_branch=other, name="by_rate")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, samples]),
              helper.make_tensor_value_info("sr", TensorProto.INT64, [])]
    inits = [numpy_helper.from_array(np.array(16000, np.int64), "rate"),
             numpy_helper.from_array(rng.standard_normal(1).astype(np.float32), "w")]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n"])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_the_branch_that_cannot_take_the_shapes_goes_and_the_outputs_stay() -> None:
    model = _rate_switch(6)
    with pytest.raises(Exception, match="e_by4"):
        _session(model)
    x = np.random.default_rng(1).standard_normal((1, 6)).astype(np.float32)
    want = _session(_rate_switch("n")).run(None, {"x": x, "sr": np.array(16000, np.int64)})[0]
    notes = specialize_if(model)
    assert notes[0].startswith("If by_rate: kept its then_branch; the else_branch cannot run at these input shapes")
    assert notes[1:] == ["input sr is no longer read: removed"]
    assert "If" not in [n.op_type for n in model.graph.node]
    np.testing.assert_array_equal(_session(model).run(None, {"x": x})[0], want)


def test_a_model_that_loads_is_left_alone() -> None:
    model = _rate_switch("n")
    before = model.SerializeToString()
    assert specialize_if(model) == []
    assert model.SerializeToString() == before


@pytest.mark.parametrize("target", ["{family: mx3}", "{family: npu, platform: tda4vm}"])
def test_it_builds_and_import_says_which_branch_it_kept(tmp_path: Path, target: str) -> None:
    """Before: import wrote a model onnxruntime refused, and quantize failed on it."""
    onnx.save(_rate_switch("n"), tmp_path / "m.onnx")
    write(tmp_path / "p.yaml", f"accelbuild: 1\nname: p\ntarget: {target}\nbenchmark: {{frames: 10}}\n"
                               "models:\n  - name: m\n    path: m.onnx\n    input_shapes: {x: [6]}\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    record = json.loads((tmp_path / "build/p/m/import.json").read_text())
    notes = next(p for p in record["passes"] if p["pass"] == "specialize_if")["notes"]
    assert "kept its then_branch" in notes[0]


def _conv_then_switch() -> onnx.ModelProto:
    """x -> Conv (an NPU layer) -> h; If(gate > 0.5, Relu(h), Neg(h)): the If reads h only in its branches
    (a float gate: an integer one would go to the pre section)."""
    rng = np.random.default_rng(0)
    then = helper.make_graph([helper.make_node("Relu", ["h"], ["t_y"], name="t_relu")], "then", [],
                             [helper.make_tensor_value_info("t_y", TensorProto.FLOAT, [1, 32, 32, 32])])
    other = helper.make_graph([helper.make_node("Neg", ["h"], ["e_y"], name="e_neg")], "else", [],
                              [helper.make_tensor_value_info("e_y", TensorProto.FLOAT, [1, 32, 32, 32])])
    nodes = [helper.make_node("Greater", ["gate", "half"], ["open"], name="open"),
             helper.make_node("Conv", ["x", "w"], ["h"], pads=[1, 1, 1, 1], name="features"),
             helper.make_node("If", ["open"], ["y"], then_branch=then, else_branch=other, name="by_rate")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 32, 32]),
              helper.make_tensor_value_info("gate", TensorProto.FLOAT, [])]
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "half"),
             numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32), "w")]
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 32, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def test_npu_orders_a_host_if_after_the_npu_layer_its_branch_reads(tmp_path: Path) -> None:
    """The If reads the Conv's output only inside its branches; npu's partition ordered the host If
    before the NPU Conv and crashed composing the subgraphs (KeyError)."""
    onnx.save(_conv_then_switch(), tmp_path / "m.onnx")
    # x3: a 5 us hand-over, so the one small Conv stays on the NPU (tda4vm's 332 us one moves it to the host)
    write(tmp_path / "p.yaml", "accelbuild: 1\nname: p\ntarget: {family: npu, platform: x3}\n"
                               "benchmark: {frames: 10}\nmodels:\n  - name: m\n    path: m.onnx\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    offload = json.loads((tmp_path / "build/p/benchmark.json").read_text())["offload"]
    assert offload["npu_layers"] == 1 and offload["host_ops"] == {"Greater": 1, "If": 1}
