"""Which resource sets each model's pace in a timing simulation: the busiest one in the steady state.

Resources and their busy share (per second of the steady state) per model: each core (the layers it
runs x their time per frame x the model's frame rate), the model's share of the host link in each
direction (its transfers' time on the wire), the host interface's buffers in each direction (slots x
time held / ``frames_in_flight``) and each chip link it crosses (its bytes at the bandwidth it gets). A
resource busy at least ``SATURATED`` of the time binds; when none is, the pace comes from waits between
layers (``"kind": "stalls"``, with the busiest resource named). Names match the cost model's
bottleneck records (``mapper/cost.py``) plus ``"busy"``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from accelbuild.targets.mx3 import sharing
from accelbuild.targets.mx3.sim import buffers
from accelbuild.targets.mx3.sim.program import Program, ProgramModel

SATURATED = 0.9


@dataclass(frozen=True)
class Usage:
    """What one model's steady-state frames used of the host link (seconds on the wire per frame)."""

    model: ProgramModel
    in_seconds: list[float]
    out_seconds: list[float]


def binding(program: Program, usage: dict[str, Usage], fps: dict[str, float], shares: sharing.Allocation,
            groups: list[list[str]]) -> dict[str, dict[str, Any]]:
    """Per model, its binding resource (models fed by one shared input stream share theirs)."""
    found: dict[str, dict[str, Any]] = {}
    for group in groups:
        candidates = [r for name in group for r in _resources(program, usage[name], fps[name], shares)]
        busiest: dict[str, Any] = (max(candidates, key=lambda r: r["busy"]) if candidates
                                   else {"kind": "none", "busy": 0.0})
        named = busiest if busiest["busy"] >= SATURATED else {"kind": "stalls", "busy": busiest["busy"],
                                                              "busiest": busiest}
        for name in group:
            found[name] = named
    return found


def _resources(program: Program, use: Usage, fps: float, shares: sharing.Allocation) -> list[dict[str, Any]]:
    hw = program.hardware
    clock = float(hw["clock_mhz"]) * 1e6
    model = use.model
    found: list[dict[str, Any]] = []
    per_core: dict[tuple[int, str, int], float] = {}
    for row in model.layers:
        for k in range(int(row["cores"])):
            core = (int(row["chip"]), str(row["kind"]), int(row["first_core"]) + k)
            per_core[core] = per_core.get(core, 0.0) + float(row["cycles"]) / clock
    for row in model.layers:
        seconds = max(per_core[(int(row["chip"]), str(row["kind"]), int(row["first_core"]) + k)]
                      for k in range(int(row["cores"])))
        found.append({"kind": "layer", "layer": row["name"], "model": model.name, "chip": row["chip"],
                      "cores": row["cores"], "cycles": round(float(row["cycles"]), 1), "busy": _share(fps * seconds)})
    interface = buffers.interface(hw)
    for direction, transfers in (("to_chip", use.in_seconds), ("to_host", use.out_seconds)):
        wire = statistics.fmean(transfers) if transfers else 0.0
        if wire <= 0:
            continue
        found.append({"kind": "host_link", "direction": direction, "busy": _share(fps * wire)})
        held = (wire + interface.latency_s) / interface.frames_in_flight
        found.append({"kind": "host_buffers", "direction": direction,
                      "frames_in_flight": interface.frames_in_flight, "busy": _share(fps * held)})
    crossing = buffers.crossing_bytes(model, buffers.chips_of(program))
    for boundary, nbytes in enumerate(crossing):
        rate = shares.bandwidth[model.name][sharing.chip_link(boundary)]
        if nbytes > 0 and rate > 0:
            found.append({"kind": "chip_link", "from_chip": boundary, "to_chip": boundary + 1,
                          "busy": _share(fps * nbytes / rate)})
    return found


def _share(value: float) -> float:
    return round(min(1.0, value), 4)
