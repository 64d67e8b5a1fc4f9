"""Concurrent builds: two runs on one state dir, and two state dirs sharing one cache.

Two ``accelbuild run`` on the same state dir serialise on its lock: the second says it is waiting, then
finds everything up to date. Two checkouts with state dirs of their own may share one artifact cache and
build at the same time. Either way every run succeeds, the outputs equal a clean build's byte for byte,
the state DB passes SQLite's integrity check and every cache entry verifies.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelbuild.engine.cache import ArtifactCache
from accelbuild.engine.doit_backend import DB_NAME

from conftest import TWO_MODEL_PIPELINE, CliResult, clean_env, run_cli, tree_bytes, two_model_checkout

PIPELINE = TWO_MODEL_PIPELINE

LOCK_MESSAGE = "another accelbuild run is using"


def run_together(*runs: tuple[Path, list[str]], stagger: float = 0.0) -> list[CliResult]:
    """Start ``accelbuild run --json -j 2`` once per (folder, extra args), ``stagger`` s apart; wait for all."""
    env = clean_env()
    procs = []
    for i, (folder, extra) in enumerate(runs):
        if i and stagger:
            time.sleep(stagger)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "accelbuild.cli", "run", "p.yaml", "--json", "-j", "2", *extra],
            cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        results.append(CliResult(proc.returncode, stdout, stderr))
    return results


def db_integrity(state_dir: Path) -> str:
    with contextlib.closing(sqlite3.connect(state_dir / DB_NAME)) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def assert_cache_whole(cache_dir: Path) -> None:
    """Every entry of the cache names objects with exactly the bytes it records."""
    cache = ArtifactCache(cache_dir)
    keys = [entry.stem for entry in (cache_dir / "entries").rglob("*.json")]
    assert keys
    for key in keys:
        assert cache.lookup(key) is not None, f"cache entry {key[:12]} is damaged"


def statuses(result: CliResult) -> set[str]:
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    return set(result.statuses().values())


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = two_model_checkout(tmp_path_factory.mktemp("reference"))
    result = run_cli("run", "p.yaml", "--state-dir", "s", cwd=folder)
    assert result.code == 0, result.stderr
    return tree_bytes(folder / "build/p")


def _two_runs_on_one_state_dir(folder: Path, expected: dict[str, bytes], stagger: float) -> list[CliResult]:
    two_model_checkout(folder)
    args = ["--state-dir", "s", "--cache-dir", "c"]
    results = run_together((folder, args), (folder, args), stagger=stagger)
    seen = sorted((statuses(r) for r in results), key=lambda s: "up-to-date" in s)
    # One run built everything; the other waited on the lock (and says so) and then had nothing to do.
    assert seen[0] <= {"ran", "cached"} and seen[1] == {"up-to-date"}, seen
    assert tree_bytes(folder / "build/p") == expected
    assert db_integrity(folder / "s") == "ok"
    assert_cache_whole(folder / "c")
    again = run_cli("run", "p.yaml", "--json", *args, cwd=folder)
    assert statuses(again) == {"up-to-date"}
    return results


def test_two_runs_on_one_state_dir_at_once(reference, tmp_path: Path) -> None:
    results = _two_runs_on_one_state_dir(tmp_path, reference, stagger=0.0)
    assert any(LOCK_MESSAGE in r.stderr for r in results), [r.stderr for r in results]


def test_two_state_dirs_sharing_one_cache_at_once(reference, tmp_path: Path) -> None:
    shared = tmp_path / "shared-cache"
    a, b = two_model_checkout(tmp_path / "a"), two_model_checkout(tmp_path / "b")
    results = run_together((a, ["--state-dir", "s", "--cache-dir", str(shared)]),
                           (b, ["--state-dir", "s", "--cache-dir", str(shared)]))
    for result in results:
        assert statuses(result) <= {"ran", "cached"}
    for folder in (a, b):
        assert tree_bytes(folder / "build/p") == reference
        assert db_integrity(folder / "s") == "ok"
    assert_cache_whole(shared)
    # A third checkout restores everything from the cache the two wrote at the same time.
    c = two_model_checkout(tmp_path / "c")
    third = run_cli("run", "p.yaml", "--json", "--state-dir", "s", "--cache-dir", str(shared), cwd=c)
    assert statuses(third) == {"cached"}
    assert tree_bytes(c / "build/p") == reference


def test_two_state_dirs_in_one_checkout_sharing_one_cache_at_once(reference, tmp_path: Path) -> None:
    """Both publish into the same build dir: each file is replaced whole, so either's bytes are right."""
    folder = two_model_checkout(tmp_path)
    results = run_together((folder, ["--state-dir", "s1", "--cache-dir", "c"]),
                           (folder, ["--state-dir", "s2", "--cache-dir", "c"]))
    for result in results:
        assert statuses(result) <= {"ran", "cached"}
    assert tree_bytes(folder / "build/p") == reference
    for state_dir in ("s1", "s2"):
        assert db_integrity(folder / state_dir) == "ok"
        again = run_cli("run", "p.yaml", "--json", "--state-dir", state_dir, "--cache-dir", "c", cwd=folder)
        assert statuses(again) == {"up-to-date"}
    assert_cache_whole(folder / "c")


def test_two_runs_on_one_state_dir_repeatedly(reference, tmp_path: Path) -> None:
    """The same race with the second run starting a little later each time (mid start-up, mid build)."""
    for i, stagger in enumerate((0.0, 0.15, 0.4)):
        _two_runs_on_one_state_dir(tmp_path / f"round{i}", reference, stagger)
