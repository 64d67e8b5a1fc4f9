"""The one cost model of family npu, and the scheduler that uses it (the search and the reports share it).

A subgraph runs layer by layer (fused groups as one layer), each over the whole batch. For one layer:

    compute  = MACs x batch x f16 / (macs_per_cycle x efficiency x util)        (matrix unit)
             = element work x batch x f16 / (elements_per_cycle x efficiency)   (vector / pool / layout)
    DDR      = loaded bytes + stored bytes, over the effective DDR bandwidth (bytes per cycle)
    cycles   = max(compute + stall, DDR) + overhead       double-buffered tiles (DMA overlaps compute)
             = max(compute + stall, weight DDR) + feature DDR + overhead
                                                  single-buffered tiles (the whole feature buffer holds
                                                  data; only weights, in their own buffer, stream meanwhile)
    stall    = (1 - dma_overlap) x the DDR time of the bytes that move while the unit computes (all of them
               double-buffered, the weights single-buffered): the share of a transfer the unit waits on
               (SRAM ports the DMA and the unit share); 0 with the default ``npu.dma_overlap`` of 1
    overhead = layer_overhead_cycles + tiles x tile_overhead_cycles
               (a unit's own overhead_cycles in place of layer_overhead_cycles, where the profile sets one)

The DMA runs ahead for weights: a layer's first weight chunk loads while earlier layers' DMA is idle
(each layer's cycles minus its own DDR time, earliest first, not taken by an earlier prefetch), up to
``AHEAD_LAYERS`` layers back and as far as the weight buffer has room beside those layers' chunks. The
bytes (``prefetch_bytes``) still cross the DDR, but their time (``prefetch_cycles``) is spent in the
earlier layers' slack (``prefetch_depth`` layers back) and leaves the layer's own DDR term. Feature maps
never load ahead: a layer's input is usually written by the layer just before it.

``util`` is the share of the MAC array the layer's shape fills (reduction and output channels rounded up
to the array's alignment; a depthwise convolution keeps ``depthwise_efficiency`` of the ``align[0]`` reduction
lanes busy, ``large_depthwise_efficiency`` for a kernel larger than 3x3), times the layer's kernel-class
efficiency over ``efficiency`` where the profile gives one (``pointwise_efficiency``: 1x1 layers and Gemm;
``strided_efficiency``: strided dense convolutions; the product may exceed 1); ``f16`` the unit's bits16_factor
for a 16-bit layer. Loaded bytes are the layer's weights (once per batch when they fit the weight buffer) and
the inputs that are not on chip; stored bytes its output unless it stays on chip. When weights or feature
maps do not fit their SRAM share the layer is tiled and one of them is re-streamed: weights-stationary reads
the inputs once per weight chunk, features-stationary the weights once per feature tile. A double-buffered
plan gets half of each buffer, and the outputs kept on chip across it half the feature buffer.

The scheduler tries three bufferings (every layer double-buffered; only those whose feature maps fit half
the feature buffer; none) and ``compile_mode`` picks: latency the schedule with the fewest cycles (each
layer's plan: fewest cycles, then bytes), bandwidth the fewest DDR bytes (each plan: fewest bytes, then
cycles), balance the least cycles/min_cycles + bytes/min_bytes (each plan likewise).

``effort``: lazy (every layer double-buffered whatever the mode; one plan, weights-stationary; an output
stays on chip only for the next layer), normal (both tile orders; outputs stay on chip over their whole
live range where the budget has room, e.g. residual branches, chosen in order; then the rest of each chain
streams depth-first: an output read only by the next layer stays on chip in row bands, ``stream_band``,
when that fits half the layer's budget), hard (normal, and also choosing the largest outputs first; the
better schedule wins).

``batch_size`` is the desired batch; the actual one is the largest, up to it and the profile's max_batch,
whose largest layer's feature maps (inputs + output, x batch) fit the feature buffer.

Every field of ``Schedule.record()`` (schedule.json) is documented on ``LayerPlan`` and ``Schedule``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import onnx

from accelbuild.targets.npu.graph_info import GraphInfo
from accelbuild.targets.npu.hardware import NpuHardware, Processor
from accelbuild.targets.npu.layers import Layer, compute_cycles, element_work, layers_of

Effort = Literal["lazy", "normal", "hard"]
CompileMode = Literal["latency", "bandwidth", "balance"]
EFFORTS = ("lazy", "normal", "hard")
COMPILE_MODES = ("latency", "bandwidth", "balance")
AHEAD_LAYERS = 16  # how far back a layer's weights may start loading (the DMA's queue of layers)


@dataclass(frozen=True)
class LayerPlan:
    """One scheduled layer: how it is tiled and what it costs, for the whole batch.

    record fields: ``name`` (head node), ``unit`` (the profile unit that computes it), ``start_cycle`` /
    ``end_cycle`` (in the subgraph's sequential schedule, from 0), ``ddr_bytes`` (loaded + stored),
    ``compute_cycles`` (the unit busy), ``load_cycles`` / ``store_cycles`` (DDR transfer time of the loaded /
    stored bytes at the effective bandwidth), ``overhead_cycles``, ``load_bytes``, ``store_bytes``,
    ``weight_bytes`` (the layer's), ``weight_load_bytes`` (weights among the loaded bytes), ``tiles``, ``order`` (weights | features: what stays in SRAM while the other streams),
    ``double_buffered``, ``bound`` (compute | ddr | overhead: what sets its time), ``ops`` and ``fused``
    (the member nodes, head first), ``bits`` (8 or 16), ``prefetch_bytes`` / ``prefetch_cycles`` (weights
    among the loaded bytes that load during earlier layers, and their DDR time: not in this layer's),
    ``prefetch_depth`` (how many layers back the first of them loads; 0: none), ``stall_cycles`` (compute
    waiting on the layer's transfers: ``npu.dma_overlap`` below 1).
    """

    layer: Layer
    start_cycle: int
    end_cycle: int
    compute_cycles: int
    load_bytes: int
    store_bytes: int
    load_cycles: int
    store_cycles: int
    overhead_cycles: int
    tiles: int
    order: Literal["weights", "features"]
    double_buffered: bool
    weight_load_bytes: int = 0  # the part of load_bytes that is weights
    prefetch_bytes: int = 0     # the part of weight_load_bytes loaded during earlier layers
    prefetch_cycles: int = 0
    prefetch_depth: int = 0     # layers back where that load starts
    stall_cycles: int = 0       # the unit waiting on its own transfers (npu.dma_overlap < 1)

    @property
    def cycles(self) -> int:
        return self.end_cycle - self.start_cycle

    @property
    def own_ddr_cycles(self) -> int:
        """DDR time spent within this layer's cycles (the prefetched weights loaded earlier)."""
        return max(0, self.load_cycles + self.store_cycles - self.prefetch_cycles)

    @property
    def ddr_bytes(self) -> int:
        return self.load_bytes + self.store_bytes

    @property
    def bound(self) -> str:
        ddr = self.own_ddr_cycles
        if self.overhead_cycles >= max(self.compute_cycles, ddr):
            return "overhead"
        return "compute" if self.compute_cycles >= ddr else "ddr"

    def record(self) -> dict[str, Any]:
        return {"name": self.layer.name, "unit": self.layer.unit, "start_cycle": self.start_cycle,
                "end_cycle": self.end_cycle, "ddr_bytes": self.ddr_bytes, "compute_cycles": self.compute_cycles,
                "load_cycles": self.load_cycles, "store_cycles": self.store_cycles,
                "overhead_cycles": self.overhead_cycles, "load_bytes": self.load_bytes,
                "store_bytes": self.store_bytes, "weight_bytes": self.layer.weight_bytes,
                "weight_load_bytes": self.weight_load_bytes, "prefetch_bytes": self.prefetch_bytes,
                "prefetch_cycles": self.prefetch_cycles, "prefetch_depth": self.prefetch_depth,
                "stall_cycles": self.stall_cycles, "tiles": self.tiles,
                "order": self.order, "double_buffered": self.double_buffered, "bound": self.bound,
                "ops": list(self.layer.ops), "fused": list(self.layer.members), "bits": self.layer.bits}


@dataclass(frozen=True)
class Schedule:
    """The static schedule of one NPU subgraph.

    record fields (schedule.json, per subgraph): ``desired_batch_size`` (asked), ``actual_batch_size``
    (built: see the module docstring), ``cycles`` (one batch, at ``clock_mhz``), ``clock_mhz``,
    ``effort``, ``compile_mode``, ``ddr_bytes`` (one batch), ``layers`` (``LayerPlan.record()`` each).
    """

    desired_batch_size: int
    actual_batch_size: int
    cycles: int
    clock_mhz: int
    effort: Effort
    compile_mode: CompileMode
    layers: tuple[LayerPlan, ...]

    @property
    def ddr_bytes(self) -> int:
        return sum(plan.ddr_bytes for plan in self.layers)

    @property
    def seconds(self) -> float:
        """One batch."""
        return self.cycles / (self.clock_mhz * 1e6)

    def record(self) -> dict[str, Any]:
        return {"desired_batch_size": self.desired_batch_size, "actual_batch_size": self.actual_batch_size,
                "cycles": self.cycles, "clock_mhz": self.clock_mhz, "effort": self.effort,
                "compile_mode": self.compile_mode, "ddr_bytes": self.ddr_bytes,
                "layers": [plan.record() for plan in self.layers]}


def schedule(model: onnx.ModelProto | GraphInfo, hw: NpuHardware, effort: Effort = "normal",
             compile_mode: CompileMode = "latency", batch_size: int = 1, *, default_bits: int = 8) -> Schedule:
    """Schedule one NPU subgraph (a standalone model: float, or QDQ with Q/DQ folded into its layers)."""
    if effort not in EFFORTS:
        raise ValueError(f"effort must be one of {', '.join(EFFORTS)}, not {effort!r}")
    if compile_mode not in COMPILE_MODES:
        raise ValueError(f"compile_mode must be one of {', '.join(COMPILE_MODES)}, not {compile_mode!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    info = model if isinstance(model, GraphInfo) else GraphInfo.of(model)
    layers = layers_of(info, hw, default_bits=default_bits)
    batch = actual_batch(layers, hw, batch_size)
    plans = plan_layers(layers, hw, batch, effort, compile_mode)
    cycles = plans[-1].end_cycle if plans else 0
    return Schedule(batch_size, batch, cycles, hw.clock_mhz, effort, compile_mode, tuple(plans))


def actual_batch(layers: list[Layer], hw: NpuHardware, desired: int) -> int:
    """The largest batch up to ``desired`` (and max_batch) whose largest layer's feature maps fit on chip."""
    footprint = max((layer.in_bytes + layer.out_bytes for layer in layers if not layer.free), default=0)
    batch = min(desired, hw.max_batch)
    while batch > 1 and batch * footprint > hw.memory.feature_buffer_bytes:
        batch -= 1
    return batch


def plan_layers(layers: list[Layer], hw: NpuHardware, batch: int, effort: Effort,
                compile_mode: CompileMode) -> list[LayerPlan]:
    """Each layer's best plan, laid out one after the other from cycle 0 (the search of ``effort``)."""
    strategies = {"lazy": ("next",), "normal": ("live",), "hard": ("live", "largest")}[effort]
    tried: list[tuple[int, int, list[LayerPlan]]] = []
    for double in _bufferings(layers, hw, batch, effort):
        for strategy in strategies:
            plans = _lay_out(layers, hw, batch, effort, compile_mode, _resident(layers, hw, batch, strategy, double),
                             double)
            tried.append((plans[-1].end_cycle if plans else 0, sum(plan.ddr_bytes for plan in plans), plans))
    if compile_mode == "latency":
        return min(tried, key=lambda t: (t[0], t[1]))[2]
    if compile_mode == "bandwidth":
        return min(tried, key=lambda t: (t[1], t[0]))[2]
    fastest = min(t[0] for t in tried) or 1
    leanest = min(t[1] for t in tried) or 1
    return min(tried, key=lambda t: (t[0] / fastest + t[1] / leanest, t[0]))[2]


def _bufferings(layers: list[Layer], hw: NpuHardware, batch: int, effort: Effort) -> list[list[bool]]:
    """The per-layer double-buffering choices to try: every layer double-buffered (DMA overlaps compute, half
    the feature buffer), only the layers whose feature maps fit half the feature buffer, or none (the whole
    buffer holds data; only weights stream during compute). lazy: the first only. A choice equal to an
    earlier one (every layer fits, or none does) is not tried twice: it would lay out the same plans."""
    every = [True] * len(layers)
    if effort == "lazy":
        return [every]
    half = hw.memory.feature_buffer_bytes / 2
    fitting = [batch * (layer.in_bytes + layer.out_bytes) <= half for layer in layers]
    choices: list[list[bool]] = []
    for choice in (every, fitting, [False] * len(layers)):
        if choice not in choices:
            choices.append(choice)
    return choices


def _lay_out(layers: list[Layer], hw: NpuHardware, batch: int, effort: Effort, compile_mode: CompileMode,
             resident: set[str], double: list[bool]) -> list[LayerPlan]:
    bytes_per_cycle = hw.memory.effective_ddr_bytes_per_second / hw.clock_hz
    plans: list[LayerPlan] = []
    start = 0
    idle: list[_Idle] = []  # the earlier layers, newest last, for loading weights ahead
    for layer, buffered in zip(layers, double):
        in_ddr = sum(nbytes for src, nbytes in layer.sources if src not in resident)
        out_ddr = 0 if layer.name in resident else layer.out_bytes
        chunk = first_chunk(layer, hw, buffered)
        depth, prefetch = _ahead(idle, chunk, hw.memory.weight_buffer_bytes, bytes_per_cycle)
        candidates = _candidates(layer, hw, batch, in_ddr, out_ddr, effort, bytes_per_cycle, buffered, prefetch)
        cycles, load, store, compute, tiles, order, dbl, overhead, weight_load, stall = \
            _choose(candidates, compile_mode)
        prefetch_cycles = math.ceil(prefetch / bytes_per_cycle)
        plans.append(LayerPlan(layer, start, start + cycles, compute, load, store, math.ceil(load / bytes_per_cycle),
                               math.ceil(store / bytes_per_cycle), overhead, tiles, order, dbl, weight_load, prefetch,
                               prefetch_cycles, depth, stall))
        start += cycles
        if layer.free:
            continue
        _take(idle[len(idle) - depth:], prefetch_cycles)
        idle.append(_Idle(max(0, cycles - plans[-1].own_ddr_cycles), chunk))
        del idle[:-AHEAD_LAYERS]
    return plans


def first_chunk(layer: Layer, hw: NpuHardware, double: bool) -> int:
    """The weight-buffer bytes a layer's first weight chunk takes (half the buffer at most, double-buffered)."""
    return min(layer.weight_bytes, hw.memory.weight_buffer_bytes // (2 if double else 1))


@dataclass
class _Idle:
    """An earlier layer's DMA idle cycles not yet taken by a load ahead, and the weight-buffer bytes it holds."""

    cycles: int
    held: int


def _ahead(idle: list[_Idle], chunk: int, buffer: int, bytes_per_cycle: float) -> tuple[int, int]:
    """(layers back, bytes) of a first chunk that can load ahead: the most over any depth, where the chunk
    must share the buffer with the chunks of the layers it loads during and after."""
    best = (0, 0)
    held = 0
    cycles = 0
    for depth, entry in enumerate(reversed(idle), start=1):
        held += entry.held
        if held >= buffer:
            break
        cycles += entry.cycles
        nbytes = int(min(chunk, buffer - held, cycles * bytes_per_cycle))
        if nbytes > best[1]:
            best = (depth, nbytes)
        if nbytes >= chunk:
            break
    return best


def _take(window: list[_Idle], cycles: int) -> None:
    """Mark ``cycles`` of the window's idle DMA time used, earliest first."""
    for entry in window:
        used = min(entry.cycles, cycles)
        entry.cycles -= used
        cycles -= used


# cycles, load bytes, store bytes, compute cycles, tiles, order, double-buffered, overhead cycles, weight bytes loaded,
# stall cycles
_Candidate = tuple[int, int, int, int, int, Literal["weights", "features"], bool, int, int, int]


def _candidates(layer: Layer, hw: NpuHardware, batch: int, in_ddr: int, out_ddr: int, effort: Effort,
                bytes_per_cycle: float, double: bool, prefetch: int = 0) -> list[_Candidate]:
    """Each tile order's plan; ``prefetch``: bytes of the first weight chunk already loaded ahead."""
    if layer.free:
        return [(0, 0, 0, 0, 0, "weights", True, 0, 0, 0)]
    unit = hw.unit(layer.unit)
    compute = compute_cycles(layer, unit, batch)
    weights = layer.weight_bytes
    features = batch * (layer.in_bytes + layer.out_bytes)
    store = out_ddr * batch
    share = 2 if double else 1  # a double-buffered plan gets half of each buffer
    weight_chunks = max(1, math.ceil(weights / (hw.memory.weight_buffer_bytes / share)))
    feature_tiles = max(1, math.ceil(features / (hw.memory.feature_buffer_bytes / share)))
    result: list[_Candidate] = []
    orders: tuple[Literal["weights", "features"], ...] = ("weights",) if effort == "lazy" else ("weights", "features")
    for order in orders:
        if order == "weights":  # weights stay, inputs stream once per weight chunk when they do not fit
            weight_load = weights
            load = weights + in_ddr * batch * (weight_chunks if feature_tiles > 1 else 1)
        else:  # feature tiles stay, weights stream once per tile when they do not fit
            weight_load = weights * (feature_tiles if weight_chunks > 1 else 1)
            load = weight_load + in_ddr * batch
        tiles = max(hw.min_tiles, weight_chunks, feature_tiles)
        overhead = hw.layer_overhead(unit) + tiles * hw.tile_overhead_cycles
        ddr = math.ceil((load + store - prefetch) / bytes_per_cycle)
        # prefetched weights too: they cross the same ports, during an earlier layer's compute or this one's
        stall = math.ceil((1 - hw.dma_overlap) * (load + store if double else weight_load) / bytes_per_cycle)
        if double:
            body = max(compute + stall, ddr)
        else:  # weights still stream into their own buffer during compute; feature transfers do not overlap
            weight_ddr = math.ceil((weight_load - prefetch) / bytes_per_cycle)
            body = max(compute + stall, weight_ddr) + ddr - weight_ddr
        result.append((body + overhead, load, store, compute, tiles, order, double, overhead, weight_load, stall))
    return result


def _choose(candidates: list[_Candidate], mode: CompileMode) -> _Candidate:
    if mode == "latency":
        return min(candidates, key=lambda c: (c[0], c[1] + c[2]))
    if mode == "bandwidth":
        return min(candidates, key=lambda c: (c[1] + c[2], c[0]))
    fastest = min(c[0] for c in candidates) or 1
    leanest = min(c[1] + c[2] for c in candidates) or 1
    return min(candidates, key=lambda c: (c[0] / fastest + (c[1] + c[2]) / leanest, c[0]))


def _resident(layers: list[Layer], hw: NpuHardware, batch: int, strategy: str, double: list[bool]) -> set[str]:
    """Layers whose output stays in SRAM for its readers (never one that leaves the subgraph).

    A layer's feature budget is the feature buffer, or half of it when the layer is double-buffered.
    next: only an output whose one reader runs right after it, both layers' feature maps within budget;
    live: in order, any output whose whole live range (producer to last reader) has room next to each
    layer's own feature maps; largest: as live, the largest outputs first (they save the most traffic).
    """
    budget = [hw.memory.feature_buffer_bytes / (2 if d else 1) for d in double]
    working = [batch * (layer.in_bytes + layer.out_bytes) for layer in layers]
    resident: set[str] = set()
    if strategy == "next":
        for i, layer in enumerate(layers[:-1]):
            if not layer.is_output and layer.readers == (layers[i + 1].name,) and \
                    working[i] <= budget[i] and working[i + 1] <= budget[i + 1]:
                resident.add(layer.name)
        return resident
    position = {layer.name: i for i, layer in enumerate(layers)}
    candidates = [i for i, layer in enumerate(layers) if not layer.is_output and layer.readers
                  and all(r in position for r in layer.readers)]
    if strategy == "largest":
        candidates.sort(key=lambda i: (-layers[i].out_bytes, i))
    held = [0] * len(layers)  # bytes kept between producer and reader, at each position
    for i in candidates:
        layer = layers[i]
        last = max(position[r] for r in layer.readers)
        size = batch * layer.out_bytes
        if all(held[q] + working[q] + (0 if q in (i, last) else size) <= budget[q] for q in range(i, last + 1)):
            for q in range(i + 1, last):
                held[q] += size
            resident.add(layer.name)
    for i in candidates:  # the rest of a chain streams in row bands: the reader runs next, band by band
        layer = layers[i]
        chained = i + 1 < len(layers) and layer.readers == (layers[i + 1].name,)
        if layer.name in resident or not chained:
            continue
        if stream_band(layer, layers[i + 1], batch) <= min(budget[i], budget[i + 1]) / 2:
            resident.add(layer.name)
    return resident


def stream_band(layer: Layer, reader: Layer, batch: int) -> float:
    """On-chip bytes to hand ``layer``'s output to the next layer in row bands (depth-first): the rows one
    band of the reader reads, twice (double-buffered); the whole output when it is not spatial."""
    if layer.rows <= 1:
        return float(batch * layer.out_bytes)
    rows = min(layer.rows, 2 * max(reader.kernel_rows, 1))
    return batch * layer.out_bytes * rows / layer.rows


# ------------------------------------------------------------------ estimates for the partitioner
def npu_seconds(info: GraphInfo, names: Iterable[str], hw: NpuHardware, *, default_bits: int = 8) -> float:
    """One frame of the layers ``names`` as one NPU subgraph (lazy plans, batch 1): the partitioner's price."""
    layers = layers_of(info, hw, set(names), default_bits=default_bits)
    plans = plan_layers(layers, hw, 1, "lazy", "latency")
    return (plans[-1].end_cycle if plans else 0) / hw.clock_hz


def host_seconds(info: GraphInfo, names: Iterable[str], processor: Processor) -> float:
    """One frame of the layers ``names`` on one core of a host processor."""
    total = 0.0
    for name in names:
        node = info.node(name)
        total += processor.layer_seconds(info.macs(node), element_work(info, node) or info.elements(node.output[0]))
    return total
