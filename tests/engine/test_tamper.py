"""Tampering: a cache object or a build artifact edited by hand is detected and rebuilt, never kept.

Cache objects are re-hashed on every restore, so an edited one is a miss and its task runs. Artifacts in
the build dir are checked on every run against the size, mtime and SHA-256 the task's last run recorded
(doit alone only checks that targets exist): an edited, truncated or deleted output makes its task run
again (restored from the cache, or rebuilt), while a mere touch does not.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from accelbuild.util.files import file_sha256

from conftest import TWO_MODEL_PIPELINE, run_cli, tree_bytes, two_model_checkout

PIPELINE = TWO_MODEL_PIPELINE

ARGS = ("--state-dir", "s", "--cache-dir", "c")


def build(folder: Path) -> dict[str, str]:
    result = run_cli("run", "p.yaml", "--json", *ARGS, cwd=folder)
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.statuses()


def flip_last_byte(path: Path) -> None:
    """A same-size edit: only the bytes tell it apart."""
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def clean_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One clean build; its cache lets each test build its own checkout quickly."""
    folder = two_model_checkout(tmp_path_factory.mktemp("clean"))
    assert set(build(folder).values()) == {"ran"}
    return folder


@pytest.fixture
def built(clean_build: Path, tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A built checkout of its own (state dir, cache and build dir), and its build dir's bytes."""
    folder = two_model_checkout(tmp_path / "work")
    shutil.copytree(clean_build / "c", folder / "c")
    assert set(build(folder).values()) == {"cached"}
    expected = tree_bytes(clean_build / "build/p")
    assert tree_bytes(folder / "build/p") == expected
    return folder, expected


def test_edited_cache_object_is_rebuilt_not_restored(built, tmp_path: Path) -> None:
    folder, expected = built
    sha = file_sha256(folder / "build/p/det/imported.onnx")
    obj = folder / "c/objects" / sha[:2] / sha
    flip_last_byte(obj)

    fresh = two_model_checkout(tmp_path / "fresh")
    shutil.copytree(folder / "c", fresh / "c")
    statuses = build(fresh)
    assert statuses.pop("p:det:import") == "ran"
    assert set(statuses.values()) == {"cached"}
    assert tree_bytes(fresh / "build/p") == expected
    assert file_sha256(fresh / "c/objects" / sha[:2] / sha) == sha  # the rebuild repaired the cache


# (file under build/p, how it is tampered with, the task that must run again)
EDITS = [
    ("det/imported.onnx", "append", "p:det:import"),  # feeds crop: must not reach it
    ("p.dfp", "flip", "p:assemble"),                  # same size, different bytes
    ("report.html", "append", "p:benchmark"),         # a leaf: nothing downstream would notice
    ("det/post.onnx", "delete", "p:det:crop"),        # a host section
    ("cls/pre.onnx", "delete", "p:cls:crop"),         # the no-section form: an output like any other
    ("cls/quantize.json", "truncate", "p:cls:quantize"),
]


@pytest.mark.parametrize("with_cache", [True, False], ids=["cache", "no-cache"])
def test_edited_artifact_is_detected_and_replaced(built, with_cache: bool) -> None:
    folder, expected = built
    for name, how, task in EDITS:
        if not with_cache:
            shutil.rmtree(folder / "c")
        path = folder / "build/p" / name
        if how == "append":
            with open(path, "ab") as handle:
                handle.write(b"\0")
        elif how == "flip":
            flip_last_byte(path)
        elif how == "truncate":
            path.write_bytes(path.read_bytes()[:10])
        else:
            path.unlink()

        if with_cache:  # `status` says why, once per kind of edit
            status = run_cli("status", "p.yaml", *ARGS, cwd=folder)
            reason = f"output {'missing' if how == 'delete' else 'edited'}: {path.relative_to(folder)}"
            assert status.code == 0 and reason in status.stdout, status.stdout

        statuses = build(folder)
        assert statuses.pop(task) == ("cached" if with_cache else "ran"), (name, how)
        assert set(statuses.values()) == {"up-to-date"}, (name, how, statuses)
        assert tree_bytes(folder / "build/p") == expected, (name, how)


def test_touched_artifact_is_not_an_edit(built) -> None:
    folder, expected = built
    for name in ("det/imported.onnx", "p.dfp", "report.html"):
        path = folder / "build/p" / name
        later = path.stat().st_mtime + 100
        os.utime(path, (later, later))
    assert set(build(folder).values()) == {"up-to-date"}
    assert set(build(folder).values()) == {"up-to-date"}
    assert tree_bytes(folder / "build/p") == expected


def test_output_record_is_checked_cheaply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unchanged size and mtime: no hashing; a moved mtime: one hash, equal bytes are no edit."""
    from accelbuild.engine import worker

    monkeypatch.chdir(tmp_path)  # records hold paths relative to the project root, the current folder
    out = Path("a.onnx")
    out.write_bytes(b"model")
    record = worker.output_record([tmp_path / "a.onnx", tmp_path / "absent.onnx"])
    assert list(record) == [str(out)]
    hashed: list[Path] = []
    monkeypatch.setattr(worker, "file_sha256", lambda p: hashed.append(p) or file_sha256(p))
    assert worker.edited_outputs([str(out), "absent.onnx"], record) == []
    assert hashed == []
    os.utime(out, ns=(1, 1))
    assert worker.edited_outputs([str(out)], record) == [] and len(hashed) == 1
    out.write_bytes(b"mode!")
    assert worker.edited_outputs([str(out)], record) == [str(out)]
    out.unlink()
    assert worker.edited_outputs([str(out)], record) == [str(out)]
    assert worker.edited_outputs([str(out)], None) is None
