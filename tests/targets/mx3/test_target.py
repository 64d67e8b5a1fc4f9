"""mx3's operator set at the crop stage: what the chip cannot run at the ai section's ends runs on the host
(pre/post sections, a warning, crop.json's unsupported record); in its middle it stays, named in a warning."""

from __future__ import annotations

import json
from pathlib import Path

import onnx

from accelbuild.testing import npu_graphs

from conftest import run_cli, write


def _build(folder: Path, words: list[str], *args: str):
    (folder / "models").mkdir(parents=True)
    onnx.save(npu_graphs.chain(words, channels=8, size=16), folder / "models" / "m.onnx")
    write(folder / "p.yaml", "accelbuild: 1\nname: p\ntarget: {family: mx3}\nmodels:\n  - {name: m, path: models/m.onnx}\n"
                             "benchmark: {accuracy: {samples: 2}}\n")
    return run_cli("run", "p.yaml", *args, cwd=folder)


def test_unsupported_ops_at_both_ends_run_on_the_host(tmp_path: Path) -> None:
    result = _build(tmp_path, ["sin", "conv", "relu", "conv", "sin"])
    assert result.code == 0, result.stderr
    assert "warning: m: moved to the host's pre section, as mx3 does not run them: Sin (l0.sin)" in result.stderr
    assert "warning: m: moved to the host's post section, as mx3 does not run them: Sin (l4.sin)" in result.stderr
    out = tmp_path / "build" / "p"
    crop = json.loads((out / "m" / "crop.json").read_text())
    assert crop["unsupported"] == {"chip": "mx3", "reason": "Sin not among the operators mx3 runs", "kept": [],
                                   "moved": [{"node": "l0.sin", "op": "Sin", "to": "pre"},
                                             {"node": "l4.sin", "op": "Sin", "to": "post"}]}
    assert crop["check"]["max_abs_err"] == 0.0
    for name, op in (("pre", "Sin"), ("post", "Sin")):
        assert [n.op_type for n in onnx.load(out / "m" / f"{name}.onnx").graph.node] == [op]
    assert {n.op_type for n in onnx.load(out / "m" / "ai.onnx").graph.node} == {"Conv", "Relu"}
    assert json.loads((out / "mapping.json").read_text())["unsupported_ops"] == []
    bench = json.loads((out / "benchmark.json").read_text())
    assert bench["fps"] > 0 and bench["models"][0]["unsupported"] == crop["unsupported"]
    assert bench["models"][0]["end_to_end"]["host_measured_on"]  # the moved Sins are timed on the host
    report = (out / "report.html").read_text()
    assert "Operators the chip does not run" in report
    assert "<td>l0.sin</td><td>Sin</td><td>host pre section</td>" in report


def test_an_unsupported_op_in_the_middle_stays_and_is_named(tmp_path: Path) -> None:
    """Chip work on both sides: it cannot move, so it stays modelled as ALU work (as before), and the warning
    names it and says to crop around it."""
    result = _build(tmp_path, ["conv", "sin", "conv"])
    assert result.code == 0, result.stderr
    assert ("warning: m: Sin (l1.sin): not among the operators mx3 runs, and mx3 runs nodes before and after "
            "it, so it stays in the ai section, modelled as its ALU work; crop the model around it "
            "(crop.inputs / crop.outputs) to run it on the host") in result.stderr
    out = tmp_path / "build" / "p"
    crop = json.loads((out / "m" / "crop.json").read_text())
    assert crop["unsupported"]["kept"] == [{"node": "l1.sin", "op": "Sin"}] and crop["unsupported"]["moved"] == []
    assert "pre" not in crop["sections"] and "post" not in crop["sections"]
    assert json.loads((out / "mapping.json").read_text())["unsupported_ops"] == ["Sin"]
    assert "<td>l1.sin</td><td>Sin</td><td>kept on the chip, modelled as ALU work</td>" in (
        out / "report.html").read_text()


def test_a_model_the_chip_runs_nothing_of_moves_nothing_and_says_so(tmp_path: Path) -> None:
    result = _build(tmp_path, ["sin", "celu"], "--until", "crop")
    assert result.code == 0, result.stderr
    assert ("warning: m: no node of the ai section is among the operators mx3 runs (Sin (l0.sin), Celu (l1.celu)): "
            "all are modelled as its ALU work; crop the model to what mx3 runs") in result.stderr
    crop = json.loads((tmp_path / "build" / "p" / "m" / "crop.json").read_text())
    assert crop["unsupported"]["moved"] == [] and len(crop["unsupported"]["kept"]) == 2
