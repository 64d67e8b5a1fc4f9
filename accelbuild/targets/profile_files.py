"""Hardware profile files: finding them, resolving ``inherits``, validating, and digesting their content.

A profile file is checked in three steps, each reporting every problem it finds:

1. the file on its own against its family's schema (mx3: ``hardware.schema.json``; unknown keys, types, ranges; a file without
   ``inherits`` must also be complete), positioned ``file:line:col``;
2. for a file with ``inherits``: its parent is loaded (and checked) the same way, the two are merged
   (child keys win, mappings merge key by key, lists are replaced whole) and the merged profile is
   validated again; an error at a key the child wrote points there, any other is ``file: message``;
3. the rules the schema cannot express, which the family supplies (mx3: the clock is a supported one,
   per-core weight memory adds up to the chip's, an op type sits in one list only, ...).

Each family describes its profiles with a ``ProfileKind`` (schema, built-in folder, rules); this module
knows nothing of what a profile says. ``load_profile`` returns the merged, validated profile as plain
data (a family's stage parameters carry it, so its content is what the build digests). Parsed files and
validated results are cached by content, so loading a profile again costs little and a file edited in
place is never served stale.
"""

from __future__ import annotations

from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from accelbuild.config import schema_check, validated
from accelbuild.config.yaml_source import MAX_FILE_BYTES, YamlDocument, load_yaml, parse_yaml
from accelbuild.errors import ConfigError, InputFileError

Rules = Callable[[dict[str, Any], dict[str, Any]], list[tuple[tuple[Any, ...], str]]]


@dataclass(frozen=True)
class ProfileKind:
    """One family's profile files: their schema, the package holding the built-in ones, and the rules
    the schema cannot express (``rules(merged, own)`` -> (path, message) per problem, reported at the
    key the file itself wrote)."""

    schema: str
    package: str
    rules_module: str  # a module whose ``rule_problems`` are the rules (imported on first use)

    def builtins(self) -> dict[str, Path]:
        """Built-in profile names and their files."""
        folder = resources.files(self.package)
        return {entry.name[: -len(".yaml")]: Path(str(entry)) for entry in folder.iterdir()
                if entry.name.endswith(".yaml")}

    def rules(self) -> Rules:
        import importlib

        return importlib.import_module(self.rules_module).rule_problems

_MAX_INHERIT_DEPTH = 8
_CACHE_LIMIT = 64

# (file text, parent's key) -> the validated, merged profile; see _load.
_checked: dict[tuple[Any, ...], dict[str, Any]] = {}
# Texts of files that passed step 1 (the file on its own against the schema).
_shape_ok: set[tuple[ProfileKind, str]] = set()


class ProfileError(ConfigError):
    """Every problem found in one profile file.

    A ``ConfigError`` (positioned at the first problem), so a caller that handles one config error
    handles this too; its text lists each problem on its own ``file:line:col: message`` line.
    """

    def __init__(self, errors: list[ConfigError]) -> None:
        self.errors = errors
        first = errors[0]
        rest = "".join(f"\n{error}" for error in errors[1:])
        super().__init__(first.where, first.message + rest, first.snippet if not rest else "")


def looks_like_path(chip_gen: str) -> bool:
    """A ``chip_gen`` value that names a file rather than a built-in profile."""
    return chip_gen.endswith((".yaml", ".yml")) or "/" in chip_gen or "\\" in chip_gen


def resolve_profile(value: str, kind: ProfileKind, checker: Any, at: tuple[Any, ...],
                    setting: str, read_builtin: bool = True) -> tuple[Path, dict[str, Any] | None]:
    """A target's profile setting (``chip_gen``, ``platform``): a built-in name or a path to a profile file.

    Returns the file and its merged profile (read only; ``None`` when it has problems, or for a built-in one
    when not ``read_builtin``: a caller that reads it later, when needed). Problems go to ``checker.error``
    at ``at``: a missing file, an invalid profile, or an unknown name (``setting`` names the key in the
    message, with the built-in names and a did-you-mean).
    """
    builtins = kind.builtins()
    if value in builtins:
        return builtins[value], load_profile(builtins[value], kind, copy=False) if read_builtin else None
    if looks_like_path(value):
        path = checker.existing(at, value)
        if path.is_file():
            try:
                return path, load_profile(path, kind, shown=value, copy=False)
            except (InputFileError, ConfigError) as exc:
                checker.error(at, str(exc))
        return path, None
    checker.error(at, f"unknown {setting} {value!r} (built-in profiles: {', '.join(sorted(builtins))}; "
                      f"or a path to a profile .yaml){schema_check.did_you_mean(value, list(builtins))}")
    return Path(value), None


