"""benchmark.accuracy.warn_below: a model below the accuracy floor is named in a warning with its weakest
layer; the build itself succeeds (checks.min_cosine is what fails a build)."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import EXAMPLE_MODELS, run_cli, write


def test_a_model_below_the_floor_is_named_with_its_weakest_layer(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE_MODELS / "tinycls.onnx", tmp_path / "tinycls.onnx")
    pipeline = "accelbuild: 1\ntarget: {{num_chips: 1}}\nbenchmark: {{frames: 20{floor}}}\nmodels:\n  - path: tinycls.onnx\n"
    write(tmp_path / "p.yaml", pipeline.format(floor=""))
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0 and "below" not in result.stderr, result.stderr  # cosine ~0.999 clears 0.98
    write(tmp_path / "p.yaml", pipeline.format(floor=", accuracy: {warn_below: 1.0}"))
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "is below 1 (benchmark.accuracy.warn_below)" in line]
    assert len(lines) == 1 and lines[0].startswith("accelbuild: warning: p: tinycls: output cosine 0.99")
    assert "; weakest layer " in lines[0] and "dB weight SQNR in quantize.json" in lines[0]


def test_a_model_with_several_outputs_names_the_output_below_the_floor(tmp_path: Path) -> None:
    """The example detector's three heads are compared one by one: the warning names the frame and the head."""
    shutil.copy(EXAMPLE_MODELS / "tinydet.onnx", tmp_path / "tinydet.onnx")
    write(tmp_path / "p.yaml", "accelbuild: 1\ntarget: {num_chips: 1}\nbenchmark: {frames: 20, accuracy: {warn_below: 1.0}}\n"
                               "models:\n  - path: tinydet.onnx\n    input_shapes: {images: [320, 320, 3]}\n"
                               "    crop: {outputs: [head.p3, head.p4, head.p5]}\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "(benchmark.accuracy.warn_below)" in line]
    assert len(lines) == 1 and ", output head.p" in lines[0], result.stderr
