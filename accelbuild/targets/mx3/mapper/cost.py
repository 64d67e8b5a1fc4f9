"""The one cost model: what a placement of layers on chips and cores is predicted to do.

Used by the mapper's search and by every report, so the two cannot disagree. Its rules, each from
the hardware profile:

- A layer on k cores takes ``work * factor / (k * rate) + layer_overhead_cycles`` cycles per frame
  (rate = MACs/cycle of a MAC core or ops/cycle of an ALU core; factor = efficiency penalties for
  misaligned channel/filter counts, grouped convolutions and data-moving layout ops).
- All layers of a model run at once as a pipeline: its frame period is its slowest layer's cycles.
- Links carry bytes per frame: the host link the models' input and output packets (full duplex: each
  direction has the link's bandwidth), each chip-to-chip link the activations (bfloat16) that cross it. A link's load at the compute frame rates that
  exceeds its bandwidth slows every model down in proportion (the binding link is the bottleneck).
- Latency is the longest path through the model, each layer starting once it has the input rows its
  kernel needs, plus the slowest layer's full frame, the link transfers and their fixed latencies.
- Capacity per chip: MAC and ALU core counts, weight memory (a layer needs enough MAC cores to hold
  its weights) and feature-map memory (line buffers of the layers it holds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from accelbuild.targets.mx3.hardware import HardwareProfile
from accelbuild.targets.mx3.mapper.layers import Layer


@dataclass(frozen=True)
class Traffic:
    """Host-link bytes per frame of each model (in its packet formats)."""

    input_bytes: dict[str, int]
    output_bytes: dict[str, int]
    share_input: bool = False


def rate(layer: Layer, hw: HardwareProfile) -> int:
    return hw.chip.mac_cores.macs_per_cycle if layer.kind == "mac" else hw.chip.alu_cores.ops_per_cycle


def min_cores(layer: Layer, hw: HardwareProfile) -> int:
    if layer.kind == "mac":
        return max(1, math.ceil(layer.weight_bytes / hw.chip.mac_cores.weight_memory_bytes))
    return 1


def core_budget(kind: str, hw: HardwareProfile) -> int:
    return hw.chip.mac_cores.count if kind == "mac" else hw.chip.alu_cores.count


def cycles(layer: Layer, cores: int, hw: HardwareProfile) -> float:
    return layer.work * layer.factor / (cores * rate(layer, hw)) + hw.chip.layer_overhead_cycles


def cores_for(layer: Layer, target_cycles: float, hw: HardwareProfile) -> int:
    """Fewest cores that bring ``layer`` to at most ``target_cycles`` (and hold its weights)."""
    compute = target_cycles - hw.chip.layer_overhead_cycles
    needed = math.inf if compute <= 0 else math.ceil(layer.work * layer.factor / (compute * rate(layer, hw)) - 1e-9)
    return max(min_cores(layer, hw), int(needed) if needed != math.inf else 10**9)


@dataclass(frozen=True)
class Placement:
    chip: int
    cores: int


@dataclass
class Estimate:
    fps: float
    model_fps: dict[str, float]
    latency_ms: dict[str, float]
    period_cycles: dict[str, float]
    layer_cycles: list[float]
    bottleneck: dict[str, object]
    host_bytes_per_frame: dict[str, int]
    chip_link_bytes: list[int]
    link_scale: float
    host_load: float               # bytes per second at the predicted frame rates
    chip_link_load: list[float]    # bytes per second over each chip boundary
    chips_used: int
    chip_usage: list[dict[str, int]] = field(default_factory=list)

    @property
    def latency_max_ms(self) -> float:
        return max(self.latency_ms.values()) if self.latency_ms else 0.0


def chip_usage(layers: list[Layer], placements: list[Placement], num_chips: int) -> list[dict[str, int]]:
    usage = [{"mac_cores": 0, "alu_cores": 0, "weight_bytes": 0, "feature_bytes": 0} for _ in range(num_chips)]
    for layer, place in zip(layers, placements):
        chip = usage[place.chip]
        chip["mac_cores" if layer.kind == "mac" else "alu_cores"] += place.cores
        chip["weight_bytes"] += layer.weight_bytes
        chip["feature_bytes"] += layer.buffer_bytes
    return usage


def capacity_problems(usage: list[dict[str, int]], hw: HardwareProfile) -> list[str]:
    problems = []
    for index, chip in enumerate(usage):
        if chip["mac_cores"] > hw.chip.mac_cores.count:
            problems.append(f"chip {index}: {chip['mac_cores']} MAC cores needed, {hw.chip.mac_cores.count} exist")
        if chip["alu_cores"] > hw.chip.alu_cores.count:
            problems.append(f"chip {index}: {chip['alu_cores']} ALU cores needed, {hw.chip.alu_cores.count} exist")
        if chip["feature_bytes"] > hw.chip.feature_memory_bytes:
            problems.append(f"chip {index}: {chip['feature_bytes']} bytes of feature maps, "
                            f"{hw.chip.feature_memory_bytes} fit")
    return problems


def evaluate(layers: list[Layer], placements: list[Placement], hw: HardwareProfile, traffic: Traffic,
             num_chips: int) -> Estimate:
    """Predict throughput, latency and the bottleneck of a placement."""
    clock = hw.chip.clock_hz
    layer_cycles = [cycles(layer, p.cores, hw) for layer, p in zip(layers, placements)]
    models = list(dict.fromkeys(layer.model for layer in layers))
    period = {m: max(c for c, layer in zip(layer_cycles, layers) if layer.model == m) for m in models}
    compute_fps = {m: clock / period[m] for m in models}
    if traffic.share_input:  # one stream feeds every model: they all run at the slowest one's pace
        shared = min(compute_fps.values())
        compute_fps = {m: shared for m in models}
    link_bytes = _chip_link_bytes(layers, placements, num_chips)
    host = {m: traffic.input_bytes.get(m, 0) + traffic.output_bytes.get(m, 0) for m in models}
    # PCIe is full duplex: inputs and outputs each have the link's bandwidth; the busier direction binds
    outgoing = sum(compute_fps[m] * traffic.output_bytes.get(m, 0) for m in models)
    inputs = [compute_fps[m] * traffic.input_bytes.get(m, 0) for m in models]
    host_load = max(outgoing, max(inputs, default=0.0) if traffic.share_input else sum(inputs))
    scale, binding = 1.0, None
    if host_load > 0 and hw.host_link.total_bytes_per_second / host_load < scale:
        scale, binding = hw.host_link.total_bytes_per_second / host_load, {"kind": "host_link"}
    loads = [sum(compute_fps[m] * link_bytes[b][m] for m in models) for b in range(num_chips - 1)]
    for boundary, load in enumerate(loads):
        if load > 0 and hw.chip_to_chip_link.total_bytes_per_second / load < scale:
            scale = hw.chip_to_chip_link.total_bytes_per_second / load
            binding = {"kind": "chip_link", "from_chip": boundary, "to_chip": boundary + 1}
    model_fps = {m: compute_fps[m] * scale for m in models}
    if binding is None:  # the slowest layer of the slowest model
        model = min(models, key=lambda m: (compute_fps[m], models.index(m)))
        slowest = max((i for i, layer in enumerate(layers) if layer.model == model),
                      key=lambda i: (layer_cycles[i], -i))
        binding = {"kind": "layer", "layer": layers[slowest].name, "model": layers[slowest].model,
                   "chip": placements[slowest].chip, "cores": placements[slowest].cores,
                   "cycles": round(layer_cycles[slowest], 1)}
    latency = {m: _latency_ms(m, layers, placements, layer_cycles, period[m], traffic, hw) for m in models}
    return Estimate(
        fps=sum(model_fps.values()),
        model_fps=model_fps,
        latency_ms=latency,
        period_cycles=period,
        layer_cycles=layer_cycles,
        bottleneck=binding,
        host_bytes_per_frame=host,
        chip_link_bytes=[sum(b.values()) for b in link_bytes],
        link_scale=scale,
        host_load=host_load * scale,
        chip_link_load=[load * scale for load in loads],
        chips_used=len({p.chip for p in placements}),
        chip_usage=chip_usage(layers, placements, num_chips),
    )


def _chip_link_bytes(layers: list[Layer], placements: list[Placement], num_chips: int) -> list[dict[str, int]]:
    """Per chip boundary and model, the activation bytes per frame that cross it (a tensor crosses each
    boundary between its producer and its farthest reader once, however many layers read it)."""
    where = {layer.key: p.chip for layer, p in zip(layers, placements)}
    farthest: dict[str, int] = {}
    for layer, place in zip(layers, placements):
        for name in set(layer.inputs):
            source = f"{layer.model}/{name}"
            farthest[source] = max(farthest.get(source, where[source]), place.chip)
    crossing: list[dict[str, int]] = [{layer.model: 0 for layer in layers} for _ in range(max(0, num_chips - 1))]
    for layer in layers:
        for boundary in range(where[layer.key], farthest.get(layer.key, where[layer.key])):
            crossing[boundary][layer.model] += layer.out_bytes
    return crossing


def _latency_ms(model: str, layers: list[Layer], placements: list[Placement], layer_cycles: list[float],
                period: float, traffic: Traffic, hw: HardwareProfile) -> float:
    clock = hw.chip.clock_hz
    finish: dict[str, float] = {}
    chip_of: dict[str, int] = {}
    hop = hw.chip_to_chip_link
    for layer, place, cyc in zip(layers, placements, layer_cycles):
        if layer.model != model:
            continue
        start = 0.0
        for source in layer.inputs:
            ready = finish.get(source, 0.0)
            if chip_of.get(source, place.chip) != place.chip:
                ready += hop.latency_us * 1e-6 * clock
            start = max(start, ready)
        fraction = min(1.0, layer.kernel_rows / max(1, layer.rows))
        finish[layer.name] = start + cyc * fraction
        chip_of[layer.name] = place.chip
    path = max(finish.values(), default=0.0) + period
    host = hw.host_link
    transfers = (traffic.input_bytes.get(model, 0) + traffic.output_bytes.get(model, 0)) / host.total_bytes_per_second
    return 1000.0 * (path / clock + transfers + 2 * host.latency_us * 1e-6)
