"""Which tests start a process: the test suite run once with a pytest plugin that watches every test.

What is counted
    A test "spawns" when anything during its setup, call or teardown starts a process: ``subprocess``
    (the CLI as ``python -m accelbuild.cli``, Vela, git, a toolchain's interpreter, Dask workers), a
    ``multiprocessing`` or ``concurrent.futures`` process (doit's ``-j`` workers, the mx3 closed loop's pool),
    ``os.fork``, ``os.system``, ``os.posix_spawn`` or an ``exec``. The plugin wraps ``_posixsubprocess.fork_exec``
    (what ``multiprocessing``'s spawn and forkserver start methods call) and watches
    the audit events of the others. A module- or session-scoped fixture that starts a process counts for the
    first test that uses it. The plugin also counts each test's in-process CLI calls through
    ``tests/conftest.py``'s ``run_cli``: before that helper called ``accelbuild.cli.main`` in-process it
    started ``python -m accelbuild.cli``, so "spawned or called run_cli" is how many tests started a
    process before (the summary's "with run_cli as a subprocess" line). Each test's time is the sum of its setup, call and teardown durations, which
    depends less on what else the machine runs than the wall time of the whole run does.

Usage::

    python bench/process_census.py [--json FILE] [--slowest N] -- [pytest arguments]

for example ``python bench/process_census.py -- -q -n 2 -p no:cacheprovider`` (the suite as .ci/run runs it).
With ``--keep FOLDER`` each test's record is also a line in FOLDER as soon as it ran, and ``--summarise FOLDER``
summarises what a run cut short left there.
It prints how many collected tests ran in this process only, how many started a process (by file), the sum of
the tests' durations and the slowest tests; ``--json`` writes every test's record. Exit status: pytest's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

OUT_ENV = "PROCESS_CENSUS_OUT"
_EVENTS = ("subprocess.Popen", "os.fork", "os.forkpty", "os.system", "os.posix_spawn", "os.spawn", "os.exec")

_spawned = False
_cli_calls = 0  # accelbuild.cli.main called in-process by tests/conftest.py's run_cli
_records: dict[str, dict[str, Any]] = {}


def _flag() -> None:
    global _spawned
    _spawned = True


def _audit(event: str, _args: tuple) -> None:
    if event in _EVENTS:
        _flag()


def _install() -> None:
    """Watch process starts in this interpreter (pytest's, or an xdist worker's)."""
    import _posixsubprocess

    original = _posixsubprocess.fork_exec

    def fork_exec(*args: Any, **kwargs: Any) -> Any:
        _flag()
        return original(*args, **kwargs)

    _posixsubprocess.fork_exec = fork_exec
    sys.addaudithook(_audit)

    from accelbuild import cli

    main = cli.main

    def counted_main(*args: Any, **kwargs: Any) -> Any:
        global _cli_calls
        if sys._getframe(1).f_code.co_name == "run_cli":
            _cli_calls += 1
        return main(*args, **kwargs)

    cli.main = counted_main


# --- the pytest plugin (loaded with -p process_census) -------------------------------------------------------

def pytest_configure(config: Any) -> None:
    if os.environ.get(OUT_ENV):
        _install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
    """Runs where the test runs (an xdist worker, not the controller): the test's record starts here."""
    global _spawned, _cli_calls
    _spawned, _cli_calls = False, 0
    _records[item.nodeid] = {"spawned": False, "cli_calls": 0, "seconds": 0.0, "outcome": "passed"}
    yield
    _records[item.nodeid].update(spawned=_spawned, cli_calls=_cli_calls)
    with open(_partial_path(), "a") as partial:  # one line per test: a run cut short still counts
        partial.write(json.dumps({item.nodeid: _records[item.nodeid]}) + "\n")


def pytest_runtest_logreport(report: Any) -> None:
    record = _records.get(report.nodeid)
    if record is None:  # the xdist controller hears of reports it did not run
        return
    record["seconds"] += report.duration
    if report.failed or (report.skipped and record["outcome"] == "passed"):
        record["outcome"] = report.outcome


def _partial_path() -> Path:
    return Path(os.environ[OUT_ENV], os.environ.get("PYTEST_XDIST_WORKER", "main") + ".jsonl")


# --- the static count (--static: collection only) ----------------------------------------------------------

STATIC_ENV = "PROCESS_CENSUS_STATIC"
_DIRECT = frozenset({"subprocess", "Popen", "multiprocessing", "ProcessPoolExecutor", "LocalCluster", "fork",
                     "run_cli_process"})
_TESTS = str(Path(__file__).resolve().parents[1] / "tests")


def spawns(func: Any, before: bool, seen: set | None = None) -> bool:
    """Whether a test-suite function's code names a way to start a process, itself or through the suite's
    helpers it calls (library code is not followed: what the library starts shows only in a run).
    ``before``: ``run_cli`` counts too (it started a process before it ran ``cli.main`` in-process)."""
    import ast
    import inspect
    import textwrap

    seen = set() if seen is None else seen
    code = getattr(func, "__code__", None)
    if code is None or code in seen or not code.co_filename.startswith(_TESTS):
        return False
    seen.add(code)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    if names & _DIRECT or (before and "run_cli" in names):
        return True
    return any(spawns(func.__globals__[n], before, seen) for n in sorted(names)
               if callable(func.__globals__.get(n)))


