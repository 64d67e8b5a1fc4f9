"""The pipeline schema, assembled from the core part and every family's fragment.

``accelbuild/schemas/pipeline_core.json`` holds every family-independent key; each registered family adds
its ``target`` branch (``$defs/target_<family>``, chosen by ``target.family`` through ``allOf`` of
``if``/``then``), its quantize section (``$defs/quantize_<family>``: the shared quantize stage's keys and its
own, as ``target.quantize`` and, checked by ``config/load.py``, ``models[].quantize``), its name in the
``target.family`` enum and its own ``checks`` keys (``accelbuild.families``). Validation uses the schema of every family registered in this environment (so a
plug-in's keys validate); ``accelbuild/schemas/pipeline.schema.json`` is the same assembly from accelbuild's
own families, committed for editors (a test checks it is current). Regenerate it with::

    python -m accelbuild.config.schema_assembly > accelbuild/schemas/pipeline.schema.json
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

from accelbuild import families as registry

CORE = "pipeline_core.json"


def _core() -> dict[str, Any]:
    return json.loads(resources.files("accelbuild.schemas").joinpath(CORE).read_text(encoding="utf-8"))


def _copy(value: Any) -> Any:
    """A deep copy of JSON data (the fragments are parsed JSON): json's C code, several times copy.deepcopy's speed."""
    return json.loads(json.dumps(value))


def definition(name: str) -> str:
    """The ``$defs`` key of a family's branch."""
    return "target_" + name.replace("-", "_")


def quantize_definition(name: str) -> str:
    """The ``$defs`` key of a family's quantize section (``target.quantize`` and ``models[].quantize``)."""
    return "quantize_" + name.replace("-", "_")


def _quantize(family: registry.Family, shared: dict[str, Any]) -> dict[str, Any]:
    """A family's quantize section: the shared quantize stage's keys and the family's own (its fragment's
    ``quantize.properties``; a family may redefine a shared key)."""
    own = family.fragment.get("quantize", {}).get("properties", {})
    return {
        "description": f"Quantization settings of family {family.name}: in target.quantize for every model, "
                       "in models[].quantize for one (its keys override target.quantize's).",
        "type": "object",
        "additionalProperties": False,
        "properties": _copy({**shared, **own}),
    }


def assemble(families: Iterable[registry.Family]) -> dict[str, Any]:
    """The pipeline schema with ``families`` (in order; the default family's branch applies without
    ``target.family``)."""
    schema = _core()
    chosen = list(families)
    target = schema["properties"]["target"]
    summaries = "; ".join(f"{f.name} = {f.fragment['summary']}" + (", the default" if f.name == registry.DEFAULT
                                                                    else "") for f in chosen)
    family_key: dict[str, Any] = {"description": f"Compiler family: {summaries}.", "enum": [f.name for f in chosen]}
    if registry.DEFAULT in family_key["enum"]:
        family_key["default"] = registry.DEFAULT
    target["properties"]["family"] = family_key
    branches = []
    for f in chosen:
        when: dict[str, Any] = {"properties": {"family": {"const": f.name}}}
        if f.name != registry.DEFAULT:
            when["required"] = ["family"]
        branches.append({"if": when, "then": {"$ref": f"#/$defs/{definition(f.name)}"}})
        schema["$defs"][definition(f.name)] = _copy(f.fragment["target"])
    target["allOf"] = branches
    shared = schema["$defs"].pop("quantize_stage")["properties"]
    for f in chosen:
        schema["$defs"][quantize_definition(f.name)] = _quantize(f, shared)
        branch = schema["$defs"][definition(f.name)]
        branch.setdefault("properties", {})["quantize"] = {"$ref": f"#/$defs/{quantize_definition(f.name)}"}
    checks = {c.name: c for c in registry.STANDARD_CHECKS}
    for f in chosen:
        checks.update({name: c for name, c in f.checks.items() if name not in checks})
    standard = [c.name for c in registry.STANDARD_CHECKS]
    order = standard + sorted(set(checks) - set(standard))
    schema["properties"]["checks"]["properties"] = {name: checks[name].as_schema() for name in order}
    return schema


@cache
def pipeline_schema() -> dict[str, Any]:
    """The schema pipelines are validated against: every registered family (once per process)."""
    return assemble(registry.registered().values())


def committed_text() -> str:
    """``accelbuild/schemas/pipeline.schema.json``: the assembly from accelbuild's own families."""
    return dumps(assemble(registry.builtin().values()))


def dumps(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(committed_text())
