"""The unit-timeline simulator: a partitioned, scheduled model on the platform's units, frame after frame.

Inside an NPU subgraph each layer's tiles go LOAD -> compute -> STORE through one shared DDR channel (loads
and stores queue behind each other: contention), double-buffered plans prefetch the next tile while the
current one computes, single-buffered ones do not; the layer overhead opens each layer on its unit; a
layer's weights loaded ahead (``LayerPlan.prefetch_bytes``) take the DDR channel's idle gaps from the
opening of the layer ``prefetch_depth`` back, and what does not fit those gaps loads with the first tile. This
adds what the cost model (``schedule.py``) leaves out: pipeline fill and drain of each layer's tiles and
load/store contention. Around the subgraphs, frames flow through stages: NPU subgraphs on the NPU cores
(a batch of ``actual_batch_size`` frames per job), host subgraphs on the Arm cores or the DSP (a DSP that
``shares_npu`` takes turns with the NPU), and each NPU<->host hand-over (into or out of an NPU subgraph,
the model's input and output included) costs ``hw.crossing`` on the Arm: one synchronisation and every
crossing tensor's bytes; each batch also pays the runtime's fixed ``crossing.call_us`` on the Arm. With
frames in flight, the steady-state period gives FPS; one batch alone gives the latency and the unit
timeline. In the steady state the stages that move bytes through the one DDR share it: NPU jobs (their
loads and stores), crossings (the host reads one side and writes the converted copy) and host subgraphs
(their layers' float tensors, read and written).

``simulate(...)`` returns a ``Timeline``; ``Timeline.record()`` is perf.json's content (fields documented
on the class). ``separated_by`` names the effect that puts simulation and cost model more than 10% apart.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import onnx

from accelbuild.targets.npu.graph_info import GraphInfo
from accelbuild.targets.npu.hardware import NpuHardware
from accelbuild.targets.npu.partition import Partition, Subgraph
from accelbuild.targets.npu.schedule import AHEAD_LAYERS, LayerPlan, Schedule, host_seconds

AGREEMENT_TOLERANCE = 0.10
_FLOAT_BYTES = 4
_STEADY_BATCHES = 24
_DDR_BINS = 50


@dataclass(frozen=True)
class Interval:
    """One unit busy, in microseconds from the start of a batch alone."""

    unit: str
    start_us: float
    end_us: float
    label: str
    ddr_bytes: int = 0

    def record(self) -> dict[str, Any]:
        return {"unit": self.unit, "start_us": round(self.start_us, 3), "end_us": round(self.end_us, 3),
                "label": self.label, "ddr_bytes": self.ddr_bytes}


@dataclass(frozen=True)
class Stage:
    """One step of a frame's trip: a subgraph or a crossing, on a resource, for one batch."""

    name: str
    resource: str          # "npu", "arm", "dsp"
    seconds: float         # one batch, alone
    cost_seconds: float    # what the cost model says for it
    ddr_bytes: int         # DDR traffic of an NPU stage
    host_bytes: int = 0    # DDR traffic of a host stage: a crossing's two copies, a host subgraph's tensors


