"""mypy over the accelbuild package, so CI (which runs pytest) checks types.

The configuration and the per-module baseline are in pyproject.toml ([tool.mypy]); docs/dev/mypy_baseline.md
says why each baselined module is there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_reports_no_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # mypy finds the package (and writes .mypy_cache, gitignored) relative to the cwd
    stdout, stderr, status = api.run(["--config-file", "pyproject.toml", "--cache-dir", ".mypy_cache"])
    assert status == 0, f"mypy found type errors (see docs/dev/mypy_baseline.md):\n{stdout}{stderr}"
