"""Hardware profile files: finding them, resolving ``inherits``, validating, and digesting their content.

A profile file is checked in three steps, each reporting every problem it finds:

1. the file on its own against ``hardware.schema.json`` (unknown keys, types, ranges; a file without
   ``inherits`` must also be complete), positioned ``file:line:col``;
2. for a file with ``inherits``: its parent is loaded (and checked) the same way, the two are merged
   (child keys win, mappings merge key by key, lists are replaced whole) and the merged profile is
   validated again; an error at a key the child wrote points there, any other is ``file: message``;
3. the rules the schema cannot express (the clock is a supported one, per-core weight memory adds up to
   the chip's, an op type sits in one list only, ...).

``load_profile`` returns the merged, validated profile as plain data; ``accelbuild.targets.mx3.hardware`` gives a
typed view of it. Parsed files and validated results are cached by content, so loading a profile again
(``profile_digest`` for every task) costs little and a file edited in place is never served stale.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from accelbuild.config import schema_check
from accelbuild.config.yaml_source import MAX_FILE_BYTES, YamlDocument, load_yaml, parse_yaml
from accelbuild.errors import ConfigError, InputFileError
from accelbuild.util.files import json_digest

SCHEMA = "hardware.schema.json"
_MAX_INHERIT_DEPTH = 8
_CACHE_LIMIT = 64

# (file text, parent's key) -> the validated, merged profile; see _load.
_checked: dict[tuple[Any, ...], dict[str, Any]] = {}
# Texts of files that passed step 1 (the file on its own against the schema).
_shape_ok: set[str] = set()


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


def builtin_profiles() -> dict[str, Path]:
    """Built-in profile names and their files."""
    folder = resources.files("accelbuild.targets.mx3.profiles")
    return {
        entry.name[: -len(".yaml")]: Path(str(entry))
        for entry in folder.iterdir()
        if entry.name.endswith(".yaml")
    }


def looks_like_path(chip_gen: str) -> bool:
    """A ``chip_gen`` value that names a file rather than a built-in profile."""
    return chip_gen.endswith((".yaml", ".yml")) or "/" in chip_gen or "\\" in chip_gen


def load_profile(path: Path, shown: str | None = None) -> dict[str, Any]:
    """The profile at ``path`` with its ``inherits`` chain merged, validated against the hardware schema.

    ``shown`` is how messages name the file (the user's spelling). Raises ``ConfigError`` (a
    ``ProfileError`` when there are several problems) or ``InputFileError`` (an ``inherits`` that
    cannot be resolved). The result is the caller's own copy.
    """
    merged, _ = _load(Path(path), (), shown or str(path))
    return copy.deepcopy(merged)


def profile_digest(path: Path) -> str:
    """SHA-256 of the profile's resolved content: part of every hardware-dependent stage's cache key."""
    merged, _ = _load(Path(path), (), str(path))
    return json_digest(merged)


def _load(path: Path, chain: tuple[Path, ...], shown: str) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """(merged profile, cache key); the key covers the text of every file in the ``inherits`` chain."""
    if len(chain) > _MAX_INHERIT_DEPTH:
        raise InputFileError(shown, f"'inherits' chain deeper than {_MAX_INHERIT_DEPTH} (a cycle?)")
    doc = _document(path, shown)
    data = doc.data
    if doc.text not in _shape_ok:
        if not isinstance(data, dict):
            raise InputFileError(shown, "a hardware profile must be a YAML mapping")
        errors = schema_check.validate(doc, SCHEMA)
        if errors:
            raise _combined(errors)
        _remember_shape(doc.text)
    parent_ref = data.get("inherits")
    if parent_ref is None:
        key: tuple[Any, ...] = (doc.text, None)
        if key not in _checked:
            _check(data, data, doc, [])
            _remember(key, data)
        return _checked[key], key
    parent_path = _resolve_parent(path, parent_ref, shown)
    if parent_path.resolve() in chain + (path.resolve(),):
        raise InputFileError(shown, f"'inherits' chain is a cycle: {parent_ref!r} inherits back into this file")
    parent, parent_key = _load(parent_path, chain + (path.resolve(),), str(parent_ref))
    key = (doc.text, parent_key)
    if key not in _checked:
        merged = _merge(parent, data)
        merged.pop("inherits", None)
        _check(merged, data, doc, schema_check.validate_merged(merged, SCHEMA, doc))
        _remember(key, merged)
    return _checked[key], key


def _resolve_parent(path: Path, parent_ref: str, shown: str) -> Path:
    builtins = builtin_profiles()
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


def _remember_shape(text: str) -> None:
    if len(_shape_ok) >= _CACHE_LIMIT:
        _shape_ok.clear()
    _shape_ok.add(text)


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


def _check(merged: dict[str, Any], own: dict[str, Any], doc: YamlDocument, errors: list[ConfigError]) -> None:
    """Raise the schema errors of the merged profile, or else the problems the schema cannot express."""
    if not errors:
        errors = [_positioned(doc, path, message) for path, message in _rule_problems(merged, own)]
    if errors:
        raise _combined(errors)


def _combined(errors: list[ConfigError]) -> ConfigError:
    return errors[0] if len(errors) == 1 else ProfileError(errors)


def _positioned(doc: YamlDocument, path: tuple[Any, ...], message: str) -> ConfigError:
    where = schema_check.where_in(doc, path, key=True)
    if where is None:
        return ConfigError(doc.file, message)
    return ConfigError(where, message, doc.snippet(where))


def _rule_problems(p: dict[str, Any], own: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """(path, message) for each rule a schema-valid, complete profile breaks.

    ``own`` is what the file itself wrote: a problem is reported at the key the file wrote, so a user who
    changes one number of an inherited profile is pointed at that number.
    """
    problems: list[tuple[tuple[Any, ...], str]] = []
    chip, system = p["chip"], p["system"]
    clocks = chip["clocks_mhz"]
    listed = ", ".join(str(c) for c in clocks)
    if chip["clock_mhz"] not in clocks:
        problems.append((("chip", "clock_mhz"),
                         f"clock_mhz {chip['clock_mhz']} is not one of chip.clocks_mhz ({listed})"))
    cores = chip["mac_cores"]
    per_core = chip["weight_memory_params_8bit"] // cores["count"]
    if cores["weight_memory_bytes"] != per_core:
        path = _written(own, ("chip", "mac_cores", "weight_memory_bytes"), ("chip", "mac_cores", "count"),
                        ("chip", "weight_memory_params_8bit"))
        problems.append((path, (
            f"chip.mac_cores.weight_memory_bytes must be the chip's weight memory split over its MAC cores: "
            f"{chip['weight_memory_params_8bit']} // {cores['count']} = {per_core}, "
            f"not {cores['weight_memory_bytes']}"
        )))
    if system["module_chips"] > system["max_chips"]:
        path = _written(own, ("system", "module_chips"), ("system", "max_chips"))
        problems.append((path, f"system.module_chips {system['module_chips']} is more than "
                               f"system.max_chips {system['max_chips']}"))
    problems.extend(_link_problems(p["links"]))
    problems.extend(_op_problems(p["ops"]))
    calibration = p.get("calibration")
    if calibration is not None:
        if calibration["clock_mhz"] not in clocks:
            problems.append((("calibration", "clock_mhz"),
                             f"calibration.clock_mhz {calibration['clock_mhz']} is not one of chip.clocks_mhz ({listed})"))
        if calibration["num_chips"] > system["max_chips"]:
            problems.append((("calibration", "num_chips"),
                             f"calibration.num_chips {calibration['num_chips']} is more than "
                             f"system.max_chips {system['max_chips']}"))
    return problems


def _written(own: dict[str, Any], *paths: tuple[str, ...]) -> tuple[str, ...]:
    """The first of ``paths`` the file itself wrote (else the first)."""
    for path in paths:
        node: Any = own
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            return path
    return paths[0]


def _link_problems(links: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    problems = []
    for name, link in links.items():
        raw = link.get("raw_bytes_per_second")
        if raw is not None and raw < link["bytes_per_second"]:
            problems.append((("links", name, "bytes_per_second"),
                             f"links.{name}.bytes_per_second {link['bytes_per_second']} is more than its "
                             f"raw_bytes_per_second {raw}"))
    return problems


def _op_problems(ops: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    problems = []
    kind_of: dict[str, str] = {}
    for kind in ("mac", "alu", "fused", "layout"):
        for index, op in enumerate(ops[kind]):
            if op in kind_of:
                problems.append((("ops", kind, index), f"{op} is listed in ops.{kind_of[op]} and ops.{kind}; "
                                                       "an op type runs on one kind of core"))
            kind_of.setdefault(op, kind)
    for op, approx in ops.get("approximations", {}).items():
        at = ("ops", "approximations", op)
        if op not in kind_of:
            hint = schema_check.did_you_mean(op, list(kind_of))
            problems.append((at, f"approximations names {op}, which is in none of the ops lists{hint}"))
        if approx["method"] == "piecewise_linear":
            if "segments" not in approx or "range" not in approx:
                problems.append((at, f"{op}: piecewise_linear needs 'segments' and 'range'"))
            elif not approx["range"][0] < approx["range"][1]:
                problems.append((at + ("range",), f"{op}: range must be [low, high] with low < high"))
    return problems
