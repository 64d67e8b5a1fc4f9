"""The rules of an mx3 hardware profile that its JSON Schema cannot express (checked after the schema)."""

from __future__ import annotations

from typing import Any

from accelbuild.config import schema_check
from accelbuild.targets.mx3 import packets


def rule_problems(p: dict[str, Any], own: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
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
    problems.extend(_packet_problems(p["packet_formats"]))
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
    problems: list[tuple[tuple[Any, ...], str]] = []
    for name, link in links.items():
        raw = link.get("raw_bytes_per_second")
        if raw is not None and raw < link["bytes_per_second"]:
            problems.append((("links", name, "bytes_per_second"),
                             f"links.{name}.bytes_per_second {link['bytes_per_second']} is more than its "
                             f"raw_bytes_per_second {raw}"))
        if name != "host" and "frames_in_flight" in link:
            problems.append((("links", name, "frames_in_flight"),
                             "frames_in_flight is the host interface's descriptor ring: links.host only"))
    return problems


def _op_problems(ops: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    problems: list[tuple[tuple[Any, ...], str]] = []
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


def _packet_problems(formats: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """The profile's packet formats are the ones accelbuild packs, at the sizes it packs them."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    for name in packets.FORMATS:
        if name not in formats:
            problems.append((("packet_formats",), f"packet_formats lacks {name}, a format pipelines may choose"))
    for name, fmt in formats.items():
        if name not in packets.FORMATS:
            hint = schema_check.did_you_mean(name, list(packets.FORMATS))
            problems.append((("packet_formats", name), f"accelbuild cannot pack format {name}{hint}"))
        elif fmt["bits_per_value"] != packets.BITS_PER_VALUE[name]:
            problems.append((("packet_formats", name, "bits_per_value"),
                             f"{name} packs {packets.BITS_PER_VALUE[name]} bits per value, "
                             f"not {fmt['bits_per_value']}"))
        elif fmt["chip_to_host"] != (name in packets.OUTPUT_FORMATS):
            problems.append((("packet_formats", name, "chip_to_host"),
                             f"{name} {'is' if name in packets.OUTPUT_FORMATS else 'is not'} a chip-to-host format"))
    return problems
