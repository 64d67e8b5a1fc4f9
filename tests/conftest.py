"""Shared test helpers: run the CLI in a subprocess, and lay out small projects in tmp folders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

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


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> CliResult:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELBUILD_")}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "accelbuild.cli", *args],
        cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with the shipped example models under models/ (copies, so tests may edit them)."""
    shutil.copytree(EXAMPLE_MODELS, tmp_path / "models")
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def tree_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path (to compare builds byte for byte)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
