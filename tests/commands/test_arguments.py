"""commands/arguments.py: the options' types, and their messages through the CLI (exit 2)."""

from __future__ import annotations

import argparse

import pytest

from accelbuild import cli
from accelbuild.commands import arguments


def test_input_shapes() -> None:
    assert arguments.input_shape("images=64,64,3") == ("images", [64, 64, 3])
    for bad in ("images", "=1,2", "images=64,x", "images=0,4", f"x={arguments.MAX_DIMENSION + 1}"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected NAME=H,W,C"):
            arguments.input_shape(bad)


def test_sizes_days_and_counts() -> None:
    assert arguments.size("500M") == 500 << 20 and arguments.size("1.5k") == 1536 and arguments.size("7") == 7
    assert arguments.days("0.5") == 0.5 and arguments.positive_int("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match="expected a size such as 500M or 2G, got '5Q'"):
        arguments.size("5Q")
    with pytest.raises(argparse.ArgumentTypeError, match="expected a number of days, got '-1'"):
        arguments.days("-1")
    with pytest.raises(argparse.ArgumentTypeError, match="must be at least 1, got 0"):
        arguments.positive_int("0")


def test_a_bad_size_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["cache", "gc", "--max-size", "lots"])
    assert done.value.code == 2
    assert "argument --max-size: expected a size such as 500M or 2G, got 'lots'" in capsys.readouterr().err
