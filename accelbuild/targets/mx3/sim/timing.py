"""Timing simulation: frames flowing through a DFP's placement, event by event.

Each layer owns the cores the program gives it (a core shared by two layers serialises them: that is
how ALU-core sharing shows up) and takes ``cycles / clock`` per frame. The buffering is derived from the
program and the profile as row-streaming dataflow (``sim/buffers.py``); links are shared between models
by the cost model's rules (``accelbuild/targets/mx3/sharing.py``). What the cost model leaves out and
this model adds:

- pipeline fill: a frame enters layer by layer; a layer may start once its producers have made the
  input rows its kernel needs (``start_fraction``) and finishes no earlier than that share of its time
  after its last input arrived;
- back-pressure through row buffers: a producer starts frame f only when each consumer has taken in the
  rows before (``edge_frames``); the host starts a frame's input transfer so its first rows arrive as the
  first layers are ready, keeps at most ``frames_in_flight`` transfers per direction on the interface,
  and the last layers stall while the output port still holds the previous frame;
- link contention within a model: tensors crossing the same chip boundary queue behind each other;
- per-frame jitter of host transfers, drawn from a seeded generator (uniform within +-``host_jitter``).

Results: FPS per model and total (from the second half of the frames, the steady state), first-frame and
steady latency, per-core utilisation, per-layer timings and link activity for the reports, and per
model the resource that binds it (``sim/binding.py``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelbuild.targets.mx3 import sharing
from accelbuild.targets.mx3.sim import binding as bind
from accelbuild.targets.mx3.sim import buffers
from accelbuild.targets.mx3.sim.program import Program, ProgramModel

DEFAULT_JITTER = 0.05


@dataclass
class Span:
    track: str
    kind: str
    start: float
    end: float
    nbytes: float = 0.0   # what a transfer moved (host and chip links; 0 for a layer)
    frame: int = -1


@dataclass
class TimingResult:
    frames: int
    fps: float                      # sum of the models' frame rates (frames of different models)
    model_fps: dict[str, float]
    first_latency_ms: dict[str, float]
    steady_latency_ms: dict[str, float]
    layers: list[dict[str, Any]]
    core_utilization: dict[str, float]
    spans: list[Span] = field(default_factory=list)
    duration_s: float = 0.0
    binding: dict[str, dict[str, Any]] = field(default_factory=dict)  # per model: what sets its pace


class _Link:
    """A FIFO resource: transfers queue behind each other."""

    def __init__(self, bytes_per_second: float, latency_s: float) -> None:
        self.rate = bytes_per_second
        self.latency = latency_s
        self.free = 0.0

    def duration(self, nbytes: float, stretch: float = 1.0) -> float:
        return nbytes / self.rate * stretch if self.rate > 0 else 0.0

    def send(self, ready: float, nbytes: float, stretch: float = 1.0) -> tuple[float, float]:
        start = max(self.free, ready)
        self.free = start + self.duration(nbytes, stretch)
        return start, self.free + self.latency


def simulate(program: Program, frames: int, seed: int = 0, jitter: float | None = None,
             record_frames: int = 3) -> TimingResult:
    hw = program.hardware
    clock = float(hw["clock_mhz"]) * 1e6
    if jitter is None:
        jitter = float((program.simcfg or {}).get("host_jitter", DEFAULT_JITTER))
    shares = buffers.allocation(program)
    slots = buffers.interface(hw).frames_in_flight
    stretch = 1 + jitter * np.random.default_rng(seed).uniform(-1, 1, size=(frames, len(program.models), 2))
    core_free: dict[tuple[int, str, int], float] = {}
    spans: list[Span] = []
    state = {m.name: _ModelState(m, hw, clock, shares.bandwidth[m.name], core_free) for m in program.models}
    index = {m.name: i for i, m in enumerate(program.models)}
    groups = [list(program.models)] if program.share_input else [[m] for m in program.models]
    for group in groups:
        members = [state[m.name] for m in group]
        feed = _Feed(members[0].host_in, slots, max(m.input_bytes for m in group))
        for frame in range(frames):
            # layers: the first frames (the timeline); transfers: every frame (bandwidth in the steady state)
            record = _Recorder(spans, frame, layers=frame < record_frames)
            feed.send(frame, members, [stretch[frame, index[s.model.name], 0] for s in members], record)
            for s in members:
                s.run_frame(frame, feed, slots, stretch[frame, index[s.model.name], 1], record)
    return _result(program, state, frames, clock, spans, shares, groups)


class _Feed:
    """The host's input transfers of one stream (one model, or every model with share_input)."""

    def __init__(self, link: _Link, slots: int, nbytes: float) -> None:
        self.link, self.slots, self.nbytes = link, slots, nbytes
        self.started: list[float] = []
        self.finished: list[float] = []  # transfer done and its slot released (wire time + latency)
        self.start = self.transfer = 0.0

    def send(self, f: int, members: list[_ModelState], stretches: list[float], spans: _Recorder) -> None:
        nominal = self.link.duration(self.nbytes)
        # just in time: the first rows arrive when the first layers can take them
        target = max(s.input_target(f, nominal) for s in members) - self.link.latency
        ready = max(0.0, target, self.finished[f - self.slots] if f >= self.slots else 0.0)
        self.start, _ = self.link.send(ready, self.nbytes, max(stretches))
        self.transfer = self.link.free - self.start
        self.started.append(self.start)
        self.finished.append(self.link.free + self.link.latency)
        for i, s in enumerate(members):  # one transfer: its bytes counted once (with share_input, the first's)
            _record(spans, f"host in · {s.model.name}", "host_in", self.start, self.link.free,
                    self.nbytes if i == 0 else 0.0)


