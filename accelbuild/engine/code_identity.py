"""Digests of accelbuild's own code, so a state or cache entry built by other code is never reused.

Every stage names the packages and modules its output depends on (``Stage.code``); their source files
(and package data: profiles, schemas) are hashed by content and relative name; a plug-in family's
``Target.code`` names its own packages, hashed the same way. After an upgrade or a
local edit that touches them, the affected tasks re-run and ``status`` says "accelbuild changed". Names
are mapped to files under the installed ``accelbuild`` folder without importing anything, so the no-op
path stays fast; each file set is hashed once per process.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from functools import cache
from pathlib import Path

import accelbuild

_ROOT = Path(accelbuild.__file__).resolve().parent
_SUFFIXES = (".py", ".yaml", ".json")
_hashed: set[Path] = set()  # every file a digest of this process covers (the no-op stamp watches them)


def _root_of(top: str) -> Path:
    """The folder of a top-level package: accelbuild's own, or a plug-in family's (found, not imported)."""
    if top == "accelbuild":
        return _ROOT
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"no package {top} (a family's Target.code names packages or modules)")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _files(name: str) -> list[Path]:
    """Source files of a dotted module or package name (under ``accelbuild``, or a plug-in's package)."""
    parts = name.split(".")
    root = _root_of(parts[0])
    base = root.joinpath(*parts[1:])
    if base.is_dir():  # os.walk, pruned: rglob would list every compiled file in __pycache__ too
        found: list[Path] = []
        for folder, subfolders, names in os.walk(base):
            subfolders[:] = [d for d in subfolders if d != "__pycache__"]
            found.extend(Path(folder, n) for n in names if n.endswith(_SUFFIXES))
        return sorted(found)
    module = base.with_suffix(".py")
    if module.is_file():
        return [module]
    raise ValueError(f"no module or package {name} under {root}")


def _relative(path: Path) -> str:
    """A file's name in the digest: relative to accelbuild's folder, or a plug-in's with its package's name
    (never where it is installed)."""
    if path.is_relative_to(_ROOT):
        return str(path.relative_to(_ROOT))
    for parent in path.parents:
        if not (parent.parent / "__init__.py").is_file():
            return str(path.relative_to(parent.parent))
    return path.name


@cache
def code_digest(names: tuple[str, ...]) -> str:
    """SHA-256 over the relative names and contents of every file of ``names`` (sorted, deduplicated)."""
    digest = hashlib.sha256()
    files = sorted({p for name in names for p in _files(name)})
    _hashed.update(files)
    for path in files:
        digest.update(_relative(path).encode() + b"\0")
        digest.update(_file_digest(path))
    return digest.hexdigest()


@cache
def _file_digest(path: Path) -> bytes:
    """One file's SHA-256, read once per process (the stages' code names overlap: import and crop share passes)."""
    return hashlib.sha256(path.read_bytes()).digest()


def hashed_files() -> list[Path]:
    """The files the code digests computed so far in this process cover (plug-in families' code too)."""
    return sorted(_hashed)
