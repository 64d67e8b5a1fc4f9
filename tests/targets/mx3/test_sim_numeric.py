"""Numeric simulation: the DFP's arithmetic, against onnxruntime on quantized.onnx."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from accelbuild import accuracy
from accelbuild.quantize import measure
from accelbuild.targets.mx3.sim import numeric
from accelbuild.targets.mx3.sim.program import load_program

from conftest import run_cli, write

PIPELINE = """\
accelbuild: 1
name: p
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {images: [64, 64, 3]}
    crop: {outputs: [head.p3, head.p4, head.p5]}
"""


def _program(project: Path):
    write(project / "p.yaml", PIPELINE)
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--until", "assemble", cwd=project)
    assert result.code == 0, result.stderr
    return load_program(project / "build/p/p.dfp")


def test_dfp_arithmetic_equals_quantized_onnx_with_bf16_activations(project: Path) -> None:
    """Tolerance 0 without the activation approximations: the same weights, graph and rounding."""
    program = _program(project)
    quantized = onnx.load(str(project / "build/p/det/quantized.onnx"))
    samples = accuracy.random_inputs(quantized, 2, seed=0)
    want = measure.run_all(measure.session(measure.with_bf16_activations(quantized)), samples)
    got = numeric.run(program.models[0], {}, samples)
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            np.testing.assert_array_equal(a, b)


def test_declared_approximations_stay_close(project: Path) -> None:
    """With the profile's piecewise-linear sigmoid: cosine >= 0.9999 against the exact chip arithmetic."""
    program = _program(project)
    samples = accuracy.random_inputs(program.models[0].graph, 2, seed=0)
    exact = numeric.run(program.models[0], {}, samples)
    approx = numeric.run(program.models[0], program.hardware["approximations"], samples)
    assert measure.compare(exact, approx)["cosine"] >= 0.9999


def test_piecewise_sigmoid_error_is_what_the_profile_declares() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4001])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4001])
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"], name="sig")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    spec = {"method": "piecewise_linear", "segments": 64, "range": [-8, 8], "max_abs_error": 0.00075}
    numeric._approximate(model, "Sigmoid", spec)
    grid = np.linspace(-12, 12, 4001).astype(np.float32)
    (got,) = measure.session(model).run(None, {"x": grid})
    assert np.max(np.abs(got - 1 / (1 + np.exp(-grid.astype(np.float64))))) <= spec["max_abs_error"]
