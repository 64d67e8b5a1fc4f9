"""Generate the pipeline YAML reference (docs/pipeline-reference.md) from the JSON Schema.

    python -m accelbuild.config.schema_doc > docs/pipeline-reference.md

A test checks the committed file matches, so the reference cannot drift from the schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from accelbuild.config.schema_check import load_schema, resolve_ref


def _kind(schema: dict[str, Any], root: dict[str, Any]) -> str:
    schema = resolve_ref(schema, root)
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " \\| ".join(json.dumps(v) for v in schema["enum"])
    if "oneOf" in schema:
        return " or ".join(_kind(s, root) for s in schema["oneOf"])
    kind = schema.get("type", "any")
    bounds = []
    for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<=")):
        if key in schema:
            bounds.append(f"{sign} {schema[key]}")
    if kind == "array" and "items" in schema:
        kind = f"list of {_kind(schema['items'], root)}"
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        kind = f"mapping to {_kind(schema['additionalProperties'], root)}"
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _rows(schema: dict[str, Any], root: dict[str, Any], prefix: str) -> Iterator[str]:
    schema = resolve_ref(schema, root)
    required = set(schema.get("required", []))
    for key, sub in schema.get("properties", {}).items():
        sub_resolved = resolve_ref(sub, root)
        name = f"{prefix}{key}"
        default = json.dumps(sub_resolved["default"]) if "default" in sub_resolved else ""
        if key in required:
            default = "required"
        nested = "properties" in sub_resolved
        kind = "mapping" if nested else _kind(sub_resolved, root)
        yield f"| `{name}` | {kind} | {default} | {sub_resolved.get('description', '')} |"
        if nested:
            yield from _rows(sub_resolved, root, f"{name}.")
        items = sub_resolved.get("items")
        if isinstance(items, dict) and "properties" in resolve_ref(items, root):
            yield from _rows(items, root, f"{name}[].")
    for rule in schema.get("allOf", []):  # a union keyed on a value: each branch's own keys, labelled
        if "then" not in rule:
            continue
        branch = resolve_ref(rule["then"], root)
        when = ", ".join(f"{key}: {json.dumps(cond['const'])}" for key, cond in
                         rule["if"].get("properties", {}).items() if "const" in cond)
        shared = set(schema.get("properties", {}))
        own = {k: v for k, v in branch.get("properties", {}).items() if k not in shared}
        for row in _rows({**branch, "properties": own}, root, prefix):
            yield row.replace(" | ", f" | ({when}) ", 1) if when else row


def render() -> str:
    root = load_schema("pipeline.schema.json")
    lines = [
        "# Pipeline YAML reference (config format 2)",
        "",
        "Generated from `schemas/pipeline.schema.json` by `python -m accelbuild.config.schema_doc`;",
        "do not edit by hand. Paths are relative to the YAML file; unknown keys are errors.",
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
        *_rows(root, root, ""),
        "",
        *_format1_rows(),
    ]
    return "\n".join(lines)


def _format1_rows() -> list[str]:
    """Where each family puts the keys that format 1 kept at the root or in shared sections."""
    from accelbuild import families

    rows = []
    for family in families.builtin().values():
        for entry in family.fragment.get("format1", []):
            suffix = entry.get("suffix")
            how = f"; {suffix[0]} becomes {suffix[1]}" if suffix else ""
            rows.append(f"| {family.name} | `{entry['from']}` | `{entry['to']}`{how} |")
    return [
        "## Format 1",
        "",
        "A file with `accelbuild: 1` still loads: each key below moves to its format-2 place, with a note at",
        "its line, and a format-1 key its family does not read (one that is not listed for it) is ignored with",
        "a note. `accelbuild migrate FILE...` rewrites files into format 2 in place, comments kept (the family",
        "is the file's own `target.family`, or that of the files it extends). A file of either format may",
        "extend a file of the other: the keys are merged first, then moved.",
        "",
        "| family | format 1 | format 2 |",
        "|---|---|---|",
        *rows,
        "",
    ]


if __name__ == "__main__":
    print(render(), end="")
