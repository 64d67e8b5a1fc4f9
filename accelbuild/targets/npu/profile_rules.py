"""The rules of an ``npu`` hardware profile that its JSON Schema cannot express (checked after the schema).

Each problem is ``(path, message)``, reported at the key the file itself wrote where it can be.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import onnx

from accelbuild.config import schema_check

Problem = tuple[tuple[Any, ...], str]

_KIND_FIELDS = {"matrix": ("macs_per_cycle", "align"), "vector": ("elements_per_cycle",),
                "pool": ("elements_per_cycle",), "layout": ("elements_per_cycle",)}
_UNSOURCED_SECTIONS = ("calibration", "sources", "profile")  # calibration points carry their own source


def rule_problems(p: dict[str, Any], own: dict[str, Any]) -> list[Problem]:
    """(path, message) for each rule a schema-valid, complete profile breaks."""
    problems: list[Problem] = []
    problems.extend(_unit_problems(p["units"]))
    problems.extend(_memory_problems(p["memory"]))
    problems.extend(_timeline_problems(p))
    problems.extend(_fusion_problems(p))
    problems.extend(_support_problems(p))
    problems.extend(_source_problems(p))
    return problems


def _unit_problems(units: dict[str, Any]) -> Iterator[Problem]:
    owner: dict[str, str] = {}
    for name, unit in units.items():
        for field in _KIND_FIELDS[unit["kind"]]:
            if field not in unit:
                yield ("units", name), f"units.{name} is a {unit['kind']} unit: it needs {field}"
        for key in ("depthwise_efficiency", "large_depthwise_efficiency"):
            lanes = unit.get(key)
            if unit["kind"] == "matrix" and lanes is not None and "align" in unit and lanes > unit["align"][0]:
                yield (("units", name, key),
                       f"units.{name}.{key} is {lanes:g} reduction lanes, more than the {unit['align'][0]} of align[0]")
        for index, op in enumerate(unit["ops"]):
            if op in owner:
                yield (("units", name, "ops", index),
                       f"{op} is listed in units.{owner[op]}.ops and units.{name}.ops; an op type runs on one unit")
            owner.setdefault(op, name)
    if not any(u["kind"] == "matrix" for u in units.values()):
        yield ("units",), "an NPU profile needs a matrix unit (Conv, Gemm, MatMul)"


def _memory_problems(mem: dict[str, Any]) -> Iterator[Problem]:
    total = sum(level["bytes"] for level in mem["sram"])
    budget = mem["weight_buffer_bytes"] + mem["feature_buffer_bytes"]
    if budget > total:
        yield (("memory", "feature_buffer_bytes"),
               f"weight_buffer_bytes + feature_buffer_bytes = {budget} is more than the SRAM levels hold ({total})")


def _timeline_problems(p: dict[str, Any]) -> Iterator[Problem]:
    known = list(p["units"]) + [p["memory"]["load_unit"], p["memory"]["store_unit"]]
    for index, name in enumerate(p["timeline"]):
        if name not in known:
            yield (("timeline", index),
                   f"timeline names {name}, which is neither a unit nor the load/store unit"
                   f"{schema_check.did_you_mean(name, known)}")
    for name in p["units"]:
        if name not in p["timeline"]:
            yield ("timeline",), f"timeline lacks unit {name}"


def _fusion_problems(p: dict[str, Any]) -> Iterator[Problem]:
    npu_ops = {op for unit in p["units"].values() for op in unit["ops"]}
    if {"Sigmoid", "Mul"} <= npu_ops:
        npu_ops.add("SiLU")  # the Sigmoid + Mul pair
    if {"Div", "Erf", "Add", "Mul"} <= npu_ops:
        npu_ops.add("GELU")  # the erf form: Div, Erf, Add, Mul, Mul
    if {"Softplus", "Tanh", "Mul"} <= npu_ops:
        npu_ops.add("Mish")  # Softplus, Tanh, Mul
    for index, chain in enumerate(p["fusion"]):
        for position, op in enumerate(chain):
            if op not in npu_ops:
                yield (("fusion", index, position),
                       f"fusion chain {' + '.join(chain)} names {op}, which no unit runs"
                       f"{schema_check.did_you_mean(op, sorted(npu_ops))}")


def _support_problems(p: dict[str, Any]) -> Iterator[Problem]:
    npu_ops = sorted({op for unit in p["units"].values() for op in unit["ops"]})
    for field in ("op_max_rank", "op_max_kernel", "op_max_elements"):  # a misspelt op would leave the op meant
        for op in p["support"].get(field, {}):                           # at the general limit
            if not onnx.defs.has(op):
                yield (("support", field, op), f"support.{field} names {op}, which is no ONNX operator"
                                               f"{schema_check.did_you_mean(op, npu_ops)}")


def _source_problems(p: dict[str, Any]) -> Iterator[Problem]:
    """Every number is sourced: some ``sources`` key is its dotted path or a prefix of it; every key names a field."""
    sources = p["sources"]
    paths = list(_number_paths(p))
    for path in paths:
        dotted = ".".join(str(part) for part in path)
        if not any(dotted == key or dotted.startswith(key + ".") for key in sources):
            yield path, (f"{dotted} has no source: add a 'sources' entry for it (or a prefix of it) citing a "
                         "document, or saying 'stated assumption: ...'")
    dotted_all = [".".join(str(part) for part in path) for path in _all_paths(p)]
    for key in sources:
        if not any(d == key or d.startswith(key + ".") for d in dotted_all):
            yield ("sources", key), f"sources names {key}, which is no field of this profile"


def _number_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if path and path[0] in _UNSOURCED_SECTIONS:
        return
    if isinstance(node, bool) or node is None or isinstance(node, str):
        return
    if isinstance(node, (int, float)):
        yield path
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _number_paths(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _number_paths(value, path + (index,))


def _all_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _all_paths(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _all_paths(value, path + (index,))
