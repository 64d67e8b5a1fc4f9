"""``accelbuild compare``: the figures of two builds (or every variant of a matrix) side by side.

A side is an output folder (its benchmark.json and <model>/quantize.json), or a pipeline YAML (one
build, or one per matrix variant, found through the plan, so variants sharing tasks are read where
those tasks built). Deltas are against the first side; "best" says which side wins each row, and "=" when
the difference is inside the figures' noise (a measured timing's run-to-run noise; across kinds, each
profile's error band) or inside the measured figures' own spread: a host-timed end-to-end figure carries the
range its host sections' p10 and p90 times give, and two sides whose ranges overlap, or whose difference is
no larger than the wider range, are level (the ranges are shown). Every row says what kind of figure it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbuild.engine.metrics import number, read_metrics
from accelbuild.errors import UserError
from accelbuild.families import all_checks

# row -> True when higher is better; the families' own figures' rows come from their checks (family_figures)
SENSE = {"fps": True, "latency_ms": False, "weight_bytes": False, "cosine": True}


def family_figures() -> dict[str, bool]:
    """The figures of the registered families' own checks (a chip count, host layers, ...), in
    the order of their checks' names, and whether higher is better."""
    return {c.metric: c.higher_is_better for c in all_checks().values() if c.source is not None}


def higher_is_better(sense: str) -> bool:
    return SENSE[sense] if sense in SENSE else family_figures()[sense]


class CompareError(UserError):
    def __init__(self, message: str) -> None:
        super().__init__(f"compare: {message}")


@dataclass(frozen=True)
class Side:
    label: str
    metrics: dict[str, Any]


def folder_side(folder: Path, label: str) -> Side:
    bench = folder / "benchmark.json"
    if not bench.is_file():
        raise CompareError(f"{label}: not a build output folder (no benchmark.json)")
    records = {p.parent.name: p for p in folder.glob("*/quantize.json")}
    metrics = read_metrics(bench, records)
    if metrics is None:
        raise CompareError(f"{label}: benchmark.json is not readable")
    return Side(label, metrics)


def pipeline_sides(path: str) -> list[Side]:
    from accelbuild.config.load import load_file
    from accelbuild.engine.api import outcome
    from accelbuild.engine.plan import build_plan

    specs = load_file(path)
    built = build_plan(specs)
    sides = []
    for spec in specs:
        item = outcome(spec, built.artifacts[spec.name])
        if item.metrics is None:
            raise CompareError(f"{spec.name} is not built yet (no benchmark.json): run `accelbuild run {path}`")
        sides.append(Side(spec.variant or spec.name, item.metrics))
    return sides


def sides_of(arguments: list[str]) -> list[Side]:
    sides: list[Side] = []
    for arg in arguments:
        path = Path(arg)
        if path.is_dir():
            sides.append(folder_side(path, arg))
        elif path.suffix in (".yaml", ".yml"):
            sides.extend(pipeline_sides(arg))
        else:
            raise CompareError(f"{arg}: expected a build output folder or a pipeline YAML")
    if len(sides) < 2:
        raise CompareError("nothing to compare: give two output folders, two pipelines, or a matrix pipeline")
    names = [sorted(m["name"] for m in side.metrics["models"]) for side in sides]
    for side, models in zip(sides[1:], names[1:]):
        if models != names[0]:
            raise CompareError(f"{sides[0].label} has models {', '.join(names[0])} but {side.label} has "
                               f"{', '.join(models)}; compare builds of the same models")
    return sides


MEASURED_NOISE = 0.05     # run-to-run spread of a timing on a shared machine (relative)
SIMULATED_NOISE = 0.01    # below this, two modelled figures of one kind do not differ in any way that matters
COSINE_NOISE = 1e-4       # cosines differ by this between machines' SIMD kernels (absolute)


@dataclass(frozen=True)
class Row:
    label: str
    sense: str                  # SENSE key: which way is better
    values: list[float | None]  # one per side
    noise: float                # relative (absolute for cosine): a smaller difference is no win
    kind: str = ""              # what the figures are, where the sides' kinds say it
    spreads: list[list[float] | None] = field(default_factory=list)  # per side: [low, high] measured, or None

    def spread(self, i: int) -> tuple[float, float] | None:
        value = self.spreads[i] if i < len(self.spreads) else None
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            return None
        low, high = sorted(float(v) for v in value)
        return low, high


def _noise(sides: list[Side], end_to_end: bool = False) -> float:
    """How far two sides' speed figures may differ by noise or modelling error alone: a measured figure's
    run-to-run spread; across kinds (simulated vs estimated vs measured) also each profile's published error
    band (docs/credibility.md) where its benchmark quotes one."""
    kinds = {s.metrics.get("kind") for s in sides}
    noise = MEASURED_NOISE if "measured" in kinds or end_to_end else SIMULATED_NOISE
    if len(kinds) > 1:
        bands = [s.metrics.get("band_pct") for s in sides if isinstance(s.metrics.get("band_pct"), (int, float))]
        noise = max([noise, MEASURED_NOISE, *(b / 100 for b in bands)])
    return noise


