"""Family cpu, backend tvm (accelbuild/targets/tvm_compiler.py, tvm_stage.py): the example detector (cropped,
its box decoding on the host) and classifier compiled by TVM for this CPU, checked against onnxruntime,
measured, byte-identical across clean builds, loadable as the docs say, and compared with onnxruntime."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from conftest import run_cli, write

tvm = pytest.importorskip("tvm")

PIPELINE = """\
accelbuild: 1
name: {name}
target: {{family: cpu, backend: {backend}, precision: {precision}}}
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {{images: [64, 64, 3]}}
    crop: {{outputs: [head.p3, head.p4, head.p5]}}
  - name: cls
    path: models/tinycls.onnx
benchmark: {{frames: 20, accuracy: {{samples: 3}}}}
"""


def _build(project: Path, name: str, backend: str = "tvm", precision: str = "float") -> Path:
    write(project / f"{name}.yaml", PIPELINE.format(name=name, backend=backend, precision=precision))
    result = run_cli("run", f"{name}.yaml", cwd=project)
    assert result.code == 0, result.stderr
    return project / "build" / name


def test_tvm_builds_checks_and_measures_and_repeats_its_bytes(project: Path) -> None:
    out = _build(project, "tvm")
    bench = json.loads((out / "benchmark.json").read_text())
    assert bench["backend"] == "tvm" and bench["tvm"] == tvm.__version__ and bench["tvm_target"]["kind"] == "llvm"
    for entry in bench["models"]:
        assert entry["fps"] > 0 and entry["accuracy"]["cosine"] > 0.9999
        assert entry["accuracy"]["runtime"] == "TVM, model.so (float)"
    det = next(m for m in bench["models"] if m["name"] == "det")
    assert det["end_to_end"]["sections"] == "model.so + post.onnx"
    for name in ("det", "cls"):
        record = json.loads((out / name / "tvm.json").read_text())
        check = record["check"]
        assert check["cosine"] >= check["tolerance_cosine"] and check["max_abs_err"] < 1e-4
        assert record["target"]["mcpu"] and record["bytes"] == (out / name / "model.so").stat().st_size
        assert not (out / name / "model.ort").exists()
    assert "TVM" in (out / "report.html").read_text()
    first = {n: (out / n / "model.so").read_bytes() for n in ("det", "cls")}
    shutil.rmtree(project / "build")
    shutil.rmtree(project / ".accelbuild")
    again = _build(project, "tvm")
    assert {n: (again / n / "model.so").read_bytes() for n in ("det", "cls")} == first


def test_model_so_loads_in_tvms_vm_as_documented(project: Path) -> None:
    out = _build(project, "tvm")
    from tvm import relax

    vm = relax.VirtualMachine(tvm.runtime.load_module(str(out / "cls" / "model.so")), tvm.cpu())
    reference = ort.InferenceSession(str(out / "cls" / "quantized.onnx"), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random(reference.get_inputs()[0].shape, dtype=np.float32)
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(got, reference.run(None, {reference.get_inputs()[0].name: x})[0], atol=1e-5)


def test_int8_qdq_models_compile_too(project: Path) -> None:
    out = _build(project, "tvm8", precision="int8")
    record = json.loads((out / "cls" / "tvm.json").read_text())
    assert record["integer_operators"] > 0 and record["check"]["cosine"] > 0.99


def test_compare_sets_onnxruntime_and_tvm_side_by_side(project: Path) -> None:
    ort_out, tvm_out = _build(project, "ort", backend="onnxruntime"), _build(project, "tvm")
    result = run_cli("compare", str(ort_out), str(tvm_out), "--json", cwd=project)
    assert result.code == 0, result.stderr
    rows = {r["row"]: r for r in json.loads(result.stdout)["rows"]}
    assert rows["det fps"]["kind"] == "measured" and rows["cls cosine"]["within_noise"]


def test_without_the_extra_backend_tvm_is_a_positioned_error(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbuild.config.load import load_pipelines
    from accelbuild.errors import ConfigErrors
    from accelbuild.targets import tvm_compiler

    monkeypatch.setattr(tvm_compiler, "available", lambda: False)
    path = write(project / "p.yaml", PIPELINE.format(name="p", backend="tvm", precision="float"))
    with pytest.raises(ConfigErrors) as raised:
        load_pipelines([str(path)])
    assert "p.yaml:3:" in str(raised.value) and "pip install 'accelbuild[tvm]'" in str(raised.value)


def test_a_scalar_input_reaches_tvms_vm_as_a_scalar(tmp_path: Path) -> None:
    """A rank-0 input (a gain) ran as rank 1 and the VM refused it; now it runs and matches onnxruntime."""
    from onnx import TensorProto, helper

    from accelbuild.targets import tvm_compiler

    graph = helper.make_graph([helper.make_node("Mul", ["x", "gain"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
                               helper.make_tensor_value_info("gain", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    tvm_compiler.compile_model(model, tvm_compiler.host_target(), tmp_path / "model.so")
    session = tvm_compiler.load((tmp_path / "model.so").read_bytes(), model)
    feeds = {"x": np.arange(4, dtype=np.float32).reshape(1, 4), "gain": np.array(2.5, np.float32)}
    assert np.array_equal(session.run(None, feeds)[0], feeds["x"] * 2.5)
