"""Hardware profile files: finding them, resolving ``inherits``, and digesting their content."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from accelbuild.errors import InputFileError
from accelbuild.util.files import json_digest

_MAX_INHERIT_DEPTH = 8


def builtin_profiles() -> dict[str, Path]:
    """Built-in profile names and their files."""
    folder = resources.files("accelbuild.hw.profiles")
    return {
        entry.name[: -len(".yaml")]: Path(str(entry))
        for entry in folder.iterdir()
        if entry.name.endswith(".yaml")
    }


def looks_like_path(chip_gen: str) -> bool:
    """A ``chip_gen`` value that names a file rather than a built-in profile."""
    return chip_gen.endswith((".yaml", ".yml")) or "/" in chip_gen or "\\" in chip_gen


def load_profile(path: Path, shown: str | None = None) -> dict[str, Any]:
    """The profile at ``path`` with its ``inherits`` chain merged (child keys win, mappings merge).

    ``shown`` is how messages name the file (the user's spelling).
    """
    return _load(Path(path), 0, shown or str(path))


def _load(path: Path, depth: int, shown: str) -> dict[str, Any]:
    if depth > _MAX_INHERIT_DEPTH:
        raise InputFileError(shown, f"'inherits' chain deeper than {_MAX_INHERIT_DEPTH} (a cycle?)")
    from accelbuild.config.yaml_source import load_yaml

    data = load_yaml(path, shown).data
    if not isinstance(data, dict):
        raise InputFileError(shown, "a hardware profile must be a YAML mapping")
    parent_ref = data.get("inherits")
    if parent_ref is None:
        return data
    if not isinstance(parent_ref, str):
        raise InputFileError(shown, "'inherits' must name a built-in profile or a profile file")
    builtins = builtin_profiles()
    if parent_ref in builtins:
        parent_path = builtins[parent_ref]
    else:
        parent_path = (path.parent / str(parent_ref)).resolve()
    if not parent_path.is_file():
        raise InputFileError(shown, f"inherits {parent_ref!r}, which is neither a built-in profile nor a file")
    merged = _merge(_load(parent_path, depth + 1, str(parent_ref)), data)
    merged.pop("inherits", None)
    return merged


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value)
        else:
            result[key] = value
    return result


@lru_cache(maxsize=None)
def profile_digest(path: Path) -> str:
    """SHA-256 of the profile's resolved content: part of every hardware-dependent stage's cache key."""
    return json_digest(load_profile(path))
