"""Shared test helpers: run the CLI (in this process, or in a subprocess for process behaviour), and lay out
small projects in tmp folders."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest

from accelbuild.engine import read_guard
from accelbuild.targets.mx3.dfp import Dfp, Header, ModelEntry, Port
from accelbuild.targets.mx3.dfp.format import canonical_json
from accelbuild.targets.mx3.dfp.weights import WeightsSection
from accelbuild.testing import npu_graphs

# Every stage in the suite runs under the read guard: opening an undeclared file under the pipeline's
# folders fails the stage (accelbuild/engine/read_guard.py); CLI subprocesses and Dask workers inherit it.
os.environ[read_guard.ENV] = "1"

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_MODELS = REPO / "examples" / "models"

# Two models through every stage, quickly; host: false keeps host timings out of benchmark.json and
# report.html, so the whole build dir is deterministic.
TWO_MODEL_PIPELINE = """\
accelbuild: 1
name: p
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {images: [64, 64, 3]}
    crop: {outputs: [head.p3, head.p4, head.p5]}
  - name: cls
    path: models/tinycls.onnx
benchmark: {frames: 40, host: false, accuracy: {samples: 1}}
"""


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)

    def statuses(self) -> dict[str, str]:
        return {t["name"]: t["status"] for t in self.json()["tasks"]}


def clean_env() -> dict[str, str]:
    """This process's environment without the user's ``ACCELBUILD_*`` settings (the read guard stays on)."""
    return clean_env_of(dict(os.environ))


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> CliResult:
    """``accelbuild ARGS`` in this process: ``accelbuild.cli.main(args)`` with its output captured, in ``cwd``,
    with the user's ``ACCELBUILD_*`` settings cleared and ``env`` applied for the call (all restored after).

    The default for tests of what a command does. Use ``run_cli_process`` for what only a process shows:
    exit codes through ``python -m accelbuild.cli`` itself, Ctrl-C and signals, killed builds, locks and
    concurrency between processes, ``-j`` worker processes, Dask workers, a fresh interpreter's environment
    (import-time settings, installed plug-ins). Python warnings raised during the call go to pytest's warning
    summary, not to the captured stderr."""
    from accelbuild import cli

    out, err = io.StringIO(), io.StringIO()
    saved = _ProcessState()
    try:
        os.environ.clear()
        os.environ.update(clean_env_of(saved.environ))
        os.environ.update(env or {})
        os.chdir(cwd)
        sys.argv = [cli.__file__, *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            try:
                code = cli.main(list(args))
            except SystemExit as exc:  # argparse: --help, --version, usage errors
                code = _exit_code(exc.code, err)
            except KeyboardInterrupt:
                raise
            except BaseException:  # as the interpreter would: the traceback on stderr, exit 1
                err.write(traceback.format_exc())
                code = 1
    finally:
        saved.restore()
    return CliResult(code, out.getvalue(), err.getvalue())


def run_cli_process(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> CliResult:
    """``python -m accelbuild.cli ARGS`` in a subprocess (the user's ``ACCELBUILD_*`` cleared, ``env`` added):
    for the contract tests of process behaviour (see ``run_cli``)."""
    full_env = clean_env()
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "accelbuild.cli", *args],
        cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def clean_env_of(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` without ``ACCELBUILD_*`` settings but the read guard's."""
    return {k: v for k, v in environ.items() if not k.startswith("ACCELBUILD_") or k == read_guard.ENV}


def _exit_code(code: object, err: io.StringIO) -> int:
    """The process exit status ``sys.exit(code)`` gives (a message is printed to stderr, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    err.write(f"{code}\n")
    return 1


class _ProcessState:
    """What a CLI call in this process changes and the next test must not see: the environment, the
    working directory, ``sys.argv``, the logging configuration the CLI installs (warning filters are restored
    by ``warnings.catch_warnings``)."""

    def __init__(self) -> None:
        self.environ = dict(os.environ)
        self.cwd = os.getcwd()
        self.argv = list(sys.argv)
        root = logging.getLogger()
        self.root_handlers, self.root_level = list(root.handlers), root.level
        self.levels = {name: logger.level for name, logger in logging.root.manager.loggerDict.items()
                       if isinstance(logger, logging.Logger)}

    def restore(self) -> None:
        os.environ.clear()
        os.environ.update(self.environ)
        os.chdir(self.cwd)
        sys.argv = self.argv
        root = logging.getLogger()
        root.handlers[:] = self.root_handlers
        root.setLevel(self.root_level)
        for name, logger in list(logging.root.manager.loggerDict.items()):
            if isinstance(logger, logging.Logger):
                logger.setLevel(self.levels.get(name, logging.NOTSET))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with the shipped example models under models/ (copies, so tests may edit them)."""
    shutil.copytree(EXAMPLE_MODELS, tmp_path / "models")
    return tmp_path


def two_model_checkout(folder: Path) -> Path:
    """A project folder as a fresh clone has it: the two example models and TWO_MODEL_PIPELINE, unbuilt."""
    (folder / "models").mkdir(parents=True)
    for name in ("tinydet.onnx", "tinycls.onnx"):
        shutil.copy(EXAMPLE_MODELS / name, folder / "models" / name)
    write(folder / "p.yaml", TWO_MODEL_PIPELINE)
    return folder


BIG_PIPELINE = """\
accelbuild: 1
name: p
target: {num_chips: 2, effort: hard}
models:
  - name: big
    path: models/big.onnx
closed_loop: {enabled: true, keep_splits: true}
benchmark: {frames: 40, host: false, accuracy: {samples: 1}}
"""


def big_checkout(folder: Path) -> Path:
    """A model whose float file and mx3 programs are above file_parts.MIN_FILE: parts are exercised."""
    (folder / "models").mkdir(parents=True)
    onnx.save(npu_graphs.chain(["conv", "relu", "conv", "relu", "conv"], channels=208, size=16),
              folder / "models/big.onnx")
    (folder / "p.yaml").write_text(BIG_PIPELINE)
    return folder


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def tree_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path (to compare builds byte for byte)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def sample_header(**extra) -> Header:
    """Two models with ports of every packet format: the DFP tests' header."""
    det = ModelEntry(
        "det",
        (Port("images", (32, 32, 3), "BF16", "conv0"),),
        (Port("boxes", (4, 4, 64), "BF16", "head_box"), Port("scores", (4, 4, 80), "FP32", "head_cls")),
    )
    cls = ModelEntry("cls", (Port("x", [16, 16, 3], "RGB888", "stem"),), (Port("y", [10], "BF16", "fc"),))
    return Header("accelbuild 0.1.0", "mx3", 2, (det, cls), extra)


def sample_dfp(sim: bool = True) -> Dfp:
    """A small valid DFP (one 4-bit conv layer), with or without simcfg."""
    weights = WeightsSection()
    conv = weights.add(np.arange(-8, 8, dtype=np.int8).reshape(4, 2, 2), 4)
    scales = weights.add_scales([0.5, 0.25, 0.125, 1.0])
    program = {"models": [{"name": "det", "layers": [{"name": "conv0", "op": "Conv", "chip": 0, "cores": [0],
                                                      "inputs": ["images"], "outputs": ["c0"],
                                                      "weights": {**conv, "scales_offset": scales}}]}]}
    sections = {
        "cores": canonical_json({"chips": [{"chip": 0, "cores": [{"id": 0, "kind": "mac", "layers": ["conv0"],
                                                                   "utilization": 0.5}]}]}),
        "program": canonical_json(program),
        "weights": weights.to_bytes(),
    }
    if sim:
        sections["simcfg"] = canonical_json({"frames_default": 100, "seed": 0, "jitter": 0.02})
    chips = [{"chip": 0, "cores": 12, "layers": 3, "utilization": 0.5}, {"chip": 1, "cores": 4, "layers": 1}]
    return Dfp(sample_header(chips=chips, pipeline="demo"), sections)