@dataclass
class Timeline:
    """The simulation's results.

    record fields (perf.json): ``fps`` (steady state, ``frames_in_flight`` frames in flight), ``latency_ms``
    (one batch alone, end to end: crossings, NPU and host subgraphs), ``batch_size`` (frames per NPU job),
    ``frames_in_flight``, ``cost_model_fps`` / ``cost_model_latency_ms`` (the same from the schedules'
    cycles and the resource bounds, no pipeline effects), ``agreement`` (fps / cost_model_fps),
    ``separated_by`` (``None`` when within 10%, else the largest effect), ``effects`` (each effect's
    relative FPS change: tile_fill_drain, ddr_contention, frames_in_flight), ``ddr_bytes_per_frame``,
    ``ddr`` (Temporal Statistics: ``{"bin_us", "gbps": [...]}``, DDR bandwidth over one batch alone),
    ``units`` (the timeline's unit names, in display order), ``intervals`` (``Interval.record()`` each),
    ``stages`` (name, resource, ms of each stage of one batch).
    """

    fps: float
    latency_ms: float
    batch_size: int
    frames_in_flight: int
    cost_model_fps: float
    cost_model_latency_ms: float
    separated_by: str | None
    effects: dict[str, float]
    ddr_bytes_per_frame: float
    ddr_bin_us: float
    ddr_gbps: list[float]
    units: list[str]
    intervals: list[Interval] = field(repr=False)
    stages: list[Stage] = field(repr=False)

    @property
    def agreement(self) -> float:
        return self.fps / self.cost_model_fps if self.cost_model_fps else 1.0

    def record(self) -> dict[str, Any]:
        return {"fps": round(self.fps, 3), "latency_ms": round(self.latency_ms, 4), "batch_size": self.batch_size,
                "frames_in_flight": self.frames_in_flight, "cost_model_fps": round(self.cost_model_fps, 3),
                "cost_model_latency_ms": round(self.cost_model_latency_ms, 4),
                "agreement": round(self.agreement, 4), "separated_by": self.separated_by,
                "effects": {k: round(v, 4) for k, v in self.effects.items()},
                "ddr_bytes_per_frame": round(self.ddr_bytes_per_frame),
                "ddr": {"bin_us": round(self.ddr_bin_us, 3), "gbps": [round(v, 3) for v in self.ddr_gbps]},
                "units": self.units, "intervals": [i.record() for i in self.intervals],
                "stages": [{"name": s.name, "resource": s.resource, "ms": round(s.seconds * 1e3, 4)}
                           for s in self.stages]}


# ------------------------------------------------------------------------------ inside a subgraph
@dataclass
class _SubgraphRun:
    cycles: float
    intervals: list[tuple[str, float, float, str, int]]  # unit, start, end (cycles), label, bytes
    transfers: list[tuple[float, float, float]] = field(default_factory=list)  # start, end (cycles), bytes


def run_subgraph(sched: Schedule, hw: NpuHardware) -> _SubgraphRun:
    """One batch of one NPU subgraph, tile by tile, on its units and one shared DDR channel."""
    load_unit, store_unit = hw.memory.load_unit, hw.memory.store_unit
    dma = 0.0       # the DDR channel is free from here
    compute = 0.0   # the NPU (one layer at a time) is free from here
    intervals: list[tuple[str, float, float, str, int]] = []
    transfers: list[tuple[float, float, float]] = []
    busy: _Spans = []      # DDR channel spans since the earliest layer a prefetch may start in
    openings: list[float] = []  # when each earlier layer opened, newest last
    for plan in sched.layers:
        if plan.tiles == 0:
            continue
        first = compute
        ahead: _Spans = []
        if plan.prefetch_depth:
            ahead = _fill_gaps(sorted(busy), openings[-plan.prefetch_depth], first, plan.prefetch_cycles)
        ahead_cycles = sum(end - start for start, end in ahead)
        ahead_bytes = round(plan.prefetch_bytes * ahead_cycles / plan.prefetch_cycles) if ahead else 0
        loads, stores, dma, compute = _layer_tiles(plan, hw, dma, compute, ahead_cycles)
        name = plan.layer.name
        intervals.append((plan.layer.unit, first, compute, name, 0))
        if ahead_bytes:
            intervals.append((load_unit, ahead[0][0], ahead[-1][1], f"{name} (ahead)", ahead_bytes))
            transfers += _spread(ahead, ahead_bytes)
        if plan.load_bytes > ahead_bytes:
            intervals.append((load_unit, loads[0][0], loads[-1][1], name, plan.load_bytes - ahead_bytes))
            transfers += _spread(loads, plan.load_bytes - ahead_bytes)
        if plan.store_bytes:
            intervals.append((store_unit, stores[0][0], stores[-1][1], name, plan.store_bytes))
            transfers += _spread(stores, plan.store_bytes)
        openings = (openings + [first])[-AHEAD_LAYERS:]
        busy = [span for span in busy + ahead + loads + stores if span[1] > openings[0]]
    end = max([compute, dma] + [i[2] for i in intervals])
    return _SubgraphRun(end, intervals, transfers)


