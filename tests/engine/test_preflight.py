"""engine/preflight.py: validate's stage outputs are scratch (atomic, never fsync'ed); its record is durable."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from accelbuild.config.load import load_pipelines
from accelbuild.engine import model_info, preflight
from accelbuild.util import files

from conftest import EXAMPLE_MODELS, write


def _fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the files fsync'ed from now on."""
    paths: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(files.os, "fsync", fsync)
    return paths


def test_validate_and_tensors_flush_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(EXAMPLE_MODELS / "tinydet.onnx", tmp_path / "tinydet.onnx")
    write(tmp_path / "p.yaml", "accelbuild: 1\nname: demo\nmodels:\n  - name: det\n    path: tinydet.onnx\n"
                               "    input_shapes: {images: [64, 64, 3]}\n")
    monkeypatch.setenv("ACCELBUILD_STATE_DIR", str(tmp_path / "state"))
    flushed = _fsynced(monkeypatch)
    preflight.check_models(load_pipelines([str(tmp_path / "p.yaml")]))
    model_info.read_model(tmp_path / "tinydet.onnx", {"images": [64, 64, 3]})
    # neither the temporary stage outputs nor the state dir's records, which only save time
    assert flushed == [] and list((tmp_path / "state").rglob("*.json")), flushed
