"""Killed builds: SIGKILL a parallel build at many points, resume, and get the same bytes as a clean build.

A build of a small two-model pipeline is killed (its whole process group, workers included) at delays
spread over the duration of an uninterrupted build, in one folder with one state dir and one cache that
accumulate whatever the killed runs left behind. A final run must then produce a build dir byte-identical
to the clean build's, with no staging folders or temp files left in it, and the cache those killed runs
filled must hold no partial entry: a fresh checkout restoring from it gets the same bytes again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelbuild.engine.cache import ArtifactCache
from accelbuild.engine.doit_backend import DB_NAME
from accelbuild.engine.worker import STAGING_PREFIX

from conftest import TWO_MODEL_PIPELINE, clean_env, run_cli_process, tree_bytes, two_model_checkout

PIPELINE = TWO_MODEL_PIPELINE  # deterministic: no host timings

RUN = ("run", "p.yaml", "-j", "2", "--state-dir", "s", "--cache-dir", "c")
KILLS = 12


def cli_env() -> dict[str, str]:
    return clean_env()


def start(folder: Path) -> subprocess.Popen:
    """``accelbuild run -j 2`` as the leader of a process group of its own (so its workers die with it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "accelbuild.cli", *RUN], cwd=folder, env=cli_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def run_killed_after(folder: Path, delay: float) -> int | None:
    """Start a build and SIGKILL its process group after ``delay`` s; its exit code if it finished first."""
    proc = start(folder)
    try:
        code = proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        code = None
    _wait_group_gone(proc.pid)
    return code


def _wait_group_gone(pgid: int) -> None:
    """Wait until every process of the group has died (zombies aside: reaping orphans is init's job, and
    some container inits take seconds to do it)."""
    deadline = time.monotonic() + 10
    while _live_members(pgid):
        assert time.monotonic() < deadline, f"process group {pgid} still alive after SIGKILL"
        time.sleep(0.01)


def _live_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":  # fields after the name: state, ppid, pgrp
            members.append(int(stat.parent.name))
    return members


def leftovers(build: Path) -> list[str]:
    """Staging folders and temp files that a killed build could leave in the build dir."""
    return sorted(
        str(p.relative_to(build)) for p in build.rglob("*")
        if p.name.startswith(STAGING_PREFIX) or p.name.endswith(".tmp")
    )


def db_integrity(state_dir: Path) -> str:
    with contextlib.closing(sqlite3.connect(state_dir / DB_NAME)) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], float]:
    """The build dir of one uninterrupted clean build, and how long that build took."""
    folder = two_model_checkout(tmp_path_factory.mktemp("reference"))
    started = time.monotonic()
    result = run_cli_process(*RUN, cwd=folder)
    duration = time.monotonic() - started
    assert result.code == 0, result.stderr
    return tree_bytes(folder / "build/p"), duration


def test_killed_builds_resume_to_the_clean_build_bytes(reference, tmp_path: Path) -> None:
    expected, duration = reference
    work = two_model_checkout(tmp_path / "work")
    delays = [duration * (0.05 + 0.9 * i / (KILLS - 1)) for i in range(KILLS)]
    outcomes = {delay: run_killed_after(work, delay) for delay in delays}
    killed = [delay for delay, code in outcomes.items() if code is None]
    print(f"\nclean build {duration:.2f} s; {len(killed)} of {KILLS} runs killed mid-build "
          f"(at {', '.join(f'{d:.2f}' for d in killed)} s)")
    assert len(killed) >= KILLS // 3, "too few kills landed during a build to test anything"
    assert all(code in (None, 0) for code in outcomes.values()), outcomes  # runs that finished succeeded
    if (work / "s" / DB_NAME).exists():  # written only at the end of a run: no kill may damage it
        assert db_integrity(work / "s") == "ok"

    started = time.monotonic()
    final = run_cli_process(*RUN, "--json", cwd=work)
    print(f"resumed build {time.monotonic() - started:.2f} s: {sorted(set(final.statuses().values()))}")
    assert final.code == 0, final.stderr
    assert set(final.statuses().values()) <= {"ran", "cached", "up-to-date"}
    build = work / "build/p"
    assert leftovers(build) == []
    assert tree_bytes(build) == expected
    assert db_integrity(work / "s") == "ok"
    again = run_cli_process(*RUN, "--json", cwd=work)
    assert again.code == 0 and set(again.statuses().values()) == {"up-to-date"}, again.stderr

    # The cache the killed runs filled: every entry in it is whole (lookup re-hashes every object) ...
    cache = ArtifactCache(work / "c")
    keys = [entry.stem for entry in (work / "c/entries").rglob("*.json")]
    assert keys and all(cache.lookup(key) is not None for key in keys)
    # ... and a fresh checkout restoring only that cache gets the clean build's bytes.
    fresh = two_model_checkout(tmp_path / "fresh")
    shutil.copytree(work / "c", fresh / "c")
    restored = run_cli_process(*RUN, "--json", cwd=fresh)
    assert restored.code == 0 and restored.json()["ok"], restored.stderr
    assert set(restored.statuses().values()) <= {"cached", "ran"}
    assert tree_bytes(fresh / "build/p") == expected
    assert leftovers(fresh / "build/p") == []


def test_truncated_cache_object_is_never_served(tmp_path: Path) -> None:
    """An object cut short (a kill mid-copy, had the copy not been atomic) is a miss, not a restore."""
    cache = ArtifactCache(tmp_path / "cache")
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.onnx").write_bytes(b"A" * 4096)
    (work / "a.json").write_bytes(b'{"a": 1}\n')
    cache.store("k" * 64, {"a.onnx": work / "a.onnx", "a.json": work / "a.json"})
    (obj,) = [p for p in (tmp_path / "cache/objects").rglob("*") if p.is_file() and p.stat().st_size == 4096]
    obj.write_bytes(b"A" * 1000)

    out = tmp_path / "out"
    out.mkdir()
    (out / "a.onnx").write_bytes(b"previous")
    targets = {"a.onnx": out / "a.onnx", "a.json": out / "a.json"}
    assert not cache.restore("k" * 64, targets)
    assert (out / "a.onnx").read_bytes() == b"previous" and not (out / "a.json").exists()
    assert cache.lookup("k" * 64) is None  # the damaged entry is gone for good
    cache.store("k" * 64, {"a.onnx": work / "a.onnx", "a.json": work / "a.json"})  # a rebuild repairs it
    assert cache.restore("k" * 64, targets) and (out / "a.onnx").read_bytes() == b"A" * 4096


def test_half_written_object_temp_file_is_never_served(tmp_path: Path) -> None:
    """A kill during ``store`` leaves at most a temp file beside the objects and no entry: a miss."""
    cache = ArtifactCache(tmp_path / "cache")
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.onnx").write_bytes(b"A" * 4096)
    cache.store("k" * 64, {"a.onnx": work / "a.onnx"})
    (obj,) = [p for p in (tmp_path / "cache/objects").rglob("*") if p.is_file()]
    (entry,) = (tmp_path / "cache/entries").rglob("*.json")
    entry.unlink()  # the kill came before the entry was written ...
    obj.rename(obj.with_name(f".{obj.name}.x1y2z3.tmp"))  # ... during the object's copy
    obj.with_name(f".{obj.name}.x1y2z3.tmp").write_bytes(b"A" * 10)
    assert cache.lookup("k" * 64) is None
    assert not cache.restore("k" * 64, {"a.onnx": tmp_path / "out/a.onnx"})
    assert not (tmp_path / "out/a.onnx").exists()
