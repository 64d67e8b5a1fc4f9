"""Run the example configs through the CLI, the way a user would.

``examples/valid/*.yaml`` must pass ``accelbuild validate`` and build with ``accelbuild run --until import``.

``examples/invalid/*.yaml`` hold one mistake each. Their first line says what the user must see::

    # expect: LINE:COL: MESSAGE      stderr's first line is  <yaml path as given>:LINE:COL: MESSAGE
    # expect: MESSAGE                stderr's first line is  <yaml path as given>: MESSAGE

``{root}`` in MESSAGE stands for the absolute path of the folder the examples were copied to (messages
about missing files say where they looked). An optional second line ``# command: run`` marks mistakes
that only show once the model is read: those are checked with ``run --until import`` instead of
``validate``, and the task progress lines ``run`` prints on stderr before the error are skipped.
Every case must exit with code 2 and never print a Python traceback, within ``TIMEOUT`` seconds. The cases
whose point is size or depth (``HOSTILE``: aliases that expand, huge numbers, a 5 MB file...) run in a
subprocess limited to ``MEMORY_LIMIT`` bytes of address space; the others run in the test's process. A case that must be a folder (``NN_name.yaml/``) keeps its header
lines in ``header.txt`` inside it.

Each test copies ``examples/`` into its tmp folder and runs there, so build outputs, doit state and
anything a malicious config might try to create stay in the tmp folder.
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import CliResult, clean_env, run_cli

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
VALID = sorted(p.name for p in (EXAMPLES / "valid").glob("*.yaml"))
INVALID = sorted(p.name for p in (EXAMPLES / "invalid").glob("*.yaml"))
TIMEOUT = 10  # seconds per CLI call
# Address space per invalid case. `validate` peaks near 35 MB and `run --until import` near 180 MB of
# virtual memory on the example models; a case that needs more than this is unbounded, not unlucky.
MEMORY_LIMIT = 1536 * 1024 * 1024
# The cases about size and depth: each is checked against MEMORY_LIMIT in a process of its own.
HOSTILE = frozenset({
    "12_billion_laughs.yaml", "13_deep_nesting.yaml", "34_frames_huge.yaml", "81_frames_1e400.yaml",
    "82_target_fps_overflows_float.yaml", "83_num_chips_10_pow_30.yaml", "84_input_shapes_dim_10_pow_30.yaml",
    "85_seed_5000_digits.yaml", "86_frames_hex_4000_digits.yaml", "87_huge_integer_key.yaml",
    "88_frames_sexagesimal_huge.yaml", "90_flat_list_of_500000_values.yaml", "91_nine_thousand_schema_errors.yaml",
    "92_file_of_5_mb.yaml", "94_recursive_alias.yaml",
})

# The file written by the `!!python/object/apply:os.system` case if the tag were ever executed.
PYTHON_TAG_CASE = "11_python_tag_not_executed.yaml"
PYTHON_TAG_MARKER = "accelbuild_pwned.marker"

# Cases whose `# expect:` line is what the user should see, but the loader does not produce yet.
# Each flips to XPASS (a failure, strict=True) once fixed: then drop it from this table.
KNOWN_PROBLEMS: dict[str, str] = {}

_PROGRESS = re.compile(r"\b(ran|up-to-date|cached|failed|skipped)\b.*\s\d+(\.\d+)?s$")


@dataclass(frozen=True)
class Expectation:
    message: str  # "LINE:COL: MESSAGE" or "MESSAGE"
    command: str  # "validate" or "run"


def read_header(path: Path) -> Expectation:
    """The `# expect:` line (required) and `# command:` line (optional) of an invalid example."""
    head = (path / "header.txt" if path.is_dir() else path).read_bytes().split(b"\n", 2)
    first = head[0].decode("utf-8")
    assert first.startswith("# expect: "), f"{path.name}: the first line must be '# expect: ...'"
    second = head[1].decode("utf-8", "replace") if len(head) > 1 else ""
    command = "run" if second.strip() == "# command: run" else "validate"
    return Expectation(first[len("# expect: "):], command)


def run_limited(*args: str, cwd: Path) -> CliResult:
    """``accelbuild ARGS`` in a subprocess within ``MEMORY_LIMIT`` bytes and ``TIMEOUT`` seconds."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    proc = subprocess.run(
        [sys.executable, "-m", "accelbuild.cli", *args],
        cwd=cwd, env=clean_env(), capture_output=True, text=True, errors="replace", timeout=TIMEOUT,
        preexec_fn=limit,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def run_timed(*args: str, cwd: Path) -> CliResult:
    """``accelbuild ARGS`` in this process, failing the test if it took longer than ``TIMEOUT`` seconds."""
    started = time.monotonic()
    result = run_cli(*args, cwd=cwd)
    assert time.monotonic() - started < TIMEOUT, f"accelbuild {' '.join(args)}: over {TIMEOUT} s"
    return result


