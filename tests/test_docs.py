"""The repository carries its own documentation: every link in the README and docs/ resolves inside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO

DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _local_targets(text: str) -> list[str]:
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves_inside_the_repository(doc: Path) -> None:
    for target in _local_targets(doc.read_text()):
        resolved = (doc.parent / target.split("#")[0]).resolve()
        assert REPO in resolved.parents or resolved == REPO, f"{doc.name}: {target} leaves the repository"
        assert resolved.exists(), f"{doc.name}: {target} does not exist"


def test_nothing_points_outside_the_repository() -> None:
    """No file names the steering folder beside the checkout: the project carries its own contract."""
    outside = re.compile(r"\.\./shared|DESIGN\.md")
    offenders = []
    for path in sorted(REPO.rglob("*")):
        if path.suffix not in {".py", ".md", ".yaml", ".yml", ".toml", ".json"} or ".git" in path.parts \
                or not path.is_file():
            continue
        if any(part in {".accelbuild", "build", "node_modules"} or part.startswith(".venv") for part in path.parts):
            continue
        if path == Path(__file__).resolve():
            continue
        if outside.search(path.read_text(errors="replace")):
            offenders.append(path.relative_to(REPO).as_posix())
    assert offenders == []
