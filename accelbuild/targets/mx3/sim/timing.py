"""Timing simulation: frames flowing through a DFP's placement, event by event.

Each layer owns the cores the program gives it (a core shared by two layers serialises them: that is
how ALU-core sharing shows up) and takes ``cycles / clock`` per frame. What the cost model leaves out
and this model adds:

- pipeline fill: a frame enters layer by layer; a layer may start once its producers have made the
  input rows its kernel needs (``start_fraction``) and finishes no earlier than that share of its time
  after its last input arrived;
- back-pressure: a layer starts frame f only after each consumer has started frame f-4 (four frames
  of buffering per edge: enough that skip connections around a block do not stall it), and the host
  sends frame f once frame f-8 has come back and while the first layers work on frame f-1;
- link contention: every transfer over the host link (input and output directions apart) and over each
  chip-to-chip link queues behind the ones before it, across models;
- per-frame jitter of host transfers, drawn from a seeded generator (uniform within +-``host_jitter``).

Results: FPS per
model and total (from the second half of the frames, the steady state), first-frame and steady
latency, per-core utilisation, and per-layer timings and link activity for the reports.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelbuild.targets.mx3.sim.program import Program, ProgramModel

DEFAULT_JITTER = 0.05
IN_FLIGHT = 8  # frames the host keeps on the device at once
BUFFERED = 4  # frames of buffering on every edge between two layers


@dataclass
class Span:
    track: str
    kind: str
    start: float
    end: float


@dataclass
class TimingResult:
    frames: int
    fps: float
    model_fps: dict[str, float]
    first_latency_ms: dict[str, float]
    steady_latency_ms: dict[str, float]
    layers: list[dict[str, Any]]
    core_utilization: dict[str, float]
    spans: list[Span] = field(default_factory=list)
    duration_s: float = 0.0


class _Link:
    """A FIFO resource: transfers queue behind each other."""

    def __init__(self, bytes_per_second: float, latency_s: float) -> None:
        self.rate = bytes_per_second
        self.latency = latency_s
        self.free = 0.0

    def send(self, ready: float, nbytes: float, stretch: float = 1.0) -> tuple[float, float]:
        start = max(self.free, ready)
        duration = nbytes / self.rate * stretch if self.rate > 0 else 0.0
        self.free = start + duration
        return start, start + duration + self.latency


def simulate(program: Program, frames: int, seed: int = 0, jitter: float | None = None,
             record_frames: int = 3) -> TimingResult:
    hw = program.hardware
    clock = float(hw["clock_mhz"]) * 1e6
    if jitter is None:
        jitter = float((program.simcfg or {}).get("host_jitter", DEFAULT_JITTER))
    rng = np.random.default_rng(seed)
    host_in = _Link(hw["host_link"]["bytes_per_second"], hw["host_link"]["latency_us"] * 1e-6)
    host_out = _Link(hw["host_link"]["bytes_per_second"], hw["host_link"]["latency_us"] * 1e-6)
    chip_links: dict[int, _Link] = {}
    core_free: dict[tuple[int, str, int], float] = {}
    state = {m.name: _ModelState(m, clock) for m in program.models}
    spans: list[Span] = []
    for frame in range(frames):
        for model in program.models:
            stretch_in, stretch_out = 1 + jitter * rng.uniform(-1, 1), 1 + jitter * rng.uniform(-1, 1)
            state[model.name].run_frame(frame, host_in, host_out, chip_links, core_free, hw, stretch_in,
                                        stretch_out, spans if frame < record_frames else None)
    return _result(program, state, frames, clock, core_free, spans)


class _ModelState:
    def __init__(self, model: ProgramModel, clock: float) -> None:
        self.model = model
        self.clock = clock
        self.rows = {row["name"]: row for row in model.layers}
        self.consumers: dict[str, list[str]] = {name: [] for name in self.rows}
        for row in model.layers:
            for source in row.get("inputs", []):
                self.consumers.setdefault(source, []).append(row["name"])
        self.start: dict[tuple[str, int], float] = {}
        self.end: dict[tuple[str, int], float] = {}
        self.sent: list[float] = []
        self.done: list[float] = []
        self.busy: dict[str, float] = {name: 0.0 for name in self.rows}
        self.sent_over: dict[tuple[str, int, int], tuple[float, float]] = {}

    def run_frame(self, f: int, host_in: _Link, host_out: _Link, links: dict[int, _Link],
                  core_free: dict, hw: dict, stretch_in: float, stretch_out: float, spans: list | None) -> None:
        first = [row["name"] for row in self.model.layers if not row.get("inputs")]
        ready = max([self.start.get((name, f - 1), 0.0) for name in first], default=0.0)
        if f >= IN_FLIGHT:  # the host keeps a bounded number of frames on the device
            ready = max(ready, self.done[f - IN_FLIGHT])
        send_start, arrived = host_in.send(ready, self.model.input_bytes, stretch_in)
        self.sent.append(send_start)
        _record(spans, f"host in · {self.model.name}", "host_in", send_start, host_in.free)
        transfer = host_in.free - send_start
        for row in self.model.layers:
            self._layer(row, f, send_start + host_in.latency, arrived, transfer, links, core_free, hw, spans)
        last = max(self.end[(row["name"], f)] for row in self.model.layers if not self.consumers[row["name"]])
        out_start, done = host_out.send(last, self.model.output_bytes, stretch_out)
        _record(spans, f"host out · {self.model.name}", "host_out", out_start, host_out.free)
        self.done.append(done)

    def _layer(self, row: dict, f: int, in_start: float, in_end: float, in_transfer: float,
               links: dict[int, _Link], core_free: dict, hw: dict, spans: list | None) -> None:
        name, fraction = row["name"], float(row.get("start_fraction", 1.0))
        duration = float(row["cycles"]) / self.clock
        first_ready, all_ready = (in_start + fraction * in_transfer, in_end) if not row.get("inputs") else (0.0, 0.0)
        for source in row.get("inputs", []):
            source_row = self.rows[source]
            s, e = self.start[(source, f)], self.end[(source, f)]
            first, last = s + fraction * (e - s), e
            for boundary in range(min(source_row["chip"], row["chip"]), max(source_row["chip"], row["chip"])):
                sent = self.sent_over.get((source, f, boundary))
                if sent is None:  # a tensor crosses a boundary once per frame, whoever reads it
                    link = links.setdefault(boundary, _Link(hw["chip_link"]["bytes_per_second"],
                                                            hw["chip_link"]["latency_us"] * 1e-6))
                    link_start, link_end = link.send(s, float(source_row.get("out_bytes", 0)))
                    _record(spans, f"chip link {boundary}→{boundary + 1}", "chip_link", link_start, link.free)
                    sent = self.sent_over[(source, f, boundary)] = (link.latency, link_end)
                first, last = first + sent[0], max(last + sent[0], sent[1])
            first_ready, all_ready = max(first_ready, first), max(all_ready, last)
        cores = [(row["chip"], row["kind"], row["first_core"] + k) for k in range(int(row["cores"]))]
        start = max([first_ready] + [core_free.get(c, 0.0) for c in cores]
                    + [self.start.get((c, f - BUFFERED), 0.0) for c in self.consumers[name]])
        end = max(start + duration, all_ready + fraction * duration)
        for core in cores:
            core_free[core] = end
        self.start[(name, f)], self.end[(name, f)] = start, end
        self.busy[name] += duration
        _record(spans, f"chip {row['chip']} · {row['kind'].upper()} · {self.model.name}/{name}", "layer", start, end)


def _record(spans: list | None, track: str, kind: str, start: float, end: float) -> None:
    if spans is not None and end > start:
        spans.append(Span(track, kind, start, end))


def _result(program: Program, state: dict[str, _ModelState], frames: int, clock: float, core_free: dict,
            spans: list[Span]) -> TimingResult:
    half = max(1, frames // 2)
    model_fps, first, steady = {}, {}, {}
    for name, s in state.items():
        window = s.done[half - 1:] if frames > 1 else s.done
        elapsed = window[-1] - window[0]
        model_fps[name] = (len(window) - 1) / elapsed if len(window) > 1 and elapsed > 0 else \
            (1.0 / s.done[0] if s.done and s.done[0] > 0 else 0.0)
        latencies = [d - t for d, t in zip(s.done, s.sent)]
        first[name] = 1000 * latencies[0]
        steady[name] = 1000 * statistics.median(latencies[half - 1:])
    total_time = max(max(s.done) for s in state.values())
    layers = []
    for name, s in state.items():
        for row in s.model.layers:
            key = (row["name"], 0)
            layers.append({
                "name": row["name"], "model": name, "chip": row["chip"], "kind": row["kind"], "cores": row["cores"],
                "start_cycle": int(round(s.start[key] * clock)), "end_cycle": int(round(s.end[key] * clock)),
                "active_fraction": round(s.busy[row["name"]] / total_time, 6) if total_time else 0.0,
                "macs": row.get("macs", 0), "ops": row.get("ops", 0), "weight_bytes": row.get("weight_bytes", 0),
                "compute_us": round(float(row["cycles"]) / clock * 1e6, 4),
                "data_us": round((s.end[key] - s.start[key]) * 1e6 - float(row["cycles"]) / clock * 1e6, 4),
            })
    busy_by_layer = {(l["model"], l["name"]): l["active_fraction"] for l in layers}
    utilization = {}
    for s in state.values():
        for row in s.model.layers:
            for k in range(int(row["cores"])):
                utilization[f"{row['chip']}/{row['kind']}/{row['first_core'] + k}"] = busy_by_layer[(s.model.name, row["name"])]
    return TimingResult(frames, sum(model_fps.values()), model_fps, first, steady, layers, utilization, spans,
                        total_time)
