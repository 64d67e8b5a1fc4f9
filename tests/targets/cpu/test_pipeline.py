"""Family cpu end to end through the CLI: float and int8 builds of the example detector and classifier,
model.ort checked in onnxruntime, the non-timing artifacts deterministic, positioned config errors, and
compare labelling measured against simulated figures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.util.machine import this_machine

from conftest import run_cli, write

SATURATING_DOT = this_machine().int8_dot_product.startswith("none: AVX2")  # u8 x s8 pair sums clip at 16 bits

PIPELINE = """\
accelbuild: 1
name: {name}
target: {{family: cpu, threads: 1, precision: {precision}, graph_optimization: {level}}}
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {{images: [64, 64, 3]}}
    crop: {{outputs: [head.p3, head.p4, head.p5]}}
  - name: cls
    path: models/tinycls.onnx
benchmark: {{frames: 30, accuracy: {{samples: 4}}}}
"""
# every artifact but the measured ones (benchmark.json, report.html)
NON_TIMING = ("quantized.onnx", "quantize.json", "session.json", "model.ort", "ort.json")


def _build(project: Path, name: str, precision: str, level: str = "extended", *extra: str) -> Path:
    write(project / f"{name}.yaml", PIPELINE.format(name=name, precision=precision, level=level))
    result = run_cli("run", f"{name}.yaml", *extra, cwd=project)
    assert result.code == 0, result.stderr
    return project / "build" / name


def _digests(out: Path) -> dict[str, bytes]:
    return {f"{m}/{n}": (out / m / n).read_bytes() for m in ("det", "cls") for n in NON_TIMING}


@pytest.mark.parametrize("precision", ["float", "int8"])
def test_pipeline_builds_measures_and_repeats_its_bytes(project: Path, precision: str) -> None:
    out = _build(project, f"cpu_{precision}", precision)
    bench = json.loads((out / "benchmark.json").read_text())
    assert bench["measured"] is True and "onnxruntime" in bench["measured_on"]
    assert bench["machine"]["logical_cores"] >= 1 and bench["precision"] == precision
    for entry in bench["models"]:
        assert entry["fps"] > 0 and 0 < entry["latency_ms"] <= entry["latency_p90_ms"] <= entry["latency_max_ms"]
        assert entry["frames"] == 30
        assert entry["accuracy"]["cosine"] > (0.9999 if precision == "float" else 0.99)
        e2e = entry["end_to_end"]
        assert e2e["accelerator"] == "measured" and e2e["host_measured_on"] == bench["measured_on"]
        if entry["name"] == "det":  # cropped: its box decoding (post.onnx) runs on the host too
            assert e2e["sections"] == "model.ort + post.onnx"
        assert e2e["fps"] > 0 and e2e["latency_ms"] > 0
    quantize = json.loads((out / "det" / "quantize.json").read_text())
    if precision == "float":  # the quantize stage left the model as it is
        assert (out / "det" / "quantized.onnx").read_bytes() == (out / "det" / "ai.onnx").read_bytes()
        assert quantize["unchanged"] is True and not (out / "det" / "calibration.json").exists()
    else:
        assert quantize["activations"] == "integer" and (out / "det" / "calibration.json").is_file()
        assert json.loads((out / "cls" / "ort.json").read_text())["integer_operators"] > 0
    assert "measured on" in (out / "report.html").read_text()
    first = _digests(out)
    again = _build(project, f"cpu_{precision}", precision, "extended", "--force")
    assert _digests(again) == first


def test_model_ort_loads_and_computes_what_the_model_computes(project: Path) -> None:
    out = _build(project, "cpu_ext", "int8")
    for name in ("det", "cls"):
        config = json.loads((out / name / "session.json").read_text())
        assert config["graph_optimization_level"] == "ORT_ENABLE_EXTENDED" and config["intra_op_num_threads"] == 1
        compiled = ort.InferenceSession(str(out / name / "model.ort"), providers=["CPUExecutionProvider"])
        plain = ort.SessionOptions()
        plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        model = ort.InferenceSession(str(out / name / "quantized.onnx"), plain, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        feed = {i.name: rng.random(i.shape, dtype=np.float32) for i in model.get_inputs()}
        for got, want in zip(compiled.run(None, feed), model.run(None, feed)):
            scale = float(np.abs(want).max()) or 1.0
            # integer kernels round each requantization; without VNNI, AVX2's VPMADDUBSW also clips its 16-bit
            # pair sums (docs/cpu.md): 0.106 of det's peak 0.231 on an AMD EPYC with AVX2 only
            assert float(np.abs(got - want).max()) <= (0.5 if SATURATING_DOT else 0.02) * scale
        record = json.loads((out / name / "ort.json").read_text())
        assert record["hardware_specific"] is None  # extended: no NCHWc layouts, a portable model.ort
        assert record["check"]["cosine"] > (0.99 if SATURATING_DOT else 0.999)  # there: 0.99887


def test_level_all_stores_nchwc_layouts_and_says_so(project: Path) -> None:
    out = _build(project, "cpu_all", "float", "all")
    record = json.loads((out / "det" / "ort.json").read_text())
    assert any(op.startswith("com.microsoft.nchwc:") for op in record["operators"])
    assert record["hardware_specific"]["deterministic"] is False and record["hardware_specific"]["vector_isa"]
    config = json.loads((out / "det" / "session.json").read_text())
    assert config["graph_optimization_level"] == "ORT_ENABLE_ALL" and any("NCHWc" in n for n in config["notes"])


def test_bad_keys_are_positioned_errors(project: Path) -> None:
    write(project / "bad.yaml", "accelbuild: 1\ntarget:\n  family: cpu\n  threads: 0\n  num_chips: 2\n"
                                "models:\n  - path: models/tinycls.onnx\n    quantize: {weight_bits: 4}\n")
    result = run_cli("validate", "bad.yaml", cwd=project)
    assert result.code == 2 and "Traceback" not in result.stderr
    assert "bad.yaml:4:12:" in result.stderr and "bad.yaml:5:3: unknown key 'num_chips' in target" in result.stderr
    write(project / "bits.yaml", "accelbuild: 1\ntarget: {family: cpu, precision: int8}\n"
                                 "models:\n  - path: models/tinycls.onnx\n    quantize: {weight_bits: 4}\n")
    result = run_cli("validate", "bits.yaml", cwd=project)
    assert result.code == 2 and result.stderr.startswith(
        "bits.yaml:5:29: family cpu runs int8 weights or the float model, not 4-bit weights")


def test_measured_figures_are_restored_on_the_same_machine_only(project: Path) -> None:
    """After clean, the same machine restores its own benchmark from the cache; another machine (here named by
    ACCELBUILD_MACHINE_ID, as a container would be) measures again: the machine is in the cache key."""
    write(project / "m.yaml", "accelbuild: 1\nname: m\ntarget: {family: cpu}\nmodels:\n"
                              "  - path: models/tinycls.onnx\nbenchmark: {frames: 5, accuracy: {samples: 1}}\n")

    def benchmark(env: dict[str, str] | None = None) -> str:
        assert run_cli("clean", "m.yaml", cwd=project).code == 0
        result = run_cli("run", "m.yaml", "--json", cwd=project, env=env)
        assert result.code == 0, result.stderr
        return next(t["status"] for t in result.json()["tasks"] if t["stage"] == "benchmark")

    assert benchmark() == "ran"
    measured = (project / "build/m/benchmark.json").read_bytes()
    assert benchmark() == "cached" and (project / "build/m/benchmark.json").read_bytes() == measured
    assert benchmark({"ACCELBUILD_MACHINE_ID": "another-runner"}) == "ran"


def test_compare_labels_measured_and_simulated_sides(project: Path) -> None:
    out = _build(project, "cpu_float", "float")
    write(project / "npu.yaml", PIPELINE.format(name="npu", precision="int8", level="all").replace(
        "{family: cpu, threads: 1, precision: int8, graph_optimization: all}", "{family: npu, platform: tda4vm}"))
    assert run_cli("run", "npu.yaml", cwd=project).code == 0
    result = run_cli("compare", str(out), "build/npu", "--json", cwd=project)
    assert result.code == 0, result.stderr
    data = result.json()
    assert data["kinds"] == ["measured", "simulated"] and data["measured_on"][0] and data["measured_on"][1] is None
    text = run_cli("compare", str(out), "build/npu", cwd=project).stdout
    assert "(measured)" in text.splitlines()[0] and "(simulated)" in text.splitlines()[0]
    assert "build/npu: simulated (modelled accelerator)" in text and f"{out}: measured on " in text


def _model_with_its_own_quantizer() -> onnx.ModelProto:
    """Conv -> Relu -> QuantizeLinear: the model's own output is int8."""
    weight = (np.random.default_rng(0).standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["y"], name="quant")]
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z")]
    graph = helper.make_graph(nodes, "own_q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 4, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_float_build_runs_a_model_that_carries_its_own_quantizer(tmp_path: Path) -> None:
    """precision: float runs the model as it is, its own QuantizeLinear included (it was refused: "quantized.onnx
    has 1 QuantizeLinear nodes, which a float build cannot have")."""
    model = _model_with_its_own_quantizer()
    (tmp_path / "models").mkdir()
    onnx.save(model, tmp_path / "models" / "q.onnx")
    write(tmp_path / "q.yaml", "accelbuild: 1\nname: q\ntarget: {family: cpu, threads: 1, precision: float}\n"
                               "models:\n  - {name: q, path: models/q.onnx}\n"
                               "benchmark: {frames: 5, accuracy: {samples: 2}}\n")
    result = run_cli("run", "q.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    out = tmp_path / "build" / "q"
    source = json.loads((out / "q" / "session.json").read_text())["source"]
    assert source["quantize_linear"] == 1
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ort.InferenceSession(str(out / "q" / "model.ort"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want)
    assert json.loads((out / "benchmark.json").read_text())["fps"] > 0