def _fill_gaps(busy: list[tuple[float, float]], start: float, end: float, cycles: float) -> list[tuple[float, float]]:
    """Up to ``cycles`` of DDR transfer in the channel's idle gaps between ``start`` and ``end`` (``busy``:
    sorted spans), earliest first."""
    spans: list[tuple[float, float]] = []
    at = start
    for s0, s1 in [*busy, (end, end)]:
        if cycles <= 0:
            break
        gap_end = min(s0, end)
        if gap_end > at:
            take = min(cycles, gap_end - at)
            spans.append((at, at + take))
            cycles -= take
        at = max(at, s1)
        if at >= end:
            break
    return spans


def _spread(spans: list[tuple[float, float]], nbytes: int) -> list[tuple[float, float, float]]:
    """A layer's bytes over the DDR channel's spans that carried them, in proportion to their lengths."""
    total = sum(end - start for start, end in spans)
    if total <= 0:
        return []
    return [(start, end, nbytes * (end - start) / total) for start, end in spans if end > start]


_Spans = list[tuple[float, float]]


def _layer_tiles(plan: LayerPlan, hw: NpuHardware, dma: float, compute: float,
                 loaded_ahead: float = 0.0) -> tuple[_Spans, _Spans, float, float]:
    """One layer's tiles: (load spans, store spans, DDR channel free at, NPU free at).

    Weights always load one tile ahead (their own buffer); feature maps too when double-buffered, else a
    tile's features load after the previous tile's store. Loads and stores share the DDR channel in the
    order they are issued; compute waits for its tile's loads and the previous tile. ``loaded_ahead``:
    cycles of this layer's weights already loaded during earlier layers.
    """
    n = plan.tiles
    weight_total = plan.load_cycles * (plan.weight_load_bytes / plan.load_bytes) if plan.load_bytes else 0.0
    weight = max(0.0, weight_total - loaded_ahead) / n
    feature = (plan.load_cycles - weight_total) / n
    store = plan.store_cycles / n
    work = (plan.compute_cycles + plan.stall_cycles) / n + hw.tile_overhead_cycles  # the unit waits on its DMA
    opened = compute
    compute += hw.layer_overhead(hw.unit(plan.layer.unit))
    loads: _Spans = []
    stores: _Spans = []
    computes: _Spans = []
    ready: list[float] = []

    def issue(after: float, cycles: float) -> tuple[float, float]:
        nonlocal dma
        start = max(dma, after)
        dma = start + cycles
        return start, dma

    loads.append(issue(opened, weight + feature))
    ready.append(dma)
    for i in range(n):
        ahead: tuple[float, float] | None = None
        if i + 1 < n:  # the next tile's weights (and features, double-buffered) while this one computes
            ahead = issue(computes[i - 1][1] if i >= 1 else opened,
                          weight + feature if plan.double_buffered else weight)
            loads.append(ahead)
        start = max(ready[i], compute)
        compute = start + work
        computes.append((start, compute))
        stores.append(issue(compute, store))
        if ahead is not None:
            if plan.double_buffered:
                ready.append(ahead[1])
            else:
                features = issue(stores[-1][1], feature)
                loads.append(features)
                ready.append(max(ahead[1], features[1]))
    return loads, stores, dma, compute


