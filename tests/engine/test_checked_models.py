"""engine/checked_models.py: validate opens a model once; the same bytes and settings are not opened again."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx
import pytest

from accelbuild.config.load import load_pipelines
from accelbuild.engine import preflight
from accelbuild.engine.checked_models import CheckedModels
from accelbuild.errors import ConfigErrors

from conftest import EXAMPLE_MODELS, run_cli, write

PIPELINE = """\
accelbuild: 1
name: demo
models:
  - name: det
    path: tinydet.onnx
    input_shapes: {images: [64, 64, 3]}
    crop: {outputs: [head.p3, head.p4, head.p5]}
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(EXAMPLE_MODELS / "tinydet.onnx", tmp_path / "tinydet.onnx")
    write(tmp_path / "p.yaml", PIPELINE)
    monkeypatch.setenv("ACCELBUILD_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


def _stages_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    ran: list[str] = []
    real = preflight._run
    monkeypatch.setattr(preflight, "_run", lambda job, i, o: (ran.append(job.stage), real(job, i, o)))
    return ran


def test_a_model_that_passed_is_not_opened_again(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = _stages_run(monkeypatch)
    preflight.check_models(load_pipelines([str(folder / "p.yaml")]))
    assert ran == ["import", "crop"] and len(list((folder / "state/checked_models").glob("*.json"))) == 1
    preflight.check_models(load_pipelines([str(folder / "p.yaml")]))
    assert ran == ["import", "crop"]  # recorded: nothing ran
    write(folder / "p.yaml", PIPELINE.replace("[64, 64, 3]", "[96, 96, 3]"))  # another setting: checked again
    preflight.check_models(load_pipelines([str(folder / "p.yaml")]))
    assert ran == ["import", "crop"] * 2
    model = onnx.load(folder / "tinydet.onnx")
    model.doc_string = "edited"
    onnx.save(model, folder / "tinydet.onnx")  # other bytes: checked again
    preflight.check_models(load_pipelines([str(folder / "p.yaml")]))
    assert ran == ["import", "crop"] * 3


def test_a_model_with_a_mistake_is_not_recorded(folder: Path) -> None:
    write(folder / "p.yaml", PIPELINE.replace("head.p5]", "head.p6]"))
    for _ in range(2):  # said each time
        with pytest.raises(ConfigErrors, match="head.p6"):
            preflight.check_models(load_pipelines([str(folder / "p.yaml")]))
    assert not (folder / "state/checked_models").exists()


def test_models_with_data_or_bits_are_always_checked(folder: Path) -> None:
    checked = CheckedModels(folder / "state/checked_models")
    write(folder / "p.yaml", PIPELINE + "    quantize: {bits: {x: 16}}\n")
    pipeline = load_pipelines([str(folder / "p.yaml")])[0]
    jobs = [j for j in preflight.plan([pipeline], until="crop")]
    assert checked.key(jobs, pipeline) is None
    checked.add("k", ["a warning"])
    assert checked.warnings("k") == ["a warning"] and checked.warnings("other") is None


def test_validate_twice_says_the_same(folder: Path) -> None:
    env = {"ACCELBUILD_STATE_DIR": str(folder / "state")}
    first = run_cli("validate", "p.yaml", cwd=folder, env=env)
    second = run_cli("validate", "p.yaml", cwd=folder, env=env)
    assert first.code == second.code == 0 and first.stdout == second.stdout == "p.yaml: ok (pipeline demo; models: det)\n"
