"""Family ethos-u end to end through the CLI: the shipped example pipeline, real Vela and LiteRT."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli, write

pytest.importorskip("ai_edge_litert")
pytest.importorskip("ethosu.vela")

REPO = Path(__file__).resolve().parents[3]


def test_example_pipeline_builds(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("build", "__pycache__"))
    (tmp_path / ".git").mkdir()
    result = run_cli("run", "examples/valid/09_ethos_u.yaml", "--json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    out = tmp_path / "examples/valid/build/09_ethos_u"
    bench = json.loads((out / "benchmark.json").read_text())
    assert bench["estimated_by"].startswith("vela ")
    assert bench["cpu_ops"] == 0 and bench["offload"]["host_layers"] == 0
    for model in ("nhwc", "mlp"):
        assert (out / model / "int8.tflite").read_bytes()[4:8] == b"TFL3"
        assert (out / model / "int8_vela.tflite").is_file()
        assert (out / "vela" / model / "per-layer.csv").is_file()
        check = json.loads((out / model / "int8.json").read_text())["check"]
        assert check["layers"]["max_steps"] <= 1 and check["outputs"]["within_one_step"] >= 0.99
    entry = bench["models"][0]
    assert entry["fps"] > 0 and entry["latency_ms"] > 0 and entry["sram_bytes"] > 0
    assert entry["accuracy"]["cosine"] > 0.99 and entry["accuracy"]["runtime"].startswith("LiteRT")
    assert entry["accuracy"]["kernels"]["kernels"] == "reference"  # small work: the device's arithmetic
    report = (out / "report.html").read_text()
    assert "estimated by Vela" in report
    first = {p: p.read_bytes() for p in sorted(out.rglob("*.tflite"))}
    again = run_cli("run", "examples/valid/09_ethos_u.yaml", "--force", cwd=tmp_path)
    assert again.code == 0, again.stderr
    assert {p: p.read_bytes() for p in sorted(out.rglob("*.tflite"))} == first
    status = run_cli("status", "examples/valid/09_ethos_u.yaml", "--check", cwd=tmp_path)
    assert status.code == 0, status.stdout


def test_unsupported_operator_is_exit_2(tmp_path: Path) -> None:
    import onnx
    from ethos_u_models import Net

    n = Net()
    model = n.model(n.op("Erf", [n.conv("x", 4, 8, 1, "stem")], "erf"), [1, 8, 8, 8])
    onnx.save(model, str(tmp_path / "erf.onnx"))
    (tmp_path / ".git").mkdir()
    (tmp_path / "p.yaml").write_text("accelbuild: 1\ntarget: {family: ethos-u}\nmodels:\n  - path: erf.onnx\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 2, result.stderr
    assert "Erf (erf)" in result.stderr and "p.yaml:4:" in result.stderr
    assert "Traceback" not in result.stderr


def test_operators_without_an_int8_form_run_on_the_cpu_and_are_reported(tmp_path: Path) -> None:
    """Sqrt and Reciprocal have no int8 form: the build writes them as float CPU operators (int8.json says
    which and why), Vela places them on the CPU and benchmark.json and the report name each."""
    import onnx
    from ethos_u_models import Net

    n = Net()
    y = n.op("Sigmoid", [n.conv("x", 4, 8, 1, "stem")], "sigmoid")
    y = n.op("Reciprocal", [n.op("Sqrt", [y], "sqrt")], "reciprocal")
    onnx.save(n.model(n.conv(y, 8, 8, 1, "head"), [1, 8, 8, 8]), str(tmp_path / "sr.onnx"))
    (tmp_path / ".git").mkdir()
    (tmp_path / "p.yaml").write_text("accelbuild: 1\ntarget: {family: ethos-u}\nmodels:\n  - path: sr.onnx\n"
                                     "benchmark:\n  accuracy: {samples: 4, seed: 0}\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "Sqrt (sqrt), Reciprocal (reciprocal)" in result.stderr  # the map stage's warning
    out = tmp_path / "build/p"
    record = json.loads((out / "sr/int8.json").read_text())
    assert [(e["node"], e["op"]) for e in record["float_operators"]] == [("sqrt", "Sqrt"), ("reciprocal", "Reciprocal")]
    bench = json.loads((out / "benchmark.json").read_text())
    cpu = [(op["op"], op["name"]) for op in bench["models"][0]["cpu_ops"]]
    assert ("SQRT", "sqrt") in cpu and ("DIV", "reciprocal/float") in cpu and bench["npu_ops"] > 0
    assert bench["cpu_ops"] == len(cpu) == bench["offload"]["host_layers"]
    assert [e["node"] for e in bench["models"][0]["float_operators"]] == ["sqrt", "reciprocal"]
    assert bench["models"][0]["accuracy"]["cosine"] > 0.99
    assert "SQRT" in (out / "report.html").read_text()


def test_missing_extra_through_therun_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Without ethos-u-vela (its import made to fail: the missing-package path, not a mock of Vela)."""
    from accelbuild import cli
    from accelbuild.targets.ethos_u import vela

    monkeypatch.setattr(vela, "_installed", lambda module: module != "ethosu.vela")
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("build", "__pycache__"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["validate", "examples/valid/09_ethos_u.yaml"]) == 2
    err = capsys.readouterr().err
    assert "examples/valid/09_ethos_u.yaml:5:" in err and "accelbuild[ethos-u]" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(("min_cosine", "choice"), [(0.9, "int8"), (0.999999, "int16x8")])
