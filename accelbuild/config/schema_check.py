"""Validate a document against a JSON Schema and explain each error at the offending node.

jsonschema's own messages name Python reprs and whole sub-schemas; users want "line 7: unknown key
'modles'; did you mean 'models'?". Each error is turned into one positioned ``ConfigError``.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from importlib import resources
from typing import Any

from accelbuild.config.yaml_source import YamlDocument
from accelbuild.errors import ConfigError, Where

_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


PIPELINE = "pipeline.schema.json"


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A schema shipped in ``accelbuild/schemas`` by file name; the pipeline schema as assembled from every
    registered family (``schema_assembly``), so a plug-in family's keys validate too."""
    if name == PIPELINE:
        from accelbuild.config.schema_assembly import pipeline_schema

        return pipeline_schema()
    text = resources.files("accelbuild.schemas").joinpath(name).read_text(encoding="utf-8")
    return json.loads(text)


@cache
def _validator(name: str) -> Any:
    import jsonschema  # imported here: it is the slowest import on the start-up path

    return jsonschema.Draft202012Validator(load_schema(name))


def did_you_mean(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    """``"; did you mean 'x'?"`` when a choice is close to ``word``, else ``""``."""
    names = sorted(str(c) for c in choices)
    by_case = {name.lower(): name for name in names}  # TDA4VM for tda4vm: case alone is the likeliest slip
    if str(word).lower() in by_case:
        return f"; did you mean {by_case[str(word).lower()]!r}?"
    close = difflib.get_close_matches(str(word).lower(), list(by_case), n=1, cutoff=0.6)
    return f"; did you mean {by_case[close[0]]!r}?" if close else ""


def show(value: Any) -> str:
    """A short, YAML-flavoured rendering of a user's value for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe(schema: dict[str, Any]) -> str:
    """What a (sub-)schema accepts, in words."""
    if "const" in schema:
        return show(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(show(v) for v in schema["enum"])
    kind = schema.get("type")
    text = _TYPE_NAMES.get(kind, "a value") if isinstance(kind, str) else "a value"
    bounds = []
    if "minimum" in schema:
        bounds.append(f">= {schema['minimum']}")
    if "exclusiveMinimum" in schema:
        bounds.append(f"> {schema['exclusiveMinimum']}")
    if "maximum" in schema:
        bounds.append(f"<= {schema['maximum']}")
    return text + (" " + " and ".join(bounds) if bounds else "")


def resolve_ref(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node[part]
        return node
    return schema


_NAME_WORDS = "letters, digits, '.', '_' and '-', starting with a letter or digit, at most 128 characters"
_PATTERN_WORDS = {
    "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$": f"a name uses {_NAME_WORDS}",
    "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\\.dfp$": f"a file name ending in .dfp, using {_NAME_WORDS}",
    "^[1-9][0-9]{0,4}$": "a clock in MHz is a whole number such as 600",
    "^[A-Za-z_][A-Za-z0-9_.-]*$": "a dotted key such as target.num_chips or models.det.quantize.weight_bits",
    "^[A-Z][A-Za-z0-9]*$": "an ONNX op type is spelt like Conv or MaxPool (a capital letter, then letters and digits)",
}


def _location(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path) if path else "the top level"


def _explain(error: Any, root: dict[str, Any]) -> tuple[tuple[Any, ...], bool, str]:
    """(path, points_at_key, message) for one jsonschema error."""
    path = tuple(error.absolute_path)
    schema = resolve_ref(error.schema, root)
    kind = error.validator
    instance = error.instance
    if kind == "additionalProperties" and isinstance(instance, dict):
        known = set(schema.get("properties", {}))
        extra = sorted(k for k in instance if k not in known)
        if known:
            key = extra[0]
            return path + (key,), True, f"unknown key {key!r} in {_location(path)}" + did_you_mean(key, known)
        # a free-form mapping whose values failed: report through the value's own schema
    if kind == "required":
        missing = ", ".join(repr(k) for k in error.validator_value if k not in instance)
        plural = "s" if "," in missing else ""
        return path, False, f"missing required key{plural} {missing} in {_location(path)}"
    if kind in ("oneOf", "anyOf"):
        branches = [resolve_ref(b, root) for b in error.validator_value]
        matching = [
            e for e in (error.context or []) if _branch_fits(branches[e.relative_schema_path[0]], instance)
        ]
        # Errors inside a branch of the instance's own kind say the most ("-1 is out of range");
        # a value that matches no branch at all is best described by listing the branches.
        deep = [e for e in matching if e.relative_path or e.validator not in ("const", "type")]
        if deep:
            import jsonschema

            return _explain(jsonschema.exceptions.best_match(deep), root)
        wanted = " or ".join(describe(b) for b in branches)
        consts = [str(b["const"]) for b in branches if isinstance(b.get("const"), str)]
        hint = did_you_mean(str(instance), consts) if isinstance(instance, str) else ""
        return path, False, f"expected {wanted}, got {show(instance)}{hint}"
    if kind == "const" and path == ("accelbuild",):
        if isinstance(instance, str) and instance.strip() in ("1", str(error.validator_value)):
            return path, False, (
                f"config format must be the number {instance.strip()}, not the string {instance!r} "
                f"(write accelbuild: {instance.strip()} without quotes)"
            )
        return path, False, (
            f"unsupported config format {show(instance)}; this accelbuild reads formats 1 and "
            f"{error.validator_value} (accelbuild: {error.validator_value})"
        )
    if kind == "const":
        hint = did_you_mean(str(instance), [str(error.validator_value)])
        return path, False, f"expected {show(error.validator_value)}, got {show(instance)}{hint}"
    if kind == "enum":
        hint = did_you_mean(str(instance), [str(v) for v in error.validator_value])
        return path, False, f"{show(instance)} is not {describe(schema)}{hint}"
    if kind == "type":
        return path, False, f"expected {describe(schema)}, got {show(instance)}"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return path, False, f"{show(instance)} is out of range: expected {describe(schema)}"
    if kind == "minItems":
        return path, False, f"{_location(path)} needs at least {error.validator_value} item(s)"
    if kind == "maxItems":
        return path, False, f"expected at most {error.validator_value} items"
    if kind == "minProperties":
        return path, False, f"{_location(path)} needs at least one entry"
    if kind == "minLength":
        return path, False, "must not be empty"
    if kind == "pattern" and list(error.schema_path)[-2:-1] == ["propertyNames"]:
        form = _PATTERN_WORDS.get(error.validator_value, f"the pattern {error.validator_value}")
        return path + (instance,), True, f"key {show(instance)} is not allowed here: {form}"
    if kind == "pattern":
        form = _PATTERN_WORDS.get(error.validator_value, f"the pattern {error.validator_value}")
        return path, False, f"{show(instance)} is not allowed here: {form}"
    return path, False, error.message


def _branch_fits(branch: dict[str, Any], instance: Any) -> bool:
    """Whether a oneOf branch is about the instance's own kind (so its errors are the useful ones)."""
    if "const" in branch:
        return type(branch["const"]) is type(instance)
    kind = branch.get("type")
    if kind in ("integer", "number"):
        return isinstance(instance, (int, float)) and not isinstance(instance, bool)
    python = {"object": dict, "array": list, "string": str, "boolean": bool}.get(kind or "")
    return python is not None and isinstance(instance, python)


def problems(data: Any, schema_name: str) -> list[tuple[tuple[Any, ...], bool, str]]:
    """Every schema error of plain ``data`` as ``(path, points_at_key, message)``, without repeats."""
    root = load_schema(schema_name)
    found: dict[tuple[tuple[Any, ...], bool, str], None] = {}  # ordered, and a set (thousands of errors)
    for error in _validator(schema_name).iter_errors(data):
        if _misspelt_required(error, root):
            continue  # the unknown-key error for the misspelling says it better
        found.setdefault(_explain(error, root))
    return list(found)


def validate(doc: YamlDocument, schema_name: str) -> list[ConfigError]:
    """All schema errors of ``doc``, positioned and sorted by position."""
    found: list[tuple[Where, str]] = []
    seen = set()
    for path, at_key, message in problems(doc.data, schema_name):
        where = doc.where(path, key=at_key)
        if (str(where), message) in seen:
            continue
        seen.add((str(where), message))
        found.append((where, message))
    found.sort(key=lambda item: (item[0].file, item[0].line, item[0].col))
    return [ConfigError(where, message, doc.snippet(where)) for where, message in found]


def validate_at(doc: YamlDocument, path: tuple[Any, ...], schema: dict[str, Any],
                root: dict[str, Any]) -> list[ConfigError]:
    """Schema errors of the value at ``path`` of ``doc`` against ``schema`` (a part of ``root``)."""
    value: Any = doc.data
    for part in path:
        value = value[part]
    found = []
    for error in _validator_for(schema, root).iter_errors(value):
        if _misspelt_required(error, root):
            continue
        at, at_key, message = _explain(error, root)
        where = doc.where(path + at, key=at_key)
        if at_key and message.startswith("unknown key"):
            message = message.replace(f" in {_location(at[:-1])}", f" in {_location(path + at[:-1])}", 1)
        found.append(ConfigError(where, message, doc.snippet(where)))
    return sorted(found, key=lambda e: (getattr(e.where, "line", 0), getattr(e.where, "col", 0)))


def validate_merged(data: Any, schema_name: str, doc: YamlDocument) -> list[ConfigError]:
    """Schema errors of ``data``, built by merging ``doc`` with content from elsewhere (an inherited file).

    An error at a node that ``doc`` itself wrote is positioned there (``file:line:col``); any other is
    ``file: message (at json.path)``, since no line of ``doc`` holds it. Unpositioned errors come first.
    """
    errors = []
    seen = set()
    for path, at_key, message in problems(data, schema_name):
        where = where_in(doc, path, key=at_key)
        if where is None:
            error = ConfigError(doc.file, f"{message} (at {_location(path)})")
        else:
            error = ConfigError(where, message, doc.snippet(where))
        if str(error) not in seen:
            seen.add(str(error))
            errors.append(error)
    errors.sort(key=_position_key)
    return errors


def where_in(doc: YamlDocument, path: tuple[Any, ...], *, key: bool = False) -> Where | None:
    """Position of ``path`` (or its closest enclosing node) if ``doc`` wrote it; ``None`` for the top level."""
    if key and tuple(path) in doc.key_pos:
        return Where(doc.file, *doc.key_pos[tuple(path)])
    probe = tuple(path)
    while probe:
        if probe in doc.value_pos:
            return Where(doc.file, *doc.value_pos[probe])
        probe = probe[:-1]
    return None


def _position_key(error: ConfigError) -> tuple[int, int, int]:
    where = error.where
    return (1, where.line, where.col) if isinstance(where, Where) else (0, 0, 0)


def _misspelt_required(error: Any, root: dict[str, Any]) -> bool:
    """A "missing key" error whose key is present under a misspelt name."""
    if error.validator != "required" or not isinstance(error.instance, dict):
        return False
    # A requirement may sit next to a $ref to the mapping's schema ({"$ref": ..., "required": [...]}):
    # the keys it knows are the referenced schema's.
    known = resolve_ref(error.schema, root).get("properties", {})
    missing = [k for k in error.validator_value if k not in error.instance]
    extra = [k for k in error.instance if k not in known]
    return bool(missing) and all(did_you_mean(k, extra) for k in missing)


def apply_defaults(data: Any, schema: dict[str, Any], root: dict[str, Any]) -> Any:
    """Fill in schema ``default`` values for absent keys (the schema is the one source of defaults)."""
    schema = resolve_ref(schema, root)
    for rule in schema.get("allOf", []):  # a union keyed on a value (target.family): the chosen branch's
        if "if" in rule and isinstance(data, dict) and _holds(rule["if"], data, root):
            data = apply_defaults(data, rule.get("then", {}), root)
    if isinstance(data, dict) and "properties" in schema:
        for key, sub in schema["properties"].items():
            sub = resolve_ref(sub, root)
            if key not in data and "default" in sub:
                data[key] = json.loads(json.dumps(sub["default"]))
            if key in data:
                data[key] = apply_defaults(data[key], sub, root)
    elif isinstance(data, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(item, schema["items"], root) for item in data]
    return data


def _holds(condition: dict[str, Any], data: dict[str, Any], root: dict[str, Any]) -> bool:
    """An ``if`` of a union on a mapping. The form the schema uses (``properties`` of ``const`` values, and
    ``required``) is decided here, exactly, without importing jsonschema (a no-op run applies defaults to
    every config); any other form goes to jsonschema."""
    if set(condition) <= {"properties", "required"} and all(
            isinstance(sub, dict) and set(sub) == {"const"} for sub in condition.get("properties", {}).values()):
        if any(key not in data for key in condition.get("required", [])):
            return False
        return all(key not in data or data[key] == sub["const"] and type(data[key]) is type(sub["const"])
                   for key, sub in condition.get("properties", {}).items())
    return _validator_for(condition, root).is_valid(data)


def matches(schema: dict[str, Any], data: Any, root: dict[str, Any]) -> bool:
    """Whether ``data`` is valid against a sub-schema of ``root`` (an ``if`` of a union)."""
    return _validator_for(schema, root).is_valid(data)


def _validator_for(schema: dict[str, Any], root: dict[str, Any]) -> Any:
    """A validator for a sub-schema of ``root`` (its ``$ref``s resolve against ``root``)."""
    import jsonschema

    return jsonschema.Draft202012Validator({**schema, "$defs": root.get("$defs", {})})
