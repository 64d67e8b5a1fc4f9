"""Family rknn with the real rknn-toolkit2 in its toolchain environment: a generated classifier built for rk3588
(documented clock: a time) and rv1106 (none: cycles only), in-process through the library API; the second run a
no-op; another toolkit pin re-keys exactly the tasks that run it or name it; the toolkit's refusal in its words.

The toolchain is installed once (about 1.5 GB; ``$ACCELBUILD_TOOLCHAINS_DIR`` keeps it between runs, as CI does)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.config.load import load_pipelines
from accelbuild.engine import api, plan
from accelbuild.engine.doit_backend import RunOptions
from accelbuild.targets.rknn.toolchain import TOOLCHAIN
from accelbuild.toolchains import Toolchain, ToolchainRef, install
from accelbuild.toolchains.environment import ROOT_ENV

from conftest import run_cli, write

PIPELINE = """\
accelbuild: 1
name: {name}
target: {{family: rknn, platform: {platform}}}
models:
  - name: net
    path: net.onnx
    quantize: {{calibration_frames: 4}}
benchmark: {{accuracy: {{samples: 6}}}}
"""


@pytest.fixture(scope="module")
def toolchains(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = Path(os.environ.get(ROOT_ENV) or tmp_path_factory.mktemp("toolchains"))
    install(TOOLCHAIN, where)
    return where


@pytest.fixture
def project(tmp_path: Path, toolchains: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ROOT_ENV, str(toolchains))
    monkeypatch.chdir(tmp_path)
    onnx.save(_net(), str(tmp_path / "net.onnx"))
    return tmp_path


def _net() -> onnx.ModelProto:
    """Conv-ReLU x3 then global pooling and a Gemm: a small classifier with weights of a trained net's scale."""
    rng = np.random.default_rng(1)
    nodes, inits, x, c_in = [], [], "image", 3
    for i, c in enumerate((8, 16, 16)):
        inits += [numpy_helper.from_array((rng.normal(0, 1, (c, c_in, 3, 3)) / np.sqrt(9 * c_in)).astype(np.float32),
                                          f"w{i}"), numpy_helper.from_array(np.full(c, 0.05, np.float32), f"b{i}")]
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], f"conv{i}", pads=[1, 1, 1, 1],
                                   strides=[2, 2] if i else [1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], f"relu{i}")]
        x, c_in = f"r{i}", c
    inits += [numpy_helper.from_array(rng.normal(0, 0.25, (32, 16)).astype(np.float32), "fc_w"),
              numpy_helper.from_array(np.zeros(32, np.float32), "fc_b")]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"], "gap"),
              helper.make_node("Flatten", ["gap"], ["flat"], "flatten"),
              helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], "fc", transB=1)]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 48])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _options(folder: Path) -> RunOptions:
    return RunOptions(root=folder, state_dir=folder / ".accelbuild", cache_dir=folder / ".accelbuild" / "cache")


def _build(project: Path, platform: str, name: str = "rk") -> tuple[api.RunSummary, Path]:
    write(project / f"{name}.yaml", PIPELINE.format(name=name, platform=platform))
    summary = api.run(load_pipelines([f"{name}.yaml"]), _options(project))
    return summary, project / "build" / name