@dataclass(frozen=True, slots=True)
class _Layer:
    """One layer's constants, looked up once per simulation instead of once per frame."""

    row: dict[str, Any]
    name: str
    fraction: float  # start_fraction
    duration: float  # seconds per frame
    first: bool  # fed by the host
    inputs: tuple[tuple[str, list[float], list[float], tuple[int, ...]], ...]  # (producer, its per-frame
    # start and end times, the chip boundaries its tensor crosses)
    cores: tuple[tuple[int, str, int], ...]
    readers: tuple[tuple[list[float], list[float], float], ...]  # (a consumer's per-frame start and end
    # times, the frames its row buffer holds)
    starts: list[float]  # this layer's, per frame
    ends: list[float]
    sends: tuple[tuple[int, float], ...]  # (chip boundary, the frames its sender holds)
    port: float | None  # frames the output port holds, for a model output layer


class _ModelState:
    def __init__(self, model: ProgramModel, hw: dict, clock: float, bandwidth: dict[str, float],
                 core_free: dict) -> None:
        self.model, self.clock, self.core_free = model, clock, core_free
        self.rows = {row["name"]: row for row in model.layers}
        self.consumers: dict[str, list[str]] = {name: [] for name in self.rows}
        for row in model.layers:
            for source in row.get("inputs", []):
                self.consumers.setdefault(source, []).append(row["name"])
        buffering = buffers.buffering(model, hw)
        self.edges, self.ports = buffering.edge_frames, buffering.port_frames
        self.sends: dict[str, list[tuple[int, float]]] = {}  # producer -> (chip boundary, frames its sender holds)
        for (source, boundary), frames in sorted(buffering.send_frames.items()):
            self.sends.setdefault(source, []).append((boundary, frames))
        self.cores = {row["name"]: [(row["chip"], row["kind"], row["first_core"] + k) for k in range(int(row["cores"]))]
                      for row in model.layers}
        latency = float(hw["host_link"]["latency_us"]) * 1e-6
        self.host_in = _Link(bandwidth[sharing.HOST_IN], latency)
        self.host_out = _Link(bandwidth[sharing.HOST_OUT], latency)
        self.links = self._tensor_channels(hw, bandwidth)
        self.start: dict[str, list[float]] = {name: [] for name in self.rows}
        self.end: dict[str, list[float]] = {name: [] for name in self.rows}
        self.sent: list[float] = []
        self.done: list[float] = []
        self.out_start: list[float] = []
        self.out_finished: list[float] = []  # output transfer done and its slot released
        self.in_time: list[float] = []
        self.out_time: list[float] = []
        self.busy: dict[str, float] = {name: 0.0 for name in self.rows}
        self.crossings: dict[tuple[str, int], list[tuple[float, float]]] = {}  # per frame: start, end
        self.layers = [self._constants(row) for row in model.layers]

    def _constants(self, row: dict[str, Any]) -> _Layer:
        name = row["name"]
        inputs = []
        for source in row.get("inputs", []):
            low, high = sorted((int(self.rows[source]["chip"]), int(row["chip"])))
            inputs.append((source, self.start[source], self.end[source], tuple(range(low, high))))
        return _Layer(row, name, float(row.get("start_fraction", 1.0)), float(row["cycles"]) / self.clock,
                      not row.get("inputs"), tuple(inputs), tuple(self.cores[name]),
                      tuple((self.start[r], self.end[r], self.edges[(name, r)]) for r in self.consumers[name]),
                      self.start[name], self.end[name], tuple(self.sends.get(name, ())), self.ports.get(name))

    def _tensor_channels(self, hw: dict, bandwidth: dict[str, float]) -> dict[tuple[str, int], _Link]:
        """One channel per tensor and chip boundary it crosses: a link interleaves the tensors crossing it,
        each at the share of the model's bandwidth there that its bytes are of the boundary's traffic."""
        latency = float(hw["chip_link"]["latency_us"]) * 1e-6
        crossing: dict[int, dict[str, float]] = {}
        for row in self.model.layers:
            for source in row.get("inputs", []):
                low, high = sorted((int(self.rows[source]["chip"]), int(row["chip"])))
                for boundary in range(low, high):
                    crossing.setdefault(boundary, {})[source] = float(self.rows[source].get("out_bytes", 0))
        channels = {}
        for boundary, tensors in crossing.items():
            total = sum(tensors.values())
            rate = bandwidth[sharing.chip_link(boundary)]
            for source, nbytes in tensors.items():
                channels[(source, boundary)] = _Link(rate * nbytes / total if total > 0 else rate, latency)
        return channels

    def _earliest(self, layer: _Layer, f: int) -> float:
        """When ``layer`` could start frame f as far as its cores and its buffers downstream allow (the
        hot loop of the simulation: times are never negative, so max() starts from 0)."""
        core_free = self.core_free
        when = 0.0
        for core in layer.cores:
            free = core_free.get(core, 0.0)
            if free > when:
                when = free
        when = _readers_reached(layer.readers, f, when)
        for boundary, frames in layer.sends:
            when = max(when, self._link_position(layer.name, boundary, f - frames))
        if layer.port is not None:
            when = max(when, self._out_position(f - layer.port))
        return when

    def _out_position(self, position: float) -> float:
        """The time the host had read the output stream up to ``position`` (frame + fraction)."""
        frame = math.floor(position + 1e-9)
        if frame < 0:
            return 0.0
        return self.out_start[frame] + max(0.0, position - frame) * self.out_time[frame]

    def _link_position(self, source: str, boundary: int, position: float) -> float:
        """The time the link over ``boundary`` reached stream position ``position`` of ``source``'s tensor."""
        frame = math.floor(position + 1e-9)
        if frame < 0:
            return 0.0
        start, end = self.crossings[(source, boundary)][frame]
        return start + max(0.0, position - frame) * (end - start)

    def input_target(self, f: int, transfer: float) -> float:
        """The latest time this frame's input may start on the wire without delaying a first layer."""
        return min((self._earliest(layer, f) - layer.fraction * transfer for layer in self.layers if layer.first),
                   default=0.0)

    def run_frame(self, f: int, feed: _Feed, slots: int, stretch_out: float, spans: _Recorder) -> None:
        self.sent.append(feed.start)
        self.in_time.append(feed.transfer)
        arrive = feed.start + feed.link.latency
        for layer in self.layers:
            self._layer(layer, f, arrive, feed.transfer)
        for layer in reversed(self.layers):
            self._paced(layer, f, spans)
        last = max(self.end[name][f] for name, readers in self.consumers.items() if not readers)
        ready = max(last, self.out_finished[f - slots] if f >= slots else 0.0)
        out_start, done = self.host_out.send(ready, self.model.output_bytes, stretch_out)
        self.out_start.append(out_start)
        self.out_time.append(self.host_out.free - out_start)
        self.out_finished.append(done)
        _record(spans, f"host out · {self.model.name}", "host_out", out_start, self.host_out.free,
                self.model.output_bytes)
        self.done.append(done)

    def _paced(self, layer: _Layer, f: int, spans: _Recorder) -> None:
        """A layer cannot finish a frame before its consumers (and the links its output crosses) have taken
        in all but their buffer's share of it: its rows are paced by what comes after it."""
        name = layer.name
        end = _readers_reached(layer.readers, f + 1, layer.ends[f])
        for boundary, frames in layer.sends:
            end = max(end, self._link_position(name, boundary, f + 1 - frames))
        layer.ends[f] = end
        core_free = self.core_free
        for core in layer.cores:
            if end > core_free.get(core, 0.0):
                core_free[core] = end
        if spans.layers:
            row = layer.row
            _record(spans, f"chip {row['chip']} · {row['kind'].upper()} · {self.model.name}/{name}", "layer",
                    layer.starts[f], end)
        for boundary, _ in layer.sends:
            _record(spans, f"chip link {boundary}→{boundary + 1}", "chip_link", *self.crossings[(name, boundary)][f],
                    float(layer.row.get("out_bytes", 0)))

    def _layer(self, layer: _Layer, f: int, in_start: float, in_transfer: float) -> None:
        fraction, duration = layer.fraction, layer.duration
        if layer.first:
            first_ready, all_ready = in_start + fraction * in_transfer, in_start + in_transfer
        else:
            first_ready = all_ready = 0.0
        for source, starts, ends, boundaries in layer.inputs:
            s, e = starts[f], ends[f]
            first, last = s + fraction * (e - s), e
            for boundary in boundaries:  # rows cross as they are made, at the link's pace if slower
                link_start, link_end, latency = self._cross(source, f, boundary, s)
                first = max(first, link_start + fraction * (link_end - link_start)) + latency
                last = max(last, link_end) + latency
            if first > first_ready:  # max(), without the call: the simulation's hot loop
                first_ready = first
            if last > all_ready:
                all_ready = last
        earliest = self._earliest(layer, f)
        start = earliest if earliest > first_ready else first_ready
        end, filled = start + duration, all_ready + fraction * duration
        if filled > end:
            end = filled
        core_free = self.core_free
        for core in layer.cores:
            core_free[core] = end
        layer.starts.append(start)
        layer.ends.append(end)
        self.busy[layer.name] += duration

    def _cross(self, source: str, f: int, boundary: int, ready: float) -> tuple[float, float, float]:
        """(start, end, latency) of ``source``'s frame f on the link over chip boundary ``boundary``; a
        tensor crosses a boundary once per frame, whoever reads it."""
        link = self.links[(source, boundary)]
        times = self.crossings.setdefault((source, boundary), [])
        if len(times) == f:
            start, _ = link.send(ready, float(self.rows[source].get("out_bytes", 0)))
            times.append((start, link.free))
        start, end = times[f]
        return start, end, link.latency