# ------------------------------------------------------------------------------------- whole model
def simulate(part: Partition, schedules: Mapping[int, Schedule], hw: NpuHardware, host: str = "arm", *,
             batches_in_flight: int | None = None, model: onnx.ModelProto | None = None) -> Timeline:
    """Simulate the partitioned model. ``schedules`` maps each NPU subgraph's id to its schedule;
    ``host`` is ``offload.host``; ``model`` (the partitioned one) prices the host layers (default: each
    host subgraph's own model); ``batches_in_flight`` (default: NPU cores + 2) batches of
    ``actual_batch_size`` frames are in flight in the steady state."""
    batch = max((s.actual_batch_size for s in schedules.values()), default=1)
    runs = {sid: run_subgraph(s, hw) for sid, s in schedules.items()}
    stages, placed, transfers = _stages(part, schedules, runs, hw, host, batch, model)
    in_flight = batches_in_flight or (hw.cores + 2)
    bandwidth = hw.memory.effective_ddr_bytes_per_second
    servers = _servers(hw, host)
    fps = _steady_fps(stages, servers, in_flight, batch, bandwidth, contention=True)
    latency = sum(s.seconds for s in stages)
    cost_fps = _bound_fps(stages, servers, batch, bandwidth)
    effects = {
        "tile_fill_drain": _ratio(_steady_fps(stages, servers, 10 ** 4, batch, bandwidth, contention=False),
                                  _steady_fps([_as_cost(s) for s in stages], servers, 10 ** 4, batch, bandwidth,
                                              contention=False)),
        "ddr_contention": _ratio(fps, _steady_fps(stages, servers, in_flight, batch, bandwidth, contention=False)),
        "frames_in_flight": _ratio(_steady_fps(stages, servers, in_flight, batch, bandwidth, contention=False),
                                   _steady_fps(stages, servers, 10 ** 4, batch, bandwidth, contention=False)),
    }
    separated = None
    if cost_fps and abs(fps / cost_fps - 1) > AGREEMENT_TOLERANCE:
        separated = max(sorted(effects), key=lambda k: abs(effects[k]))
    traffic = sum(s.ddr_bytes for s in stages)
    bin_us, gbps = _ddr_profile(transfers, latency)
    units = list(hw.timeline) + [hw.arm.name] + ([hw.dsp.name] if hw.dsp is not None and host == "dsp" else [])
    return Timeline(fps, latency * 1e3, batch, in_flight * batch, cost_fps,
                    sum(s.cost_seconds for s in stages) * 1e3, separated, effects, traffic / batch, bin_us, gbps,
                    units, sorted(placed, key=lambda i: (i.start_us, i.unit, i.label)), stages)


def _ratio(a: float, b: float) -> float:
    return a / b - 1 if b else 0.0


def _as_cost(stage: Stage) -> Stage:
    return Stage(stage.name, stage.resource, stage.cost_seconds, stage.cost_seconds, stage.ddr_bytes, stage.host_bytes)


def _servers(hw: NpuHardware, host: str) -> dict[str, int]:
    servers = {"npu": hw.cores, "arm": hw.arm.cores}
    if hw.dsp is not None and not hw.dsp.shares_npu:
        servers["dsp"] = hw.dsp.cores
    return servers


