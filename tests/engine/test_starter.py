"""engine/starter.py: init's starter pipeline, with the family's own target lines and --platform rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbuild import api, families
from accelbuild.engine import starter
from accelbuild.engine.model_info import ModelInfo
from accelbuild.errors import InputFileError, UserError
from accelbuild.targets.base import PlatformRule, TargetBase
from accelbuild.testing.models import tiny_classifier


class _BoardTarget(TargetBase):
    family = "toyboard"
    platform = PlatformRule("the board", required="a1 or a2")

    def starter_target(self, platform: str | None) -> list[str]:
        return ["family: toyboard", f"board: {platform}   # which board"]


class _PlainTarget(TargetBase):
    family = "toyplain"


TARGETS = {"toyboard": _BoardTarget(), "toyplain": _PlainTarget()}


def __getattr__(name: str) -> object:  # families.Family("toyboard", "<this module>:TOYBOARD") imports these
    if name.startswith("TOY"):
        return TARGETS[name.lower()]
    raise AttributeError(name)


@pytest.fixture
def toy_families(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in TARGETS:
        monkeypatch.setitem(families.registered(), name, families.Family(name, f"{__name__}:{name.upper()}", None))


def _info(path: Path) -> ModelInfo:
    return ModelInfo(path, [{"name": "x", "shape": [1, 3, 8, 8], "layout": "NCHW"}], [], [], ["x"], ["y"], ["why"])


@pytest.mark.usefixtures("toy_families")
def test_the_platform_rule_is_checked_before_the_model_is_read() -> None:
    assert starter.checked_target("toyboard", "a1") is TARGETS["toyboard"]
    with pytest.raises(UserError, match=r"^init: --family toyboard needs --platform P: a1 or a2$"):
        starter.checked_target("toyboard", None)
    with pytest.raises(UserError) as given:
        starter.checked_target("toyplain", "a1")
    assert "--platform applies to --family" in str(given.value) and "toyboard" in str(given.value)
    assert str(given.value).endswith(", not toyplain") and "toyplain," not in str(given.value)
    with pytest.raises(UserError, match="did you mean 'toyboard'"):
        starter.checked_target("toybord", None)


def test_the_target_lines_and_the_name_are_the_familys(tmp_path: Path) -> None:
    text = starter.starter_pipeline(_info(tmp_path / "m.onnx"), tmp_path / "p.yaml", TARGETS["toyboard"], "a2")
    assert "name: m-toyboard-a2\ntarget:\n  family: toyboard\n  board: a2   # which board\nmodels:\n" in text
    assert '      "x": [8, 8, 3]\n' in text and '    #   outputs: ["y"]\n    #   (why)\n' in text
    plain = starter.starter_pipeline(_info(tmp_path / "m.onnx"), tmp_path / "p.yaml", TARGETS["toyplain"])
    assert "name: m-toyplain\ntarget:\n  family: toyplain\nmodels:\n" in plain


def test_pipeline_names() -> None:
    assert starter.pipeline_name("cls", "fam", None) == "cls-fam"
    assert starter.pipeline_name("cls", "fam", "boards/my board.yaml") == "cls-fam-my_board"
    assert starter.pipeline_name("cls", "fam", "fam-55", names_family=True) == "cls-fam-55"


def test_init_through_the_api_writes_a_pipeline_that_loads_and_never_overwrites(tmp_path: Path) -> None:
    import onnx

    onnx.save(tiny_classifier(), tmp_path / "cls.onnx")
    out, info = api.init(tmp_path / "cls.onnx", tmp_path / "conf" / "cls.yaml", "cpu")
    assert out == tmp_path / "conf" / "cls.yaml" and len(info.inputs) == 1
    [pipeline] = api.load(out)
    assert pipeline.name == "cls-cpu" and pipeline.target.family == "cpu"
    with pytest.raises(InputFileError, match="already exists"):
        api.init(tmp_path / "cls.onnx", out, "cpu")
    with pytest.raises(InputFileError, match="no such folder"):
        api.init(tmp_path / "cls.onnx", tmp_path / "other.yaml", "cpu", data=tmp_path / "missing")
    assert not (tmp_path / "other.yaml").exists()