def _readers_reached(readers: tuple[tuple[list[float], list[float], float], ...], f: int, when: float) -> float:
    """The latest of ``when`` and the times each reader reached stream position ``f`` less the frames its row
    buffer holds (frame + fraction consumed; before its first frame: never later than ``when``)."""
    for starts, ends, frames in readers:
        position = f - frames
        frame = math.floor(position + 1e-9)
        if frame >= 0:
            start = starts[frame]
            at = start + max(0.0, position - frame) * (ends[frame] - start)
            if at > when:
                when = at
    return when


@dataclass
class _Recorder:
    """Where one frame's spans go: transfers always, layers when ``layers``."""

    spans: list[Span]
    frame: int
    layers: bool


def _record(spans: _Recorder, track: str, kind: str, start: float, end: float, nbytes: float = 0.0) -> None:
    if end > start:
        spans.spans.append(Span(track, kind, start, end, nbytes, spans.frame))


def _result(program: Program, state: dict[str, _ModelState], frames: int, clock: float, spans: list[Span],
            shares: sharing.Allocation, groups: list[list[ProgramModel]]) -> TimingResult:
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
            start, end = s.start[row["name"]][0], s.end[row["name"]][0]
            layers.append({
                "name": row["name"], "model": name, "chip": row["chip"], "kind": row["kind"], "cores": row["cores"],
                "start_cycle": int(round(start * clock)), "end_cycle": int(round(end * clock)),
                "active_fraction": round(s.busy[row["name"]] / total_time, 6) if total_time else 0.0,
                "macs": row.get("macs", 0), "ops": row.get("ops", 0), "weight_bytes": row.get("weight_bytes", 0),
                "compute_us": round(float(row["cycles"]) / clock * 1e6, 4),
                "data_us": round((end - start) * 1e6 - float(row["cycles"]) / clock * 1e6, 4),
            })
    busy_by_layer = {(entry["model"], entry["name"]): entry["active_fraction"] for entry in layers}
    utilization = {}
    for s in state.values():
        for row in s.model.layers:
            for k in range(int(row["cores"])):
                utilization[f"{row['chip']}/{row['kind']}/{row['first_core'] + k}"] = busy_by_layer[(s.model.name, row["name"])]
    usage = {name: bind.Usage(s.model, s.in_time[half - 1:], s.out_time[half - 1:]) for name, s in state.items()}
    binding = bind.binding(program, usage, model_fps, shares, [[m.name for m in g] for g in groups])
    return TimingResult(frames, sum(model_fps.values()), model_fps, first, steady, layers, utilization, spans,
                        total_time, binding)