def test_auto_precision_chooses_int8_or_int16x8_and_says_why(tmp_path: Path, min_cosine: float, choice: str) -> None:
    """int8 when it reaches the target on the worst held-out frame; otherwise int16x8 when that does better
    (the writer check then allows int16's 2 steps), each figure recorded."""
    import onnx
    from ethos_u_models import CASES

    onnx.save(CASES["conv_relu"](), str(tmp_path / "m.onnx"))
    (tmp_path / ".git").mkdir()
    (tmp_path / "p.yaml").write_text(
        "accelbuild: 1\nname: p\ntarget: {family: ethos-u}\nmodels:\n  - name: m\n    path: m.onnx\n"
        f"    quantize: {{calibration_frames: 4, auto_precision: {{min_cosine: {min_cosine}}}}}\n"
        "benchmark: {accuracy: {samples: 8}}\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    record = json.loads((tmp_path / "build/p/m/quantize.json").read_text())
    auto = record["auto_precision"]
    assert auto["choice"] == choice and f"auto precision chose {choice}" in result.stderr
    assert record["activation_bits"] == (8 if choice == "int8" else 16)
    if choice == "int8":
        assert auto["reached"] and auto["int16x8_cosine"] is None and auto["reason"].startswith("int8 reaches")
    else:
        assert auto["int16x8_cosine"] > auto["int8_cosine"] and auto["measured_on"] == "calibration"
    check = json.loads((tmp_path / "build/p/m/int8.json").read_text())["check"]["layers"]
    assert check["allowed_steps"] == (1.0 if choice == "int8" else 2.0)


def test_auto_precision_with_activation_bits_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "m.onnx").write_bytes(b"")
    (tmp_path / "p.yaml").write_text("accelbuild: 1\ntarget: {family: ethos-u}\nmodels:\n  - path: m.onnx\n"
                                     "    quantize: {activation_bits: 16, auto_precision: true}\n")
    result = run_cli("validate", "p.yaml", cwd=tmp_path)
    assert result.code == 2 and "give activation_bits or auto_precision, not both" in result.stderr


def test_a_softmax_over_1024_values_builds_and_never_aborts(tmp_path: Path) -> None:
    """LiteRT's int8 SOFTMAX aborts the whole process once its fixed-point sum of exponentials overflows (seen
    from 797 equal inputs): a longer axis is written as a float CPU SOFTMAX, and the build goes on (run in a
    subprocess, so an abort would fail this test rather than the suite)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.full((4, 4, 1, 1), 0.25, np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], "conv"),
                               helper.make_node("Softmax", ["c"], ["y"], "softmax", axis=-1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 1, 1024])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1024])], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    (tmp_path / ".git").mkdir()
    write(tmp_path / "p.yaml", "accelbuild: 1\nname: p\ntarget: {family: ethos-u}\n"
                               "benchmark: {frames: 5, host: false, accuracy: {samples: 2}}\nmodels:\n"
                               "  - name: m\n    path: m.onnx\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "written as float CPU operators: Softmax (softmax)" in result.stderr