def _stages(part: Partition, schedules: Mapping[int, Schedule], runs: Mapping[int, _SubgraphRun],
            hw: NpuHardware, host: str, batch: int,
            model: onnx.ModelProto | None) -> tuple[list[Stage], list[Interval], list[tuple[float, float, float]]]:
    unit_of = {t: s.unit for s in part.subgraphs for t in s.outputs}
    info = GraphInfo.of(model) if model is not None else None
    processor = hw.host("dsp" if host == "dsp" else "arm")
    host_resource = "npu" if host == "dsp" and processor.shares_npu else ("dsp" if host == "dsp" else "arm")
    stages: list[Stage] = []
    placed: list[Interval] = []
    transfers: list[tuple[float, float, float]] = []  # DDR channel spans of one batch alone: us, us, bytes
    clock = 0.0

    def add(stage: Stage, unit: str | None, label: str) -> None:
        """Append a stage of one batch alone; ``unit`` None: its intervals are placed by the caller."""
        nonlocal clock
        stages.append(stage)
        if stage.seconds > 0 and unit is not None:
            placed.append(Interval(unit, clock * 1e6, (clock + stage.seconds) * 1e6, label))
        clock += stage.seconds

    readers: dict[str, set[str]] = {}
    for s in part.subgraphs:
        for t in s.inputs:
            readers.setdefault(t, set()).add(s.unit)
    model_outputs = set(_graph_outputs(part))

    def hand_over(sub: Subgraph, tensors: list[str], direction: str) -> None:
        """The Arm's stage handing ``tensors`` into or out of the NPU subgraph ``sub`` (none: no stage)."""
        counts = _elements(sub, tensors)
        seconds = hw.crossing.seconds([n * _FLOAT_BYTES for n in counts]) * batch
        if seconds:  # a float copy and an 8-bit one (a 16-bit tensor's second byte is not counted)
            traffic = sum(counts) * (_FLOAT_BYTES + 1) * batch
            add(Stage(f"sg{sub.id} {direction}", "arm", seconds, seconds, 0, traffic), hw.arm.name,
                f"sg{sub.id} crossing {direction}")

    if hw.crossing.call_us:  # the runtime's fixed share of one inference call, on the Arm, once per batch
        seconds = hw.crossing.call_us * 1e-6
        add(Stage("call", "arm", seconds, seconds, 0), hw.arm.name, "inference call")
    for sub in part.subgraphs:
        if sub.unit == "npu":
            crossing_in = [t for t in sub.inputs if unit_of.get(t, "input") != "npu"]
            crossing_out = [t for t in sub.outputs if t in model_outputs or readers.get(t, set()) - {"npu"}]
            hand_over(sub, crossing_in, "in")
            sched, run = schedules[sub.id], runs[sub.id]
            jobs = math.ceil(batch / sched.actual_batch_size)
            seconds = jobs * run.cycles / hw.clock_hz
            start = clock
            add(Stage(f"sg{sub.id}", "npu", seconds, jobs * sched.seconds, jobs * sched.ddr_bytes), None, "")
            for unit, s0, s1, label, nbytes in run.intervals:
                placed.append(Interval(unit, (start + s0 / hw.clock_hz) * 1e6, (start + s1 / hw.clock_hz) * 1e6,
                                       label, nbytes))
            transfers += [((start + s0 / hw.clock_hz) * 1e6, (start + s1 / hw.clock_hz) * 1e6, nbytes)
                          for s0, s1, nbytes in run.transfers]
            hand_over(sub, crossing_out, "out")
        else:
            sub_info = info or GraphInfo.of(sub.model)
            seconds = host_seconds(sub_info, sub.nodes, processor) * batch
            traffic = _host_traffic(sub_info, sub.nodes) * batch
            add(Stage(f"sg{sub.id}", host_resource, seconds, seconds, 0, traffic), processor.name, f"sg{sub.id}")
    return stages, placed, transfers


def _graph_outputs(part: Partition) -> list[str]:
    read = {t for s in part.subgraphs for t in s.inputs}
    return [t for s in part.subgraphs for t in s.outputs if t not in read]


def _elements(sub: Subgraph, tensors: list[str]) -> list[int]:
    """Each tensor's elements, from the subgraph's inputs and outputs (unknown dimensions count 1)."""
    values = {v.name: v for v in [*sub.model.graph.input, *sub.model.graph.output]}
    counts = []
    for name in tensors:
        dims = values[name].type.tensor_type.shape.dim if name in values else []
        counts.append(math.prod(d.dim_value if d.dim_value > 0 else 1 for d in dims))
    return counts


def _host_traffic(info: GraphInfo, layers: list[str]) -> int:
    """DDR bytes of one frame of host layers: each layer reads its run-time inputs and writes its outputs as
    floats (an elementwise layer over a feature map larger than the cores' caches streams it through DDR)."""
    total = 0
    for name in layers:
        node = info.node(name)
        tensors = [t for t in [*node.input, *node.output] if t and not info.is_constant(t)]
        total += sum(info.elements(t) for t in tensors) * _FLOAT_BYTES
    return total


