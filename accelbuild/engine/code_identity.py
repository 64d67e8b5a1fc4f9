"""Digests of accelbuild's own code, so a state or cache entry built by other code is never reused.

Every stage names the packages and modules its output depends on (``Stage.code``); their source files
(and package data: profiles, schemas) are hashed by content and relative name. After an upgrade or a
local edit that touches them, the affected tasks re-run and ``status`` says "accelbuild changed". Names
are mapped to files under the installed ``accelbuild`` folder without importing anything, so the no-op
path stays fast; each file set is hashed once per process.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import accelbuild

_ROOT = Path(accelbuild.__file__).resolve().parent
_SUFFIXES = (".py", ".yaml", ".json")


def _files(name: str) -> list[Path]:
    """Source files of a dotted module or package name under ``accelbuild``."""
    parts = name.split(".")
    if parts[0] != "accelbuild":
        raise ValueError(f"not an accelbuild module: {name}")
    base = _ROOT.joinpath(*parts[1:])
    if base.is_dir():
        return sorted(p for p in base.rglob("*") if p.suffix in _SUFFIXES and "__pycache__" not in p.parts)
    module = base.with_suffix(".py")
    if module.is_file():
        return [module]
    raise ValueError(f"no module or package {name} under {_ROOT}")


@cache
def code_digest(names: tuple[str, ...]) -> str:
    """SHA-256 over the relative names and contents of every file of ``names`` (sorted, deduplicated)."""
    digest = hashlib.sha256()
    for path in sorted({p for name in names for p in _files(name)}):
        digest.update(str(path.relative_to(_ROOT)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
