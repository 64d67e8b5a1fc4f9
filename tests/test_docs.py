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


# Lab notes stay out of the user documentation: no work-session names, issue numbers or this project's commit
# hashes. A source citation pinned to another repository's commit ("owner/repo path @ 3ed073b") is a reference.
LAB_NOTE = re.compile(
    r"\b(stop|session) \d+\b|\b(this|last|previous|earlier|next) session\b|\bissues? #?\d+\b|(?<!@ )(?<![\w/-])"
    r"(?=[0-9a-f]{7,40}\b)(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", re.IGNORECASE)
USER_DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_user_docs_hold_no_lab_notes(doc: Path) -> None:
    """docs/ (outside docs/dev/) and the README are for users: history and fit logs belong in docs/dev/."""
    found = [f"{doc.name}:{n}: {m.group(0)!r}" for n, line in enumerate(doc.read_text().splitlines(), 1)
             for m in LAB_NOTE.finditer(line)]
    assert found == []


def test_the_lab_note_pattern_finds_what_it_is_for() -> None:
    for text in ("at commit 7b741ea", "(issue 23)", "stop 59", "in the previous session's run", "Issue #12"):
        assert LAB_NOTE.search(text), text
    for text in ("edgeai-tensorlab classification.py @ 3ed073b", "an onnxruntime session", "sha256 digest",
                 "1234567 bytes", "deadbeef", "0x7fffffff"):
        assert not LAB_NOTE.search(text), text