def _steady_fps(stages: list[Stage], servers: Mapping[str, int], in_flight: int, batch: int, bandwidth: float, *,
                contention: bool) -> float:
    """Frames per second once the pipeline is full: ``in_flight`` batches circulate (a new one enters as one
    leaves), each stage waits for its resource, and every resource serves the stages ready on it in the
    order they became ready, so one frame's NPU subgraph runs while another's host subgraph does.
    ``contention``: a stage that moves bytes through DDR while others do takes at least its equal share of
    ``bandwidth`` for them (NPU jobs on several cores, and the Arm's crossings and host layers beside them)."""
    if not stages or all(s.seconds == 0 for s in stages):
        return 0.0
    free = {name: [0.0] * count for name, count in servers.items()}
    busy: list[tuple[float, float]] = []   # stages moving DDR bytes: (start, end), the latest ones
    count = min(400, max(_STEADY_BATCHES, 12 * in_flight))
    ready: list[tuple[float, int, int]] = [(0.0, job, 0) for job in range(min(in_flight, count))]
    released = len(ready)
    done: list[float] = []
    while ready:
        t, job, index = heapq.heappop(ready)
        stage = stages[index]
        pool = free[stage.resource]
        start = max(t, pool[0])
        seconds = stage.seconds
        nbytes = stage.ddr_bytes + stage.host_bytes
        if contention and nbytes:
            overlapping = 1 + sum(1 for s0, s1 in busy if s0 <= start < s1)
            seconds = max(seconds, overlapping * nbytes / bandwidth)
            busy.append((start, start + seconds))
            busy = busy[-4 * sum(servers.values()):]
        end = start + seconds
        heapq.heapreplace(pool, end)
        if index + 1 < len(stages):
            heapq.heappush(ready, (end, job, index + 1))
            continue
        done.append(end)
        if released < count:
            heapq.heappush(ready, (end, released, 0))
            released += 1
    done.sort()
    # steady state: after the first third, before the last batches leave a draining (emptier) pipeline,
    # over whole rounds of ``in_flight`` batches (they finish in bunches)
    low = count // 3
    rounds = max(1, (count - 1 - in_flight - low) // in_flight)
    high = min(count - 1, low + rounds * in_flight)
    period = (done[high] - done[low]) / (high - low)
    return batch / period if period > 0 else 0.0


def _bound_fps(stages: list[Stage], servers: Mapping[str, int], batch: int, bandwidth: float) -> float:
    """The cost model's throughput: the busiest resource (and the DDR) sets the period."""
    load: dict[str, float] = {}
    for stage in stages:
        load[stage.resource] = load.get(stage.resource, 0.0) + stage.cost_seconds
    period = max([load[r] / servers[r] for r in load] + [sum(s.ddr_bytes for s in stages) / bandwidth])
    return batch / period if period > 0 else 0.0


def _ddr_profile(transfers: list[tuple[float, float, float]], latency: float) -> tuple[float, list[float]]:
    """DDR bandwidth in bins over one batch alone, from the channel's transfers (one at a time, so a bin
    never shows more than the channel carries)."""
    if latency <= 0:
        return 0.0, []
    span_us = latency * 1e6
    bin_us = span_us / _DDR_BINS
    bins = [0.0] * _DDR_BINS
    for start_us, end_us, nbytes in transfers:
        if not nbytes or end_us <= start_us:
            continue
        rate = nbytes / (end_us - start_us)  # bytes per us
        first = int(start_us // bin_us)
        last = min(_DDR_BINS - 1, int(end_us // bin_us))
        for b in range(first, last + 1):
            overlap = min(end_us, (b + 1) * bin_us) - max(start_us, b * bin_us)
            if overlap > 0:
                bins[b] += rate * overlap
    return bin_us, [nbytes / (bin_us * 1e3) for nbytes in bins]  # bytes per bin / (bin in ns) = GB/s