def test_rk3588_builds_a_program_its_placement_and_an_estimate_at_the_documented_clock(project: Path) -> None:
    summary, out = _build(project, "rk3588")
    assert summary.ok, summary.failures()
    assert (out / "net" / "net.rknn").read_bytes()[:4] == b"RKNN"
    placement = json.loads((out / "net" / "placement.json").read_text())
    by_name = {layer["name"]: layer for layer in placement["layers"]}
    convs = [by_name[f"conv{i}"] for i in range(3)]  # the model's own nodes, by their names
    assert all(layer["unit"] == "NPU" and layer["source_op"] == "Conv" and layer["cycles"] > 0 for layer in convs)
    assert by_name["image"]["op"] == "InputOperator" and by_name["logits"]["op"] == "OutputOperator"
    assert placement["cycles"] == sum(layer["cycles"] for layer in placement["layers"]) > 0
    assert placement["weight_memory_bytes"] > 0 and placement["internal_memory_bytes"] > 0
    bench = json.loads((out / "benchmark.json").read_text())
    model = bench["models"][0]
    assert bench["estimated_by"] == model["estimated_by"] == "rknn-toolkit2 2.5.0" and bench["clock_mhz"] == 1000.0
    assert model["latency_ms"] == pytest.approx(placement["cycles"] / 1e6, rel=1e-6)
    assert model["fps"] == pytest.approx(1000 / model["latency_ms"], rel=1e-4)
    assert model["end_to_end"]["accelerator"] == "estimated by rknn-toolkit2 2.5.0"
    accuracy = model["accuracy"]
    assert [f["role"] for f in accuracy["frames"]] == ["calibration"] * 4 + ["held-out"] * 2
    assert accuracy["measured_on"] == "held-out" and accuracy["cosine"] > 0.98
    assert accuracy["worst_cosine"] == min(f["cosine"] for f in accuracy["frames"] if f["role"] == "held-out")
    quantize = json.loads((out / "net" / "quantize.json").read_text())
    assert quantize["quantized_by"] == "rknn-toolkit2 2.5.0" and quantize["quantized_algorithm"] == "normal"
    assert {"r0", "r1", "r2"} <= {layer["name"] for layer in quantize["layers"]}  # by output tensor
    assert all(-1 <= layer["entire_cosine"] <= 1 for layer in quantize["layers"])
    assert "estimated by rknn-toolkit2 2.5.0" in (out / "report.html").read_text()


def test_the_second_run_is_a_no_op_and_the_rest_repeats_its_bytes(project: Path) -> None:
    assert _build(project, "rk3588")[0].ok
    again, out = _build(project, "rk3588")
    assert {r.status for r in again.results} == {"up-to-date"}
    first = {p: (out / p).read_bytes() for p in ("net/quantize.json", "net/placement.json", "net/rknn_build.log",
                                                   "benchmark.json", "report.html")}
    forced = api.run(load_pipelines(["rk.yaml"]), dataclasses.replace(_options(project), force=True))
    assert forced.ok and {p: (out / p).read_bytes() for p in first} == first


def test_rv1106_has_no_documented_clock_so_cycles_and_no_time(project: Path) -> None:
    summary, out = _build(project, "rv1106", "rv")
    assert summary.ok, summary.failures()
    bench = json.loads((out / "benchmark.json").read_text())
    model = bench["models"][0]
    assert bench["fps"] is None and model["fps"] is None and model["latency_ms"] is None and model["cycles"] > 0
    assert "no documented NPU clock for rv1106" in bench["timing"] and "end_to_end" not in model


def test_another_toolkit_pin_rekeys_the_tasks_that_run_it_or_name_it(project: Path) -> None:
    write(project / "rk.yaml", PIPELINE.format(name="rk", platform="rk3588"))
    pipeline = load_pipelines(["rk.yaml"])[0]
    pins = tuple("rknn-toolkit2==2.4.0" if p.startswith("rknn-toolkit2==") else p for p in TOOLCHAIN.packages)
    other = dataclasses.replace(pipeline, toolchain_ref=ToolchainRef(Toolchain("rknn", pins, TOOLCHAIN.python)))
    before = {j.name: j.param_digest for j in plan.plan([pipeline])}
    after = {j.name: j.param_digest for j in plan.plan([other])}
    assert sorted(name for name in before if before[name] != after[name]) == ["rk:benchmark", "rk:net:quantize"]


