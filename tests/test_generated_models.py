"""Models nobody tuned for, built on every family in-process: never an internal error, never NaN in a record.

Hypothesis draws small ONNX graphs from features real deployed models have and the random inputs once
mishandled: a boolean attention mask in front of a softmax, token ids into an embedding table (Gather), a
scalar (rank-0) gain input, a scalar output, a dimension past 65,536 (seconds of 16 kHz audio), a graph
whose float outputs are NaN on any input, and an output sliced to zero length. Each graph is built for mx3, npu, ethos-u and cpu (one project, so
import and crop are shared through the cache). The outcome is a success, or a user error (exit 2,
positioned) or a stage error (exit 1) with a clear message; every JSON file written is finite.
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from accelbuild.config.load import load_pipelines
from accelbuild.engine import api
from accelbuild.engine.doit_backend import RunOptions

pytest.importorskip("ai_edge_litert")
pytest.importorskip("ethosu.vela")

TARGETS = {
    "mx3": "{family: mx3}",
    "npu": "{family: npu, platform: tda4vm, offload: {host_compiler: onnx}}",
    "ethos-u": "{family: ethos-u}",
    "cpu": "{family: cpu}",
}
# families whose operator coverage takes every graph drawn here; ethos-u's int8 writer refuses some
# operators (Where, ReduceSum, a float boolean input) with a positioned message, which the test accepts
ALWAYS_BUILDS = {"mx3", "npu", "cpu"}
LONG = 70_000  # past the 65,536 the schema once capped a dimension at
POSITIONED = re.compile(r"^[^\s:]+\.yaml:\d+:\d+: |^[^\s:]+: ")


@dataclass(frozen=True)
class Features:
    mask: bool
    tokens: bool
    scalar_in: bool
    scalar_out: bool
    length: int
    nan: bool  # the float model's output is NaN on any input: a user error, naming the output
    empty: bool = False  # an extra output sliced to zero length: a user error at crop


def graph(f: Features) -> onnx.ModelProto:
    """x [1, 4, 1, length] -> 1x1 Conv -> Relu, then each feature's part (module docstring)."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["r"])]
    inits = [numpy_helper.from_array((rng.standard_normal((8, 4, 1, 1)) * 0.5).astype(np.float32), "w")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 1, f.length])]
    last = "r"
    if f.scalar_in:
        inputs.append(helper.make_tensor_value_info("gain", TensorProto.FLOAT, []))
        nodes.append(helper.make_node("Mul", [last, "gain"], ["gained"]))
        last = "gained"
    if f.mask:
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 1, 1, f.length]))
        inits.append(numpy_helper.from_array(np.array(-np.inf, np.float32), "minus_inf"))
        nodes += [helper.make_node("Where", ["mask", last, "minus_inf"], ["masked"]),
                  helper.make_node("Softmax", ["masked"], ["attention"], axis=-1)]
        last = "attention"
    if f.nan:
        inits.append(numpy_helper.from_array(np.array(-1.0, np.float32), "minus_one"))
        nodes += [helper.make_node("Sub", [last, "minus_one"], ["shifted"]),
                  helper.make_node("Neg", ["shifted"], ["negative"]), helper.make_node("Sqrt", ["negative"], ["root"])]
        last = "root"
    outputs = [helper.make_tensor_value_info(last, TensorProto.FLOAT, [1, 8, 1, f.length])]
    if f.tokens:
        inputs.append(helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 6]))
        inits += [numpy_helper.from_array(rng.standard_normal((50, 8)).astype(np.float32), "table"),
                  numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "proj")]
        nodes += [helper.make_node("Gather", ["table", "ids"], ["embedded"]),
                  helper.make_node("MatMul", ["embedded", "proj"], ["tokens"])]
        outputs.append(helper.make_tensor_value_info("tokens", TensorProto.FLOAT, [1, 6, 4]))
    if f.scalar_out:
        nodes.append(helper.make_node("ReduceSum", [last], ["total"], keepdims=0))
        outputs.append(helper.make_tensor_value_info("total", TensorProto.FLOAT, []))
    if f.empty:
        inits += [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("zero", 0), ("axis", 3))]
        nodes.append(helper.make_node("Slice", [last, "zero", "zero", "axis"], ["nothing"]))
        outputs.append(helper.make_tensor_value_info("nothing", TensorProto.FLOAT, [1, 8, 1, 0]))
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def build(folder: Path, family: str) -> api.RunSummary:
    """The family's pipeline over ``folder/m.onnx``, in this process."""
    text = (f"accelbuild: 1\nname: p_{family.replace('-', '_')}\ntarget: {TARGETS[family]}\n"
            "benchmark: {frames: 10, host: false, accuracy: {samples: 2}}\nmodels:\n  - name: m\n    path: m.onnx\n")
    (folder / f"{family}.yaml").write_text(text)
    state = folder / ".accelbuild"
    here = Path.cwd()
    os.chdir(folder)
    try:
        return api.run(load_pipelines([f"{family}.yaml"]),
                       RunOptions(root=folder, state_dir=state, cache_dir=state / "cache", keep_going=True),
                       stream=io.StringIO(), quiet=True)
    finally:
        os.chdir(here)


