"""A num_chips too small for the models' weights is said at load (validate), positioned at num_chips, from the
model files alone; the floor never exceeds what the mapper itself needs."""

from __future__ import annotations

import json
from pathlib import Path

import onnx

from accelbuild.testing.npu_graphs import chain

from conftest import run_cli, write

# an mx3 with 4 MAC cores per chip: six 3x3 64-channel convolutions (36,864 weights, one core each) need 2 chips
SMALL = """\
profile: 1
name: small_mx3
description: an mx3 with 4 MAC cores per chip
inherits: mx3
chip:
  mac_cores:
    count: 4
  weight_memory_params_8bit: 168000
"""


def _pipeline(project: Path, chips: str, extra: str = "") -> None:
    write(project / "small.yaml", SMALL)
    write(project / "p.yaml", f"accelbuild: 1\nname: p\ntarget: {{chip_gen: small.yaml, num_chips: {chips}}}\n"
                              f"models:\n  - path: models/wide.onnx\n{extra}")


def test_too_few_chips_for_the_weights_is_exit_2_at_num_chips(project: Path) -> None:
    onnx.save(chain(["conv", "relu"] * 6, channels=64, size=8), project / "models/wide.onnx")
    _pipeline(project, "1")
    result = run_cli("validate", "p.yaml", cwd=project)
    assert result.code == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(
        "p.yaml:3:43: num_chips is 1, but the models' weights need at least 2 small_mx3 chips: wide 221,184 bytes "
        "at 8-bit (6 MAC cores of 42,000 bytes; one chip has 4). Raise num_chips (or num_chips: min) or quantize "
        "weights to fewer bits")
    _pipeline(project, "1", "    quantize: {weight_bits: 4}\n")  # 4-bit: still one core per layer
    assert "at least 2 small_mx3 chips: wide 110,592 bytes at 4-bit" in run_cli("validate", "p.yaml", cwd=project).stderr


def test_the_floor_is_what_the_mapper_needs_and_a_cropped_model_is_not_counted(project: Path) -> None:
    onnx.save(chain(["conv", "relu"] * 6, channels=64, size=8), project / "models/wide.onnx")
    _pipeline(project, "min")
    assert run_cli("run", "p.yaml", "--until", "map", "-q", cwd=project).code == 0
    assert json.loads((project / "build/p/mapping.json").read_text())["num_chips"] == 2
    # a crop may cut weights off: load cannot count them, and the map stage says what is short
    _pipeline(project, "1", "    crop: {outputs: [l10.conv]}\n")
    assert run_cli("validate", "p.yaml", cwd=project).code == 0
    mapped = run_cli("run", "p.yaml", "--until", "map", cwd=project)
    assert mapped.code == 2 and "p.yaml:3:43: the models need at least 2 chips" in mapped.stderr


def test_loading_a_pipeline_counts_the_weights_without_importing_onnx(project: Path) -> None:
    """A warm validate (the model checked before) reads the weight floor from the wire format: onnx, the
    slowest import there is, stays out of the process."""
    import subprocess
    import sys

    onnx.save(chain(["conv", "relu"] * 6, channels=64, size=8), project / "models/wide.onnx")
    _pipeline(project, "1")
    code = ("import sys\nfrom accelbuild.config.load import load_pipelines\nfrom accelbuild.errors import ConfigErrors\n"
            "try:\n    load_pipelines(['p.yaml'])\nexcept ConfigErrors as e:\n    print(e.errors[0].message[:39])\n"
            "print('onnx' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["num_chips is 1, but the models' weights", "False"], done.stderr
    # nothing to count (a crop may cut weights off): neither the hardware profile's types nor the wire reader load
    _pipeline(project, "1", "    crop: {outputs: [l10.conv]}\n")
    code = ("import sys\nfrom accelbuild.config.load import load_pipelines\nload_pipelines(['p.yaml'])\n"
            "print(sorted(m for m in sys.modules if m.endswith(('mx3.hardware', 'onnx_wire'))))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["[]"], done.stderr