def _static(item: Any, before: bool) -> bool:
    funcs = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        funcs.extend(d.func for d in defs)
    return any(spawns(f, before) for f in funcs if f is not None)


def pytest_collection_modifyitems(items: list) -> None:
    folder = os.environ.get(STATIC_ENV)
    if folder:
        counts = {item.nodeid: {"after": _static(item, False), "before": _static(item, True)} for item in items}
        Path(folder, "static.json").write_text(json.dumps(counts, sort_keys=True))


def static_summary(counts: dict[str, dict[str, bool]]) -> str:
    total = len(counts)
    after = sum(c["after"] for c in counts.values())
    before = sum(c["before"] for c in counts.values())
    by_file = Counter(k.split("::")[0] for k, c in counts.items() if c["after"])
    lines = [f"{total} tests collected (static count: what the suite's code names, not what the library starts)",
             f"  start a process: {after} ({after / max(total, 1):.1%}); in-process: {total - after} "
             f"({(total - after) / max(total, 1):.1%})",
             f"  with run_cli as a subprocess: {before} ({before / max(total, 1):.1%}); in-process: "
             f"{total - before} ({(total - before) / max(total, 1):.1%})", "", "tests that start a process, by file:"]
    lines += [f"  {n:4d}  {name}" for name, n in sorted(by_file.items(), key=lambda kv: (-kv[1], kv[0]))]
    return "\n".join(lines) + "\n"


# --- the command --------------------------------------------------------------------------------------------

def summary(records: dict[str, dict[str, Any]], slowest: int) -> str:
    ran = {k: r for k, r in records.items() if r["outcome"] != "skipped"}
    spawning = [k for k, r in ran.items() if r["spawned"]]
    before = [k for k, r in ran.items() if r["spawned"] or r.get("cli_calls")]
    by_file = Counter(k.split("::")[0] for k in spawning)
    lines = [f"{len(records)} tests recorded, {len(records) - len(ran)} skipped; of the {len(ran)} that ran:",
             f"  in this process only: {len(ran) - len(spawning)} ({(len(ran) - len(spawning)) / max(len(ran), 1):.1%})",
             f"  started a process:    {len(spawning)} ({len(spawning) / max(len(ran), 1):.1%})",
             f"  with run_cli as a subprocess, would start one: {len(before)} ({len(before) / max(len(ran), 1):.1%})",
             f"  sum of test durations: {sum(r['seconds'] for r in records.values()):.1f} s "
             f"(in-process tests {sum(r['seconds'] for k, r in ran.items() if not r['spawned']):.1f} s)",
             "", "tests that start a process, by file:"]
    lines += [f"  {n:4d}  {name}" for name, n in sorted(by_file.items(), key=lambda kv: (-kv[1], kv[0]))]
    lines += ["", f"the {slowest} slowest tests (s, P = starts a process):"]
    for key, record in sorted(records.items(), key=lambda kv: -kv[1]["seconds"])[:slowest]:
        lines.append(f"  {record['seconds']:7.1f} {'P' if record['spawned'] else ' '} {key}")
    return "\n".join(lines) + "\n"


def read_lines(folder: Path) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    for part in sorted(folder.glob("*.jsonl")):
        for line in part.read_text().splitlines():
            records.update(json.loads(line))
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write every test's record (spawned, seconds, outcome) here")
    parser.add_argument("--slowest", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="write the per-test lines to this folder (kept after the run)")
    parser.add_argument("--static", action="store_true",
                        help="collect only, and count the tests whose code (or fixtures) starts a process")
    parser.add_argument("--summarise", type=Path, metavar="FOLDER",
                        help="summarise the lines a run left in FOLDER (--keep) instead of running pytest")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    if args.static:
        with tempfile.TemporaryDirectory() as folder:
            here = str(Path(__file__).resolve().parent)
            env = {**os.environ, STATIC_ENV: folder,
                   "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), here) if p)}
            code = subprocess.call([sys.executable, "-m", "pytest", "-p", "process_census", "--collect-only", "-q",
                                    *args.pytest_args], env=env, stdout=subprocess.DEVNULL)
            counts = json.loads(Path(folder, "static.json").read_text())
        sys.stdout.write(static_summary(counts))
        if args.json:
            args.json.write_text(json.dumps(counts, indent=1, sort_keys=True) + "\n")
        return code
    if args.summarise:
        records, wall = read_lines(args.summarise), None
    else:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(args.keep or scratch)
            folder.mkdir(parents=True, exist_ok=True)
            here = str(Path(__file__).resolve().parent)
            env = {**os.environ, OUT_ENV: str(folder),
                   "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), here) if p)}
            started = time.monotonic()
            code = subprocess.call([sys.executable, "-m", "pytest", "-p", "process_census", *args.pytest_args],
                                   env=env)
            wall = time.monotonic() - started
            records = read_lines(folder)
    head = "" if wall is None else f"\nwall time of the pytest run: {wall:.1f} s\n"
    sys.stdout.write(head + summary(records, args.slowest))
    if args.json:
        args.json.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    return 0 if args.summarise else code


if __name__ == "__main__":
    sys.exit(main())
