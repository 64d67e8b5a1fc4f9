"""models[].data and auto_precision targets through the quantize stage (family mx3)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from conftest import run_cli, write

PIPELINE = """\
accelbuild: 1
name: p
target: {num_chips: 1}
models:
  - name: cls
    path: models/tinycls.onnx
    input_shapes: {input: [32, 32, 3]}
    quantize: {weight_bits: 4%s}
%s
benchmark: {frames: 20, host: false, accuracy: {samples: 2}}
"""


def _images(folder: Path, count: int) -> None:
    rng = np.random.default_rng(3)
    folder.mkdir(parents=True)
    for i in range(count):
        pixels = (np.linspace(0, 255, 48 * 40 * 3).reshape(48, 40, 3) * rng.random() + rng.integers(0, 30))
        Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(folder / f"{i:03d}.png")


def _quantize(project: Path, quantize: str = "", data: str = "", code: int = 0) -> dict:
    write(project / "p.yaml", PIPELINE % (quantize, data))
    result = run_cli("run", "p.yaml", "--until", "quantize", cwd=project)
    assert result.code == code, result.stderr
    return json.loads((project / "build/p/cls/quantize.json").read_text()) if code == 0 else {"stderr": result.stderr}


def test_records_say_which_inputs_were_used(project: Path) -> None:
    assert _quantize(project)["output"]["inputs"] == "random"
    _images(project / "imgs", 5)
    record = _quantize(project, data="    data: {path: imgs, count: 4}")["output"]
    assert (record["inputs"], record["folder"], record["samples"]) == ("data", "imgs", 4)


def test_a_changed_image_reruns_quantize(project: Path) -> None:
    _images(project / "imgs", 3)
    _quantize(project, data="    data: {path: imgs}")
    Image.new("RGB", (10, 10), (9, 9, 9)).save(project / "imgs/001.png")
    again = run_cli("run", "p.yaml", "--until", "quantize", "--json", cwd=project)
    assert again.statuses()["p:cls:quantize"] == "ran" and again.statuses()["p:cls:import"] == "up-to-date"


def test_auto_precision_reaches_a_target_and_reports_a_missed_one(project: Path) -> None:
    _images(project / "imgs", 4)
    data = "    data: {path: imgs}"
    reached = _quantize(project, ", auto_precision: {min_cosine: 0.99999}", data)["auto_precision"]
    assert reached["reached"] is True and reached["raised"]
    assert reached["steps"][-1]["cosine"] >= 0.99999 > reached["start_cosine"]
    bound = _quantize(project, ", auto_precision: {min_cosine: 0.99999, max_extra_bytes: 0}", data)["auto_precision"]
    assert bound["reached"] is False and bound["raised"] == []
    assert "max_extra_bytes binds" in bound["reason"]


def test_mx3_refuses_activation_quantization_keys(project: Path) -> None:
    out = _quantize(project, ", activation_bits: 8", code=2)["stderr"]
    assert out.startswith("p.yaml:8:32: unknown key 'activation_bits' in models.0.quantize: a key of family cpu, "
                          "ethos-u, npu, not of family mx3")


def test_bad_data_is_a_clear_error(project: Path) -> None:
    (project / "empty").mkdir()
    out = _quantize(project, data="    data: {path: empty}", code=2)["stderr"]
    assert "empty" in out.splitlines()[0] and "Traceback" not in out
    _images(project / "few", 2)
    out = _quantize(project, data="    data: {path: few, count: 5}", code=2)["stderr"]
    assert "Traceback" not in out and "5" in out.splitlines()[0]
