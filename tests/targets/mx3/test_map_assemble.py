"""Map and assemble through the CLI: mapping.json, DFPs, inspect, errors."""

from __future__ import annotations

import json
from pathlib import Path

import onnx

from accelbuild.targets.mx3.dfp import read_dfp
from accelbuild.testing.npu_graphs import chain

from conftest import run_cli, write

PIPELINE = """\
accelbuild: 1
name: p
target: {num_chips: 2, effort: hard}
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {images: [64, 64, 3]}
    crop: {outputs: [head.p3, head.p4, head.p5]}
  - name: cls
    path: models/tinycls.onnx
"""


def _build(project: Path, text: str = PIPELINE, *extra: str, expect: int = 0):
    write(project / "p.yaml", text)
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--json", *extra, cwd=project)
    assert result.code == expect, result.stderr
    assert "Traceback" not in result.stderr
    return result


def test_mapping_json_has_the_contract_fields(project: Path) -> None:
    _build(project)
    mapping = json.loads((project / "build/p/mapping.json").read_text())
    for key in ("num_chips", "effort", "fps", "latency_ms", "bottleneck", "chips", "layers", "candidates"):
        assert key in mapping
    assert mapping["effort"] == "hard" and mapping["candidates"]
    assert mapping["fps"] == mapping["candidates"][0]["fps"]
    layer = mapping["layers"][0]
    assert {"name", "model", "chip", "cores", "cycles", "utilization"} <= set(layer)
    assert all(0 <= u <= 1 for chip in mapping["chips"] for u in chip["mac_core_utilization"])


def test_dfp_is_written_and_inspected(project: Path) -> None:
    _build(project)
    dfp = read_dfp(project / "build/p/p.dfp")
    assert [m.name for m in dfp.header.models] == ["det", "cls"]
    assert dfp.header.models[0].inputs[0].shape == (1, 3, 64, 64)
    assert "simcfg" not in dfp.sections
    shown = run_cli("inspect", "build/p/p.dfp", cwd=project)
    assert shown.code == 0 and "chip gen    mx3" in shown.stdout and "weights" in shown.stdout


def test_dfp_name_and_sim_dfp(project: Path) -> None:
    _build(project, PIPELINE + "output: {dfp_name: mine.dfp, sim_dfp: true}\n")
    assert "simcfg" in read_dfp(project / "build/p/mine.dfp").sections


def test_show_mapping_prints_the_grid(project: Path) -> None:
    write(project / "p.yaml", PIPELINE)
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--show-mapping", cwd=project)
    assert result.code == 0
    assert "chip 0: MAC" in result.stdout and "  MAC   0 |" in result.stdout


def test_bad_dfps_exit_2(project: Path) -> None:
    _build(project)
    good = (project / "build/p/p.dfp").read_bytes()
    cases = {
        "truncated.dfp": good[: len(good) // 2],
        "flipped.dfp": good[:500] + bytes([good[500] ^ 1]) + good[501:],
        "version.dfp": good[:8] + (2).to_bytes(2, "little") + good[10:],
        "junk.dfp": b"not a dfp at all",
    }
    for name, data in cases.items():
        (project / name).write_bytes(data)
        result = run_cli("inspect", name, cwd=project)
        assert result.code == 2, name
        assert result.stderr.startswith(f"{name}: ") and "Traceback" not in result.stderr


def test_too_few_chips_is_a_positioned_error(project: Path) -> None:
    # 12 x 590k weights at 16 bits = 14.2 MB: more than one chip's 10.5 MB, no single layer too large
    onnx.save(chain(["conv"] * 12, channels=256, size=4), project / "models/chain.onnx")
    text = ("accelbuild: 1\nname: p\ntarget: {num_chips: 1}\nmodels:\n  - path: models/chain.onnx\n"
            "    quantize: {weight_bits: 16}\nbenchmark: {accuracy: {samples: 1}}\n")
    result = _build(project, text, "--until", "map", expect=2)
    # said at load, before import and quantize: 12 x 589,824 weights at 16 bits, 29 of 42,000-byte cores each
    assert result.stderr.startswith(
        "p.yaml:3:21: num_chips is 1, but the models' weights need at least 2 mx3 chips: chain 14,155,776 bytes "
        "at 16-bit (348 MAC cores of 42,000 bytes; one chip has 250)")
    assert not (project / "build/p").exists()


def test_share_input_needs_equal_input_shapes(project: Path) -> None:
    text = PIPELINE.replace("{num_chips: 2, effort: hard}", "{num_chips: 2, share_input: true}")
    result = _build(project, text, expect=2)
    assert "p.yaml:3:37: share_input feeds one stream to every model, but their inputs differ" in result.stderr


def test_mapping_fps_is_the_combined_figure_and_fewer_chips_say_why(project: Path) -> None:
    """mapping.json's fps means what benchmark.json's does (the slowest model's rate, named by fps_is), never the
    models' rates added; a mapping on fewer chips than num_chips says why, in the log and in mapping.json."""
    result = _build(project, PIPELINE.replace("num_chips: 2, effort: hard", "num_chips: 4"), "--until", "map")
    mapping = json.loads((project / "build/p/mapping.json").read_text())
    rates = [m["fps"] for m in mapping["models"]]
    assert mapping["fps"] == min(rates) < sum(rates)
    assert mapping["fps_is"] == "sets per second, one frame of each of the 2 models (the slowest model's rate)"
    assert mapping["num_chips_requested"] == 4 and mapping["num_chips"] < 4
    reason = mapping["num_chips_reason"]
    assert reason.startswith(f"mapped on {mapping['num_chips']} of the 4 chips requested: ") and " binds, and " in reason
    assert f"accelbuild: p: {reason}" in result.stderr  # a note: the mapper chose fewer chips, and says why


def test_min_chips(project: Path) -> None:
    _build(project, PIPELINE.replace("num_chips: 2", "num_chips: min"))
    assert json.loads((project / "build/p/mapping.json").read_text())["num_chips_requested"] == 1
