"""commands/init.py: init's --family and --platform help comes from the registered families."""

from __future__ import annotations

import pytest

from accelbuild import cli, families
from accelbuild.commands import init
from accelbuild.targets.base import PlatformRule, TargetBase


class _Target(TargetBase):
    family = "toyhelp"
    platform = PlatformRule("the toy board", default="t1")


TARGET = _Target()


@pytest.fixture(autouse=True)
def _family(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(families.registered(), "toyhelp", families.Family("toyhelp", __name__, None))


def test_the_help_lists_every_registered_family_and_its_platform() -> None:
    assert init.family_help().startswith(f"target family: {families.DEFAULT} (default), ")
    assert init.family_help().endswith(" or toyhelp")
    rules = init.platform_help().split("; ")
    assert "toyhelp: the toy board (default t1)" in rules
    assert not any(r.startswith(f"{families.DEFAULT}:") for r in rules)  # the default family takes no platform


def test_init_help_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["init", "--help"])
    assert done.value.code == 0
    assert "toyhelp: the toy board (default t1)" in " ".join(capsys.readouterr().out.split())
