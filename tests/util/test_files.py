"""util/files.py: atomic writes are fsync'ed, except under a command's scratch folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from accelbuild.util import files


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    return calls


def test_a_durable_write_is_fsynced_outside_scratch_and_not_inside(tmp_path: Path, fsyncs: list[int]) -> None:
    kept, thrown = tmp_path / "kept", tmp_path / "thrown"
    files.write_bytes_atomic(kept / "a.bin", b"a")
    assert len(fsyncs) == 1
    with files.scratch(thrown):
        files.write_bytes_atomic(thrown / "sub" / "b.bin", b"b")
        files.write_json_atomic(thrown / "c.json", {"c": 1})
        assert len(fsyncs) == 1  # inside the scratch folder: atomic, not flushed to disk
        files.write_bytes_atomic(kept / "d.bin", b"d")  # the state dir while validate runs: still durable
        assert len(fsyncs) == 2
    files.write_bytes_atomic(thrown / "e.bin", b"e")  # after the block the folder is an ordinary one
    assert len(fsyncs) == 3
    assert (thrown / "sub" / "b.bin").read_bytes() == b"b" and not list(thrown.glob(".*.tmp"))


def test_scratch_is_left_when_its_block_raises(tmp_path: Path, fsyncs: list[int]) -> None:
    with pytest.raises(RuntimeError), files.scratch(tmp_path):
        raise RuntimeError("stage failed")
    files.write_bytes_atomic(tmp_path / "a.bin", b"a")
    assert len(fsyncs) == 1