def test_the_toolkits_refusal_is_exit_1_in_its_own_words(project: Path) -> None:
    """A Unique of a computed tensor: valid ONNX that onnxruntime runs and accelbuild imports; the toolkit
    refuses a graph whose shapes it cannot fix."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], "relu"),
                               helper.make_node("Unique", ["r"], ["y"], "uniq")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(project / "net.onnx"))
    write(project / "rk.yaml", PIPELINE.format(name="rk", platform="rk3588"))
    result = run_cli("run", "rk.yaml", cwd=project, env={ROOT_ENV: os.environ[ROOT_ENV]})
    assert result.code == 1 and "Traceback" not in result.stderr, result.stderr
    assert "rk:net:quantize: rknn: E build: The input 0 of Unique('uniq') need to be constant!" in result.stderr


def test_a_toolchain_python_that_does_not_exist_is_a_positioned_error(project: Path) -> None:
    write(project / "rk.yaml", "accelbuild: 1\ntarget:\n  family: rknn\n  platform: rk3588\n  toolchain:\n"
                               "    python: venvs/rknn/bin/python\nmodels:\n  - path: net.onnx\n")
    result = run_cli("validate", "rk.yaml", cwd=project)
    assert result.code == 2 and "rk.yaml:6:13: file not found: venvs/rknn/bin/python" in result.stderr, result.stderr


def test_toolchain_list_and_install_through_the_cli(project: Path) -> None:
    env = {ROOT_ENV: os.environ[ROOT_ENV]}
    listed = run_cli("toolchain", "list", cwd=project, env=env)
    assert listed.code == 0 and "rknn: installed, Python" in listed.stdout and TOOLCHAIN.folder_name in listed.stdout
    again = run_cli("toolchain", "install", "rknn", cwd=project, env=env)  # installed: found, not made again
    assert again.code == 0 and "toolchain rknn: ready" in again.stdout
    unknown = run_cli("toolchain", "install", "rknnn", cwd=project, env=env)
    assert unknown.code == 2 and "no registered family has a toolchain named 'rknnn'" in unknown.stderr


def test_a_restore_in_a_fresh_checkout_needs_no_toolchain(project: Path, tmp_path_factory: pytest.TempPathFactory,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The task key holds the toolchain's pinned package set, not its folder: a checkout elsewhere with the
    cache restores every task and never looks for (or makes) the toolchain."""
    summary, _ = _build(project, "rk3588")
    assert summary.ok
    fresh = tmp_path_factory.mktemp("fresh")
    for name in ("net.onnx", "rk.yaml"):
        (fresh / name).write_bytes((project / name).read_bytes())
    empty = tmp_path_factory.mktemp("no-toolchains")
    monkeypatch.setenv(ROOT_ENV, str(empty))
    monkeypatch.chdir(fresh)
    cache = project / ".accelbuild" / "cache"
    restored = api.run(load_pipelines(["rk.yaml"]), RunOptions(root=fresh, state_dir=fresh / ".accelbuild",
                                                                 cache_dir=cache))
    assert restored.ok and {r.status for r in restored.results} == {"cached"}
    assert list(empty.iterdir()) == []
    assert (fresh / "build" / "rk" / "net" / "net.rknn").read_bytes() == \
        (project / "build" / "rk" / "net" / "net.rknn").read_bytes()


def test_an_image_and_a_vector_input_build(project: Path) -> None:
    """A second input that is not an image: the simulator is told the ONNX layout once, for every input (a
    per-input list with a gap for the vector made the toolkit raise)."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array((rng.normal(0, 0.3, (8, 3, 3, 3))).astype(np.float32), "w")]
    nodes = [helper.make_node("Conv", ["image", "w"], ["c"], "conv", pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["bias", "shape"], ["b4"], "as_4d"),
             helper.make_node("Add", ["c", "b4"], ["out"], "add")]
    inits.append(numpy_helper.from_array(np.array([1, 8, 1, 1], np.int64), "shape"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16]),
                                           helper.make_tensor_value_info("bias", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 8, 16, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(project / "net.onnx"))
    summary, out = _build(project, "rk3588")
    assert summary.ok, summary.failures()
    assert json.loads((out / "benchmark.json").read_text())["models"][0]["accuracy"]["cosine"] > 0.98


def test_a_recurrent_layers_default_layout_is_not_handed_to_the_toolkit() -> None:
    """rknn-toolkit2's onnx checker refuses an LSTM that states ``layout: 0`` (seen on a CRNN OCR model):
    the default is dropped, any other value kept."""
    from accelbuild.targets.rknn.compile_stage import _default_layouts

    def lstm(layout: int) -> onnx.ModelProto:
        node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], "lstm", hidden_size=2, layout=layout)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1, 2])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  [numpy_helper.from_array(np.zeros((1, 8, 2), np.float32), "W"),
                                   numpy_helper.from_array(np.zeros((1, 8, 2), np.float32), "R")])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    dropped = _default_layouts(lstm(0))
    assert dropped is not None and [a.name for a in dropped.graph.node[0].attribute] == ["hidden_size"]
    assert _default_layouts(lstm(1)) is None
