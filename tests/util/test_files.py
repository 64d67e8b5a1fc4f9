"""util/files.py: atomic writes are fsync'ed, except under a command's scratch folder and for records that only
save time."""

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


def test_validate_and_tensors_keep_their_records_without_a_disk_flush(project: Path, fsyncs: list[int]) -> None:
    """The state dir's records of checked models, described models and validated configs only save time: written
    atomically but not fsync'ed, and an emptied one (a power cut) reads as not recorded."""
    from accelbuild.config.validated import ValidatedConfigs
    from accelbuild.engine import info_cache
    from accelbuild.engine.checked_models import CheckedModels

    from conftest import TWO_MODEL_PIPELINE, run_cli, write

    write(project / "p.yaml", TWO_MODEL_PIPELINE)
    state = {"ACCELBUILD_STATE_DIR": str(project / "state")}
    assert run_cli("validate", "p.yaml", cwd=project, env=state).code == 0
    assert run_cli("tensors", "models/tinycls.onnx", cwd=project, env=state).code == 0
    assert fsyncs == []
    records = {p.parent.name: p for p in (project / "state").rglob("*") if p.is_file()}
    assert {"checked_models", "model_info"} <= set(records), sorted(records)
    for record in (project / "state").rglob("*"):
        if record.is_file():
            record.write_bytes(b"")
    checked = records["checked_models"]
    assert CheckedModels(checked.parent).warnings(checked.stem) is None
    assert info_cache.read(records["model_info"].stem, project / "models/tinycls.onnx") is None
    record = ValidatedConfigs(project / "validated_configs")  # run's and status's record of checked configs
    record.add(record.key({"name": "p"}, {"type": "object"}))
    record.save()
    assert fsyncs == [] and (project / "validated_configs").read_text().strip()
    (project / "validated_configs").write_bytes(b"")
    assert ValidatedConfigs(project / "validated_configs").known == []
