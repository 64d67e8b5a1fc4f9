"""engine/info_cache.py: tensors and init describe a model once; the same bytes and shapes are read back."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx
import pytest

from accelbuild.engine import model_info
from accelbuild.stages import import_

from conftest import EXAMPLE_MODELS, run_cli


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(EXAMPLE_MODELS / "tinydet.onnx", tmp_path / "tinydet.onnx")
    monkeypatch.setenv("ACCELBUILD_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "tinydet.onnx"


def test_a_described_model_is_read_back(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    imports: list[Path] = []
    real = import_.run
    monkeypatch.setattr(import_, "run", lambda ctx: (imports.append(ctx.inputs["model"]), real(ctx)))
    first = model_info.read_model(model, {"images": [64, 64, 3]})
    again = model_info.read_model(model, {"images": [64, 64, 3]})
    assert len(imports) == 1 and again == first and model_info.describe(again) == model_info.describe(first)
    model_info.read_model(model, {"images": [96, 96, 3]})  # other shapes: imported again
    assert len(imports) == 2
    edited = onnx.load(model)
    edited.doc_string = "edited"
    onnx.save(edited, model)  # other bytes: imported again
    model_info.read_model(model, {"images": [64, 64, 3]})
    assert len(imports) == 3


def test_a_model_that_cannot_be_read_is_not_kept(model: Path) -> None:
    for _ in range(2):  # said each time
        with pytest.raises(Exception, match="dynamic dimensions"):
            model_info.read_model(model)
    assert not (model.parent / "state/model_info").exists()


def test_tensors_twice_prints_the_same(model: Path) -> None:
    env = {"ACCELBUILD_STATE_DIR": str(model.parent / "state")}
    args = ("tensors", "tinydet.onnx", "--input-shape", "images=64,64,3")
    first, second = run_cli(*args, cwd=model.parent, env=env), run_cli(*args, cwd=model.parent, env=env)
    assert first.code == second.code == 0 and first.stdout == second.stdout and "head.p3" in first.stdout
    assert len(list((model.parent / "state/model_info").glob("*.json"))) == 1


def test_a_described_model_is_read_back_without_onnx_or_numpy(model: Path) -> None:
    """The second tensors of a model reads its description only: neither onnx nor numpy is imported (the
    family its pipeline is read through, cpu, keeps its compilers' imports for when it compiles)."""
    import subprocess
    import sys

    code = ("import sys\nfrom pathlib import Path\nfrom accelbuild.engine.model_info import read_model\n"
            "read_model(Path(sys.argv[1]), {'images': [64, 64, 3]})\n"
            "print(sorted(m for m in ('onnx', 'numpy', 'onnxruntime') if m in sys.modules))\n")
    first = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, text=True, timeout=120)
    again = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, text=True, timeout=120)
    assert first.stdout.splitlines() == ["['numpy', 'onnx', 'onnxruntime']"], first.stderr
    assert again.stdout.splitlines() == ["[]"], again.stderr
