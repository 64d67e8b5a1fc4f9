"""Mistakes a new user makes on day one, each a positioned exit-2 error in ``validate`` and in ``run``:
an ``output.dir`` under a file, and input shapes the model cannot take (onnxruntime fails to run it at them,
or refuses to load it at them while it loads the model at its own)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import EXAMPLE_MODELS, run_cli, write


def _flattening_model(path: Path) -> None:
    """Conv on a dynamic H x W, then a Reshape to a fixed 256 values: only 8 x 8 inputs fit."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([1, 256], np.int64), "shape"),
             numpy_helper.from_array(rng.standard_normal((10, 256)).astype(np.float32), "g")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Reshape", ["c", "shape"], ["r"], name="flat"),
             helper.make_node("Gemm", ["r", "g"], ["y"], transB=1, name="fc")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def _upsampling_model(path: Path) -> None:
    """Two stride-2 Convs, a Resize x4 and a Concat with a full-size branch: only sides that are multiples of 4
    meet again, and onnxruntime refuses to load the model at any other (onnx's lenient inference lets it by)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, "h", "w"])
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name) for name, shape in
             [("w1", (4, 3, 3, 3)), ("w2", (4, 4, 3, 3)), ("w3", (4, 3, 1, 1)), ("w4", (4, 8, 1, 1))]]
    inits.append(numpy_helper.from_array(np.array([1, 1, 4, 4], np.float32), "scales"))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1] * 4, strides=[2, 2], name="down1"),
             helper.make_node("Conv", ["a", "w2"], ["b"], pads=[1] * 4, strides=[2, 2], name="down2"),
             helper.make_node("Resize", ["b", "", "scales"], ["u"], mode="nearest", name="up"),
             helper.make_node("Conv", ["x", "w3"], ["s"], name="skip"),
             helper.make_node("Concat", ["u", "s"], ["c"], axis=1, name="join"),
             helper.make_node("Conv", ["c", "w4"], ["y"], name="head")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


@pytest.mark.parametrize("command", ["validate", "run"])
def test_input_shape_onnxruntime_cannot_load(tmp_path: Path, command: str) -> None:
    _upsampling_model(tmp_path / "up.onnx")
    text = "accelbuild: 1\nmodels:\n  - path: up.onnx\n    input_shapes: {x: [%s, 3]}\n    crop: {auto: true}\n"
    write(tmp_path / "p.yaml", text % "18, 18")
    result = run_cli(command, "p.yaml", cwd=tmp_path)
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert ("p.yaml:4:19: model up cannot take these input shapes (x: [1, 3, 18, 18]): onnxruntime cannot load "
            "the model (node 'join' (Concat): ") in result.stderr
    assert "Dimension=2" in result.stderr and "[ONNXRuntimeError]" not in result.stderr
    assert "it runs at x: [16, 16, 3] and at x: [20, 20, 3]" in result.stderr
    assert "graph passes not verified" not in result.stderr and "internal error" not in result.stderr
    write(tmp_path / "p.yaml", text % "20, 20")
    extra = ["--until", "crop"] if command == "run" else []
    assert run_cli(command, "p.yaml", *extra, cwd=tmp_path).code == 0


@pytest.mark.parametrize("command", ["validate", "run"])
def test_output_dir_under_a_file(tmp_path: Path, command: str) -> None:
    shutil.copy(EXAMPLE_MODELS / "tinycls.onnx", tmp_path / "tinycls.onnx")
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    write(tmp_path / "p.yaml", "accelbuild: 1\nmodels:\n  - path: tinycls.onnx\noutput:\n  dir: notes.txt/build\n")
    result = run_cli(command, "p.yaml", cwd=tmp_path)
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert "p.yaml:5:8: output folder notes.txt/build cannot be used: notes.txt above it is a file" in result.stderr


@pytest.mark.parametrize("command", ["validate", "run"])
def test_input_shape_the_model_cannot_take(tmp_path: Path, command: str) -> None:
    _flattening_model(tmp_path / "flat.onnx")
    write(tmp_path / "p.yaml", "accelbuild: 1\nmodels:\n  - path: flat.onnx\n    input_shapes: {x: [16, 16, 3]}\n")
    result = run_cli(command, "p.yaml", cwd=tmp_path)
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert "p.yaml:4:19: model flat cannot take these input shapes (x: [1, 3, 16, 16])" in result.stderr
    assert "cannot be reshaped" in result.stderr and "[E:onnxruntime" not in result.stderr
    assert "it runs at" not in result.stderr  # no nearby image size runs it (only 8 x 8 does)
    # the shape it can take builds
    write(tmp_path / "p.yaml", "accelbuild: 1\nmodels:\n  - path: flat.onnx\n    input_shapes: {x: [8, 8, 3]}\n")
    extra = ["--until", "import"] if command == "run" else []
    assert run_cli(command, "p.yaml", *extra, cwd=tmp_path).code == 0