def rows(sides: list[Side]) -> list[Row]:
    """Every figure's row: the headline per model, then the one combined figure (named for what it is),
    end-to-end figures where the builds have them, sizes and accuracy."""
    out: list[Row] = []
    speed = _noise(sides)
    names = sorted(m["name"] for m in sides[0].metrics["models"])
    per_model = {name: [next(m for m in s.metrics["models"] if m["name"] == name) for s in sides] for name in names}
    multi = len(names) > 1
    kinds = " / ".join(dict.fromkeys(str(s.metrics.get("kind")) for s in sides))
    for name, per in per_model.items():
        prefix = f"{name} " if multi else ""
        out.append(Row(f"{prefix}fps", "fps", [m.get("fps") for m in per], speed, kinds))
        out.append(Row(f"{prefix}latency_ms", "latency_ms", [m.get("latency_ms") for m in per], speed, kinds))
        if any(m.get("end_to_end_fps") is not None for m in per):
            whole = _noise(sides, end_to_end=True)
            what = " / ".join(dict.fromkeys(f"{m.get('end_to_end_accelerator')} + host measured"
                                            if m.get("end_to_end_host") else str(m.get("end_to_end_accelerator"))
                                            for m in per))
            out.append(Row(f"{prefix}end-to-end fps", "fps", [m.get("end_to_end_fps") for m in per], whole, what,
                           [m.get("end_to_end_fps_spread") for m in per]))
            out.append(Row(f"{prefix}end-to-end latency_ms", "latency_ms",
                           [m.get("end_to_end_latency_ms") for m in per], whole, what,
                           [m.get("end_to_end_latency_ms_spread") for m in per]))
    if multi:
        what = " / ".join(dict.fromkeys(str(s.metrics.get("fps_is")) for s in sides))
        out.append(Row("fps together", "fps", [s.metrics.get("fps") for s in sides], speed, what))
    for key in family_figures():
        if any(key in s.metrics for s in sides):
            out.append(Row(key, key, [s.metrics.get(key) for s in sides], 0.0))
    out.append(Row("weight_bytes", "weight_bytes", [s.metrics.get("weight_bytes") for s in sides], 0.0))
    for name, per in per_model.items():
        out.append(Row(f"{name} cosine", "cosine", [m.get("cosine") for m in per], COSINE_NOISE))
    return out


def winners(row: Row) -> list[int]:
    """The sides level with the best value: within the row's noise of it, or within the measured spread (the
    two sides' ranges overlap, or the difference is no larger than the wider range). [] with fewer than two
    figures."""
    known = [(v, i) for i, v in enumerate(row.values) if isinstance(v, (int, float))]
    if len(known) < 2:
        return []
    sign = -1.0 if higher_is_better(row.sense) else 1.0
    top, first = min(known, key=lambda pair: (sign * pair[0], pair[1]))  # the best value, first side on a tie

    def near(value: float, i: int) -> bool:
        gap = abs(top - value)
        if gap <= row.noise * (1.0 if row.sense == "cosine" else max(abs(top), 1e-12)):
            return True
        mine, best_one = row.spread(i), row.spread(first)
        ranges = [r for r in (mine, best_one) if r is not None]
        if not ranges:
            return False
        overlap = mine is not None and best_one is not None and mine[0] <= best_one[1] and best_one[0] <= mine[1]
        return overlap or gap <= max(high - low for low, high in ranges)

    return [i for v, i in known if near(v, i)]


def best(row: Row) -> str | None:
    """The winning side's index (the first of the sides level with the best value, ``winners``); "=" when every
    side is level; None with fewer than two figures."""
    level = winners(row)
    if not level:
        return None
    return "=" if len(level) == sum(isinstance(v, (int, float)) for v in row.values) else str(level[0])


def as_json(sides: list[Side]) -> dict[str, Any]:
    result = []
    for row in rows(sides):
        base = row.values[0]
        deltas = [None if not isinstance(v, (int, float)) or not isinstance(base, (int, float)) else
                  round(v - base, 6) for v in row.values]
        winner = best(row)
        entry = {"row": row.label, "values": row.values, "delta_vs_first": deltas,
                 "best": None if winner in (None, "=") else sides[int(winner)].label,
                 "within_noise": winner == "=", "noise": row.noise, "kind": row.kind,
                 "higher_is_better": higher_is_better(row.sense)}
        if len(winners(row)) > 1:  # no single winner: the sides level with the best
            entry["level"] = [sides[i].label for i in winners(row)]
        if any(row.spread(i) for i in range(len(row.values))):
            entry["spreads"] = [list(r) if (r := row.spread(i)) else None for i in range(len(row.values))]
        result.append(entry)
    return {"sides": [s.label for s in sides], "simulated": [s.metrics.get("simulated") for s in sides],
            "kinds": [s.metrics.get("kind") for s in sides], "worst_frames": worst_frames(sides),
            "measured_on": [s.metrics.get("measured_on") for s in sides],
            "fps_bound": [s.metrics.get("fps_bound") for s in sides], "rows": result}