def _refuse_constant(name: str) -> None:
    raise AssertionError(f"{name} in a JSON record")


def assert_finite_records(folder: Path) -> None:
    for path in sorted(folder.rglob("*.json")):
        json.loads(path.read_text(), parse_constant=_refuse_constant)


features = st.builds(Features, mask=st.booleans(), tokens=st.booleans(), scalar_in=st.booleans(),
                     scalar_out=st.booleans(), length=st.sampled_from([16, LONG]),
                     nan=st.sampled_from([False, False, True]), empty=st.sampled_from([False, False, True]))


@settings(max_examples=3, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(f=features)
@example(f=Features(mask=True, tokens=False, scalar_in=True, scalar_out=False, length=16, nan=True))
@example(f=Features(mask=False, tokens=True, scalar_in=False, scalar_out=True, length=16, nan=False, empty=True))
def test_every_family_builds_or_refuses_clearly(f: Features, tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("generated")
    onnx.save(graph(f), folder / "m.onnx")
    for family in TARGETS:
        summary = build(folder, family)
        failed = [r for r in summary.results if r.status == "failed"]
        for result in failed:
            assert "internal error" not in result.message, (family, f, result.message)
            if result.user_error:
                assert POSITIONED.match(result.message), (family, f, result.message)
        if f.empty:
            assert summary.exit_code == 2, (family, f, [r.message for r in failed])
            assert "output 'nothing' is an empty tensor [1, 8, 1, 0]" in failed[0].message
        elif f.nan:
            assert summary.exit_code == 2, (family, f, [r.message for r in failed])
            assert "the float model, before any quantization, gives NaN at output 'root'" in failed[0].message
        elif family in ALWAYS_BUILDS:
            assert summary.exit_code == 0, (family, f, [r.message for r in failed])
            assert {r.status for r in summary.results} <= {"ran", "cached"}
            assert (folder / "build" / f"p_{family}" / "benchmark.json").is_file()
        elif summary.exit_code == 1:  # ethos-u: Vela refusing what the writer placed on its CPU, in Vela's words
            assert all("vela" in r.message.lower() for r in failed), (family, f, [r.message for r in failed])
        else:
            assert summary.exit_code in (0, 2), (family, f, [r.message for r in failed])
    assert_finite_records(folder / "build")


def test_every_feature_at_once_builds_on_every_family(tmp_path: Path) -> None:
    """The class of each crash in one graph: masked softmax (NaN with an all-False mask), token ids into a
    50-row table, a scalar gain in and a scalar sum out (mx3's DFP refused shape ()), 70,000 samples."""
    onnx.save(graph(Features(True, True, True, True, LONG, nan=False)), tmp_path / "m.onnx")
    for family in ALWAYS_BUILDS:
        summary = build(tmp_path, family)
        assert summary.exit_code == 0, [r.message for r in summary.results if r.status == "failed"]
    record = json.loads((tmp_path / "build/p_mx3/m/quantize.json").read_text())
    assert record["output"]["inputs"] == "random" and record["output"]["cosine"] > 0.99
    assert_finite_records(tmp_path / "build")
