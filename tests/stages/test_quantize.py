"""The quantize stage through the CLI: overrides, records, errors, incremental behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import run_cli, write

BASE = """\
accelbuild: 1
name: p
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {images: [64, 64, 3]}
    crop: {outputs: [head.p3, head.p4, head.p5]}
"""


def _build(project: Path, quantize: str = "", expect: int = 0):
    write(project / "p.yaml", BASE + (f"    quantize: {quantize}\n" if quantize else ""))
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--json", "--until", "quantize", cwd=project)
    assert result.code == expect, result.stderr
    assert "Traceback" not in result.stderr
    return result


def _record(project: Path) -> dict:
    return json.loads((project / "build/p/det/quantize.json").read_text())


def test_record_has_the_contract_fields(project: Path) -> None:
    _build(project)
    record = _record(project)
    assert record["weight_bytes"] == sum(layer["weight_bytes"] for layer in record["layers"])
    assert {"name", "bits", "weights", "weight_bytes", "sqnr_db"} <= set(record["layers"][0])
    assert record["output"]["cosine"] >= 0.999 and record["output"]["sqnr_db"] > 20
    assert record["packets"]["input_bytes_per_frame"] == 64 * 64 * 3 * 2  # BF16
    assert record["packets"]["inputs"]["images"]["GBFloat80"] == 64 * 64 * 10  # 3 channels: one group
    assert (project / "build/p/det/quantized.onnx").is_file()


def test_a_bits_override_changes_exactly_that_layer(project: Path) -> None:
    _build(project)
    before = {layer["name"]: layer for layer in _record(project)["layers"]}
    result = _build(project, "{bits: {stage2.dwconv.conv: 16}}")
    assert result.statuses()["p:det:quantize"] == "ran"
    assert result.statuses()["p:det:crop"] == "up-to-date"
    after = {layer["name"]: layer for layer in _record(project)["layers"]}
    changed = [name for name in before if before[name] != after[name]]
    assert changed == ["stage2.dwconv.conv"] and after["stage2.dwconv.conv"]["bits"] == 16


def test_four_bit_weights_take_half_the_bytes(project: Path) -> None:
    _build(project)
    eight = _record(project)["weight_bytes"]
    _build(project, "{weight_bits: 4}")
    assert abs(_record(project)["weight_bytes"] - eight / 2) <= len(_record(project)["layers"])


def test_unknown_layer_is_positioned_with_a_suggestion(project: Path) -> None:
    result = _build(project, "{bits: {stage2.dwconv.cnv: 16}}", expect=2)
    assert ("p.yaml:8:23: no weighted layer named 'stage2.dwconv.cnv' in model 'det'; "
            "did you mean 'stage2.dwconv.conv'?") in result.stderr


def test_bits_file(project: Path) -> None:
    write(project / "bits.json", json.dumps({"stem.conv": 4}))
    _build(project, "{bits_file: bits.json}")
    assert {layer["name"]: layer["bits"] for layer in _record(project)["layers"]}["stem.conv"] == 4
    write(project / "bits.json", json.dumps({"stem.conv": 5}))
    result = _build(project, "{bits_file: bits.json}", expect=2)
    assert "bits.json: layer 'stem.conv': bits must be 4, 8 or 16, not 5" in result.stderr


def test_accuracy_data_folder(project: Path) -> None:
    import numpy as np

    (project / "data").mkdir()
    for i in range(3):
        np.save(project / f"data/{i}.npy", np.full((3, 64, 64), i / 3, np.float32))
    write(project / "p.yaml", BASE + "benchmark: {accuracy: {data: data}}\n")
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--until", "quantize", cwd=project)
    assert result.code == 0, result.stderr
    assert _record(project)["output"]["samples"] == 3


def _nan_model(path: Path) -> None:
    """y = log(x * scale - 2): NaN on every input x in [0, 1) with the scalar scale at 1.0."""
    nodes = [helper.make_node("Mul", ["x", "scale"], ["xs"]), helper.make_node("Sub", ["xs", "two"], ["d"]),
             helper.make_node("Log", ["d"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16]),
                                           helper.make_tensor_value_info("scale", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
                              [numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_float_model_giving_nan_on_its_inputs_is_a_positioned_user_error(tmp_path: Path) -> None:
    """No record can hold its figures: exit 2 at the model's entry, naming output, sample and inputs. (mx3 moves
    the model's last operator, a Log it does not run, to the host's post section, so its AI section gives no
    NaN: the npu family, which runs Log on its host inside the AI section, is the second case.)"""
    _nan_model(tmp_path / "m.onnx")
    for target in ("{family: npu, platform: tda4vm}", "{family: cpu}"):
        write(tmp_path / "p.yaml", f"accelbuild: 1\nname: p\ntarget: {target}\nmodels:\n  - name: m\n"
                                   "    path: m.onnx\n")
        result = run_cli("run", "p.yaml", cwd=tmp_path)
        assert result.code == 2, result.stderr
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr
        assert ("p.yaml:5:5: model 'm': the float model, before any quantization, gives NaN at output 'y' on "
                "random #0: its seeded random inputs (x: uniform in [0, 1); scale: 1.0, docs/data.md) are not "
                "values it computes on; give representative inputs with `data:` (models[].data)") in result.stderr


def test_a_quantized_model_giving_infinity_is_a_recorded_worst_figure(tmp_path: Path) -> None:
    """log(relu(x W - 0.5) + 1e-4): finite in float; int8 rounds the 1e-4 to 0 and the log is -inf. The build
    goes on; the record rates those frames cosine -1.0, counts the values and stays valid JSON."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Sub", ["m", "half"], ["s"]),
             helper.make_node("Relu", ["s"], ["r"]), helper.make_node("Add", ["r", "eps"], ["a"]),
             helper.make_node("Log", ["a"], ["y"])]
    inits = [numpy_helper.from_array((rng.standard_normal((64, 32)) * 0.2).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half"),
             numpy_helper.from_array(np.array(1e-4, np.float32), "eps")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    write(tmp_path / "p.yaml", "accelbuild: 1\nname: p\ntarget: {family: cpu, precision: int8}\n"
                               "models:\n  - name: m\n    path: m.onnx\n")
    result = run_cli("run", "p.yaml", "--until", "quantize", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "hold NaN or infinity where the float model's do not" in result.stderr
    output = json.loads((tmp_path / "build/p/m/quantize.json").read_text(),
                        parse_constant=lambda name: pytest.fail(f"{name} in quantize.json"))["output"]
    assert output["cosine"] == -1.0 and output["sqnr_db"] == -200.0
    assert output["non_finite"]["frames"] == sum(1 for row in output["frames"] if row.get("non_finite")) > 0
