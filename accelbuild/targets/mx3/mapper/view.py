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
    if bottleneck["kind"] == "layer":
        return (f"layer {bottleneck['layer']} of {bottleneck['model']} on chip {bottleneck['chip']} "
                f"({bottleneck['cores']} cores, {bottleneck['cycles']:.0f} cycles)")
    if bottleneck["kind"] == "chip_link":
        return f"chip link {bottleneck['from_chip']} -> {bottleneck['to_chip']}"
    return "host link"
