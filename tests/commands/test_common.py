"""commands/common.py: options from the arguments, else the environment."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from accelbuild.commands import common
from accelbuild.errors import InputFileError, UserError


def test_the_option_wins_over_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELBUILD_REMOTE_CACHE", str(tmp_path / "from-env"))
    assert common.remote_cache_url(argparse.Namespace(remote_cache=None)).endswith("from-env")
    assert common.remote_cache_url(argparse.Namespace(remote_cache=str(tmp_path / "given"))).endswith("given")
    assert common.remote_cache_url(argparse.Namespace()) is None  # a command without the option
    monkeypatch.setenv("ACCELBUILD_REMOTE_CACHE", "nosuch://bucket")
    with pytest.raises(UserError, match="ACCELBUILD_REMOTE_CACHE"):
        common.remote_cache_url(argparse.Namespace(remote_cache=None))


def test_options_and_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".accelbuild").mkdir()
    monkeypatch.delenv("ACCELBUILD_REMOTE_CACHE", raising=False)
    args = argparse.Namespace(state_dir=Path("s"), cache_dir=None, jobs=3)
    options = common.options(args)
    assert options.state_dir == tmp_path / "s" and options.cache_dir.is_relative_to(tmp_path / "s")
    assert options.jobs == 3 and not options.force and options.remote_cache is None


def test_a_model_file_is_refused_where_a_pipeline_is_expected() -> None:
    with pytest.raises(InputFileError, match="write one with `accelbuild init m.onnx`"):
        common.refuse_model_files(["p.yaml", "m.onnx"], "run")