def load_profile(path: Path, kind: ProfileKind, shown: str | None = None, *, copy: bool = True) -> dict[str, Any]:
    """The profile at ``path`` with its ``inherits`` chain merged, validated against ``kind``'s schema.

    ``shown`` is how messages name the file (the user's spelling). Raises ``ConfigError`` (a
    ``ProfileError`` when there are several problems) or ``InputFileError`` (an ``inherits`` that
    cannot be resolved). The result is the caller's own copy, unless ``copy=False``: then it is the
    cached object itself, for callers that only read it (stage parameters, planned for every task).
    """
    merged, _ = _load(Path(path), (), shown or str(path), kind)
    return deepcopy(merged) if copy else merged


def _load(path: Path, chain: tuple[Path, ...], shown: str,
          kind: ProfileKind) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """(merged profile, cache key); the key covers the text of every file in the ``inherits`` chain."""
    if len(chain) > _MAX_INHERIT_DEPTH:
        raise InputFileError(shown, f"'inherits' chain deeper than {_MAX_INHERIT_DEPTH} (a cycle?)")
    doc = _document(path, shown)
    data = doc.data
    if (kind, doc.text) not in _shape_ok:
        if not isinstance(data, dict):
            raise InputFileError(shown, "a hardware profile must be a YAML mapping")
        # a built-in profile ships with the schema it meets (the test suite checks every one): 9 ms a load
        if path not in kind.builtins().values():
            _validate_shape(doc, kind)
        _remember_shape((kind, doc.text))
    parent_ref = data.get("inherits")
    if parent_ref is None:
        key: tuple[Any, ...] = (kind, doc.text, None)
        if key not in _checked:
            _check(data, data, doc, [], kind)
            _remember(key, data)
        return _checked[key], key
    parent_path = _resolve_parent(path, parent_ref, shown, kind)
    if parent_path.resolve() in chain + (path.resolve(),):
        raise InputFileError(shown, f"'inherits' chain is a cycle: {parent_ref!r} inherits back into this file")
    parent, parent_key = _load(parent_path, chain + (path.resolve(),), str(parent_ref), kind)
    key = (kind, doc.text, parent_key)
    if key not in _checked:
        merged = _merge(parent, data)
        merged.pop("inherits", None)
        _check(merged, data, doc, schema_check.validate_merged(merged, kind.schema, doc), kind)
        _remember(key, merged)
    return _checked[key], key


def _validate_shape(doc: YamlDocument, kind: ProfileKind) -> None:
    """A profile file on its own against ``kind``'s schema, unless an earlier command validated the same text."""
    record = validated.current
    seen_key = record.key({"profile": doc.text}, schema_check.load_schema(kind.schema)) if record else None
    if record is not None and seen_key is not None and record.seen(seen_key):
        return
    errors = schema_check.validate(doc, kind.schema)
    if errors:
        raise _combined(errors)
    if record is not None and seen_key is not None:
        record.add(seen_key)


def _resolve_parent(path: Path, parent_ref: str, shown: str, kind: ProfileKind) -> Path:
    builtins = kind.builtins()
    if parent_ref in builtins:
        return builtins[parent_ref]
    parent_path = (path.parent / parent_ref).resolve()
    if not parent_path.is_file():
        raise InputFileError(shown, f"inherits {parent_ref!r}, which is neither a built-in profile nor a file")
    return parent_path


def _document(path: Path, shown: str) -> YamlDocument:
    """The parsed file, from a cache keyed by its text (parsing is most of the cost of a load)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
        text = raw.decode("utf-8-sig") if len(raw) <= MAX_FILE_BYTES else None
    except (OSError, UnicodeDecodeError):
        text = None
    if text is None or raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return load_yaml(path, shown)  # the unusual cases (missing, too big, not UTF-8, UTF-16) as usual
    return _parse(text, shown)


@lru_cache(maxsize=_CACHE_LIMIT)
def _parse(text: str, shown: str) -> YamlDocument:
    return parse_yaml(text, shown)


def _remember_shape(key: tuple[ProfileKind, str]) -> None:
    if len(_shape_ok) >= _CACHE_LIMIT:
        _shape_ok.clear()
    _shape_ok.add(key)


def _remember(key: tuple[Any, ...], merged: dict[str, Any]) -> None:
    if len(_checked) >= _CACHE_LIMIT:
        _checked.clear()
    _checked[key] = merged


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value)
        else:
            result[key] = value
    return result


def _check(merged: dict[str, Any], own: dict[str, Any], doc: YamlDocument, errors: list[ConfigError],
           kind: ProfileKind) -> None:
    """Raise the schema errors of the merged profile, or else the problems the schema cannot express."""
    if not errors:
        errors = [_positioned(doc, path, message) for path, message in kind.rules()(merged, own)]
    if errors:
        raise _combined(errors)


def _combined(errors: list[ConfigError]) -> ConfigError:
    return errors[0] if len(errors) == 1 else ProfileError(errors)


def _positioned(doc: YamlDocument, path: tuple[Any, ...], message: str) -> ConfigError:
    where = schema_check.where_in(doc, path, key=True)
    if where is None:
        return ConfigError(doc.file, message)
    return ConfigError(where, message, doc.snippet(where))


