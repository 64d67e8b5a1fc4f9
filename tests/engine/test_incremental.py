"""Acceptance of the pipeline core: what re-runs after which edit, caching across checkouts, -j."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import onnx
from onnx import numpy_helper

from conftest import run_cli, run_cli_process, tree_bytes, write

PIPELINE = """\
accelbuild: 1
name: demo
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {images: [64, 96, 3]}
  - name: cls
    path: models/tinycls.onnx
"""


def build(project: Path, *extra: str, yaml: str = "demo.yaml"):
    run = run_cli_process if "-j" in extra else run_cli  # -j: doit's worker processes, in a process of their own
    result = run("run", yaml, "--json", "--state-dir", "state", *extra, cwd=project)
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.statuses()


def _of(statuses: dict[str, str], model: str) -> set[str]:
    """The statuses of one model's tasks."""
    return {status for name, status in statuses.items() if name.startswith(f"demo:{model}:")}


def test_second_run_is_up_to_date(project: Path) -> None:
    write(project / "demo.yaml", PIPELINE)
    assert set(build(project).values()) == {"ran"}
    assert set(build(project).values()) == {"up-to-date"}
    assert (project / "build/demo/det/imported.onnx").is_file()


def test_comment_edit_and_touch_rerun_nothing(project: Path) -> None:
    write(project / "demo.yaml", PIPELINE)
    build(project)
    write(project / "demo.yaml", "# a comment\n" + PIPELINE.replace("name: demo", "name: demo  # same"))
    model = project / "models/tinydet.onnx"
    later = model.stat().st_mtime + 100
    os.utime(model, (later, later))
    assert set(build(project).values()) == {"up-to-date"}


def test_changed_model_bytes_rerun_that_model_only(project: Path) -> None:
    write(project / "demo.yaml", PIPELINE)
    build(project)
    model = onnx.load(project / "models/tinycls.onnx")
    weight = model.graph.initializer[0]
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 1.5, weight.name))
    onnx.save(model, project / "models/tinycls.onnx")
    statuses = build(project)
    assert _of(statuses, "det") == {"up-to-date"} and _of(statuses, "cls") == {"ran"}


def test_changed_parameter_reruns_only_that_model(project: Path) -> None:
    write(project / "demo.yaml", PIPELINE)
    build(project)
    write(project / "demo.yaml", PIPELINE.replace("[64, 96, 3]", "[96, 64, 3]"))
    statuses = build(project)
    assert _of(statuses, "det") == {"ran"} and _of(statuses, "cls") == {"up-to-date"}
    status = run_cli("status", "demo.yaml", "--state-dir", "state", cwd=project)
    assert status.code == 0 and "would run" not in status.stdout


def test_status_names_the_changed_parameter_and_input(project: Path) -> None:
    write(project / "demo.yaml", PIPELINE)
    build(project)
    write(project / "demo.yaml", PIPELINE.replace("[64, 96, 3]", "[32, 32, 3]"))
    model = onnx.load(project / "models/tinycls.onnx")
    model.doc_string = "edited"
    onnx.save(model, project / "models/tinycls.onnx")
    status = run_cli("status", "demo.yaml", "--state-dir", "state", cwd=project)
    assert status.code == 0, status.stderr
    assert "parameter input_shapes changed: {'images': [64, 96, 3]} -> {'images': [32, 32, 3]}" in status.stdout
    assert "input model changed" in status.stdout and "tinycls.onnx" in status.stdout


def test_restored_cache_in_a_fresh_checkout_builds_nothing(project: Path, tmp_path_factory) -> None:
    write(project / "demo.yaml", PIPELINE)
    build(project, "--cache-dir", "cache")
    fresh = tmp_path_factory.mktemp("fresh")
    shutil.copytree(project / "models", fresh / "models")
    shutil.copy(project / "demo.yaml", fresh / "demo.yaml")
    shutil.copytree(project / "cache", fresh / "cache")
    assert set(build(fresh, "--cache-dir", "cache").values()) == {"cached"}
    assert tree_bytes(fresh / "build") == tree_bytes(project / "build")


def test_tampered_cache_entry_is_rebuilt(project: Path, tmp_path_factory) -> None:
    write(project / "demo.yaml", PIPELINE)
    build(project, "--cache-dir", "cache")
    for obj in (project / "cache/objects").rglob("*"):
        if obj.is_file():
            obj.write_bytes(obj.read_bytes()[:-1] + b"!")
    shutil.rmtree(project / "build")
    shutil.rmtree(project / "state")
    assert set(build(project, "--cache-dir", "cache").values()) == {"ran"}
    assert set(build(project, "--cache-dir", "cache").values()) == {"up-to-date"}


def test_parallel_and_serial_builds_are_byte_identical(project: Path, tmp_path_factory) -> None:
    write(project / "demo.yaml", PIPELINE)
    other = tmp_path_factory.mktemp("other")
    shutil.copytree(project, other, dirs_exist_ok=True)
    build(project, "-j", "1")
    build(other, "-j", "2")
    serial, parallel = tree_bytes(project / "build"), tree_bytes(other / "build")
    assert serial and serial == parallel


def test_force_reruns_everything(project: Path) -> None:
    write(project / "demo.yaml", PIPELINE)
    build(project)
    assert set(build(project, "--force").values()) == {"ran"}


def test_an_edit_that_leaves_an_output_unchanged_stops_there(project: Path) -> None:
    write(project / "demo.yaml", PIPELINE)
    build(project)
    model = onnx.load(project / "models/tinycls.onnx")
    model.doc_string = "edited"  # reaches imported.onnx, not the cropped AI section
    onnx.save(model, project / "models/tinycls.onnx")
    statuses = build(project)
    assert statuses["demo:cls:import"] == "ran" and statuses["demo:cls:crop"] == "ran"
    assert statuses["demo:cls:quantize"] == "up-to-date"