def text(sides: list[Side]) -> str:
    mixed = len({s.metrics.get("kind") for s in sides}) > 1  # label each side when their kinds differ
    header = ["", *(f"{s.label} ({s.metrics.get('kind')})" if mixed else s.label for s in sides),
              "delta" if len(sides) == 2 else "delta vs first (last)", "best", "kind"]
    table = [header]
    for row in rows(sides):
        shown = [_shown(row, i) for i in range(len(row.values))]
        base, last = row.values[0], row.values[-1]
        delta = "" if not isinstance(base, (int, float)) or not isinstance(last, (int, float)) else \
            (("+" if last - base > 0 else "") + number(last - base) +
             (f" ({(last - base) / base:+.1%})" if base else ""))
        winner = best(row)
        verdict = "" if winner is None else _level(row, sides) if winner == "=" or len(winners(row)) > 1 else \
            sides[int(winner)].label
        table.append([row.label, *shown, delta, verdict, row.kind])
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table]
    frames = worst_frames(sides)
    if any(entry["file"] for per in frames.values() for entry in per):
        lines.append("")
        for name, per in frames.items():
            shown = "; ".join(f"{side.label}: {_frame_text(entry)}" for side, entry in zip(sides, per))
            lines.append(f"{name} cosine: {shown}")
    elsewhere = len({json.dumps(s.metrics.get("measured_on"), sort_keys=True) for s in sides}) > 1
    if mixed or elsewhere:  # different kinds, or measured on different machines or devices: say where
        lines.append("")
        lines += [f"{s.label}: {_kind_text(s)}" for s in sides]
    bounds = [s for s in sides if s.metrics.get("fps_bound")]
    if bounds:  # a one-sided credibility band: which way its figures are off
        lines.append("")
        article = {"upper": "an upper", "lower": "a lower"}
        lines += [f"{s.label}: its fps is {article.get(s.metrics['fps_bound'], s.metrics['fps_bound'])} bound: "
                  f"{s.metrics.get('band_text')}" for s in bounds]
    return "\n".join(lines) + "\n"


def _shown(row: Row, i: int) -> str:
    """A side's figure, with its measured range (p10-p90 host timings) where it has one."""
    value = row.values[i]
    if value is None:
        return "n/a"
    spread = row.spread(i)
    return number(value) + (f" ({number(spread[0])}-{number(spread[1])})" if spread else "")


def _level(row: Row, sides: list[Side]) -> str:
    """The verdict of a row with no single winner: "=" and why, and which sides are level when not all are."""
    level = winners(row)
    why = "within spread" if any(row.spread(i) for i in level) else (
        "" if not row.noise else f"within {row.noise:.0e}" if row.sense == "cosine" else f"within {row.noise:.0%}")
    which = "" if len(level) == sum(isinstance(v, (int, float)) for v in row.values) else \
        " " + ", ".join(sides[i].label for i in level)
    return "=" + which + (f" ({why})" if why else "")


def worst_frames(sides: list[Side]) -> dict[str, list[dict[str, Any]]]:
    """Per model, per side: the worst frame (its own cosine), what frames the headline was taken among (and
    how many it pools, where it pools them), and how many frames had no signal."""
    result: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(m["name"] for m in sides[0].metrics["models"]):
        per = [next(m for m in s.metrics["models"] if m["name"] == name) for s in sides]
        result[name] = [{"file": m.get("worst_file"), "cosine": m.get("worst_cosine"),
                         "measured_on": m.get("cosine_measured_on"),
                         "no_signal_frames": m.get("no_signal_frames"),
                         **({"pooled_over": m["cosine_pooled_over"]} if m.get("cosine_pooled_over") else {}),
                         **({"output": m["worst_output"]} if m.get("worst_output") else {})} for m in per]
    return result


def _frame_text(entry: dict[str, Any]) -> str:
    if not entry["file"]:
        return "n/a (no per-frame record)"
    quiet = f", {entry['no_signal_frames']} without signal" if entry.get("no_signal_frames") else ""
    output = f", output {entry['output']}" if entry.get("output") else ""
    if entry.get("pooled_over"):
        return (f"pooled over {entry['pooled_over']} {entry['measured_on']} frames{quiet}{output}, worst frame "
                f"{entry['file']} at {entry.get('cosine')}")
    return f"worst frame {entry['file']} ({entry['measured_on']}{quiet}){output}"


def _kind_text(side: Side) -> str:
    kind = side.metrics.get("kind", "simulated")
    where = side.metrics.get("measured_on")
    if kind == "measured" and isinstance(where, dict):  # on a device of a farm
        return f"measured on device {where.get('device')} ({where.get('machine')})"
    if kind == "measured" and where:
        return f"measured on {where}"
    return {"simulated": "simulated (modelled accelerator)"}.get(kind, kind)


def dumps(sides: list[Side]) -> str:
    return json.dumps(as_json(sides), indent=2)