def cli_args(command: str, yaml_path: str, state_dir: Path) -> list[str]:
    if command == "run":
        return ["run", "--until", "import", "--state-dir", str(state_dir), yaml_path]
    return ["validate", yaml_path]


def first_error_line(stderr: str, yaml_path: str, command: str) -> str:
    """stderr's first line; for `run`, the first line that is not a task progress line."""
    for line in stderr.splitlines():
        if command == "run" and not line.startswith(yaml_path) and _PROGRESS.search(line):
            continue
        return line
    return ""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A private copy of examples/ (without any build outputs) to run the CLI in."""
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("build", "__pycache__"))
    return tmp_path


def _invalid_params(names: list[str]) -> list:
    params = []
    for name in names:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_PROBLEMS[name])] if name in KNOWN_PROBLEMS else []
        params.append(pytest.param(name, id=name.removesuffix(".yaml"), marks=marks))
    return params


def test_enough_invalid_cases() -> None:
    assert len(INVALID) >= 60
    assert set(KNOWN_PROBLEMS) <= set(INVALID), "KNOWN_PROBLEMS names a case that does not exist"
    assert HOSTILE <= set(INVALID), "HOSTILE names a case that does not exist"


def test_invalid_names_are_numbered() -> None:
    bad = [name for name in INVALID if not re.fullmatch(r"\d\d_[a-z0-9_]+\.yaml", name)]
    assert not bad


@pytest.mark.parametrize("name", _invalid_params([n for n in INVALID if n not in HOSTILE]))
def test_invalid_example(name: str, workdir: Path) -> None:
    check_invalid(name, workdir, run_timed)


@pytest.mark.parametrize("name", _invalid_params(sorted(HOSTILE)))
def test_hostile_invalid_example_in_a_limited_process(name: str, workdir: Path) -> None:
    check_invalid(name, workdir, run_limited)


def check_invalid(name: str, workdir: Path, run: Callable[..., CliResult]) -> None:
    expect = read_header(EXAMPLES / "invalid" / name)
    yaml_path = f"examples/invalid/{name}"
    result = run(*cli_args(expect.command, yaml_path, workdir / "state"), cwd=workdir)

    assert "Traceback" not in result.stderr, result.stderr
    assert result.code == 2, result.stderr
    separator = ":" if re.match(r"\d+:\d+: ", expect.message) else ": "
    wanted = f"{yaml_path}{separator}{expect.message}".replace("{root}", str(workdir.resolve()))
    assert first_error_line(result.stderr, yaml_path, expect.command) == wanted, result.stderr


def test_python_tag_is_never_executed(workdir: Path) -> None:
    case = EXAMPLES / "invalid" / PYTHON_TAG_CASE
    assert f"touch {PYTHON_TAG_MARKER}" in case.read_text(encoding="utf-8")
    result = run_timed("validate", f"examples/invalid/{PYTHON_TAG_CASE}", cwd=workdir)
    assert result.code == 2, result.stderr
    assert not list(workdir.rglob(PYTHON_TAG_MARKER))
    assert not (REPO / PYTHON_TAG_MARKER).exists()


@pytest.mark.parametrize("name", VALID)
def test_valid_example_validates(name: str, workdir: Path) -> None:
    yaml_path = f"examples/valid/{name}"
    assert (EXAMPLES / "valid" / name).read_text(encoding="utf-8").startswith("# "), \
        "each example starts with a comment saying what it shows"
    result = run_timed("validate", yaml_path, cwd=workdir)
    assert result.code == 0, result.stderr
    assert result.stdout.startswith(f"{yaml_path}: ok"), result.stdout


@pytest.mark.parametrize("name", VALID)
def test_valid_example_imports(name: str, workdir: Path) -> None:
    yaml_path = f"examples/valid/{name}"
    result = run_cli("run", "--until", "import", "--json", "--state-dir", str(workdir / "state"), yaml_path,
                     cwd=workdir)
    assert result.code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["ok"] is True
    assert summary["tasks"] and {t["stage"] for t in summary["tasks"]} == {"import"}
    assert all(t["status"] in ("ran", "cached") for t in summary["tasks"]), summary
