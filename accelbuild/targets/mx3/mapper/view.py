"""A terminal picture of a mapping: per chip, one character per core showing how busy it is.

Like the vendor compiler's resource summary: MAC cores and ALU cores in rows of 50, a shade from
" " (idle) to "@" (busy every cycle), and a line per chip with cores, weights and feature maps used.
"""

from __future__ import annotations

from typing import Any

SHADES = " .:-=+*#%@"
ROW = 50


def shade(utilization: float) -> str:
    if utilization <= 0:
        return SHADES[0]
    return SHADES[min(len(SHADES) - 1, 1 + int(utilization * (len(SHADES) - 2) + 0.5))]


def render(mapping: dict[str, Any]) -> str:
    lines = [
        f"{mapping['chip_gen']}: {mapping['num_chips']} chip(s), {mapping['fps']:.1f} FPS, "
        f"{mapping['latency_ms']:.3f} ms (cost model, effort {mapping['effort']}); "
        f"bottleneck: {_bottleneck(mapping['bottleneck'])}",
        f"shades: '{SHADES}' = idle .. busy every cycle",
    ]
    if mapping.get("num_chips_reason"):
        lines.insert(1, mapping["num_chips_reason"])
    for chip in mapping["chips"]:
        if not chip["mac_cores"] and not chip["alu_cores"]:
            continue
        lines.append(
            f"chip {chip['chip']}: MAC {chip['mac_cores']}/{len(chip['mac_core_utilization'])} cores "
            f"({chip['mac_utilization']:.0%} busy), ALU {chip['alu_cores']}/{len(chip['alu_core_utilization'])} "
            f"({chip['alu_utilization']:.0%}), weights {chip['weight_utilization']:.0%}, "
            f"feature maps {chip['feature_bytes'] / 1024:.0f} KiB"
        )
        for label, cores in (("MAC", chip["mac_core_utilization"]), ("ALU", chip["alu_core_utilization"])):
            for start in range(0, len(cores), ROW):
                row = "".join(shade(u) for u in cores[start:start + ROW])
                lines.append(f"  {label} {start:>3} |{row}|")
    return "\n".join(lines) + "\n"


def _bottleneck(bottleneck: dict[str, Any]) -> str:
    return describe(bottleneck)


ARROWS = {"to_chip": "host -> chip", "to_host": "chip -> host"}


def describe(resource: dict[str, Any]) -> str:
    """A bottleneck record (the cost model's) or a binding resource (the simulator's, with its busy share)
    in words, as the terminal shows it."""
    kind = resource.get("kind")
    busy = f", {resource['busy']:.0%} busy" if isinstance(resource.get("busy"), (int, float)) else ""
    if kind == "layer":
        return (f"layer {resource['layer']} of {resource['model']} on chip {resource['chip']} "
                f"({resource['cores']} cores, {resource['cycles']:.0f} cycles{busy})")
    if kind == "chip_link":
        return f"chip link {resource['from_chip']} -> {resource['to_chip']}{busy}"
    if kind == "host_link":
        where = f", {ARROWS[resource['direction']]}" if resource.get("direction") in ARROWS else ""
        return f"host link{where}{busy}"
    if kind == "host_buffers":
        return (f"host interface buffers, {ARROWS.get(str(resource.get('direction')), '?')} "
                f"({resource.get('frames_in_flight')} transfers in flight{busy})")
    if kind == "stalls":
        inner = resource.get("busiest") or {}
        return f"waits between layers (no resource saturated; busiest: {describe(inner)})"
    return str(kind).replace("_", " ")
