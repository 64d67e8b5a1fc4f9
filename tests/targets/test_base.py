"""targets/base.py: TargetBase's defaults for the optional members, and what core code does with them."""

from __future__ import annotations

import onnx

from accelbuild.families import builtin, get_target
from accelbuild.targets.base import PlatformRule, TargetBase


class _Bare(TargetBase):
    family = "bare"


def test_defaults() -> None:
    bare = _Bare()
    assert bare.chip_ops(None) is None  # type: ignore[arg-type]
    assert bare.model_problems(onnx.ModelProto()) == []
    assert bare.device_runtime is None and bare.no_device_runtime
    assert bare.platform is None and bare.starter_target(None) == ["family: bare"]


def test_platform_rule_help() -> None:
    assert PlatformRule("the SoC", "x1").help() == "the SoC (default x1)"
    assert PlatformRule("the board", example="a, b").help() == "the board (required; e.g. a, b)"
    assert PlatformRule("the board").help() == "the board (required)"


def test_every_builtin_family_has_the_declared_surface() -> None:
    for name in builtin():
        target = get_target(name)
        assert isinstance(target, TargetBase), name
        assert target.starter_target(target.platform.default if target.platform else None)[0] == f"family: {name}"
        assert target.device_runtime is None or callable(target.device_runtime)
