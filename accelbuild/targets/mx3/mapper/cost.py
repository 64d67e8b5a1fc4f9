"""The one cost model: what a placement of layers on chips and cores is predicted to do.

Used by the mapper's search and by every report, so the two cannot disagree. Its rules, each from
the hardware profile:

- A layer on k cores takes ``work * factor / (k * rate) + layer_overhead_cycles`` cycles per frame
  (rate = MACs/cycle of a MAC core or ops/cycle of an ALU core; factor = efficiency penalties for
  misaligned channel/filter counts, grouped convolutions and data-moving layout ops).
- All layers of a model run at once as a pipeline: its frame period is its slowest layer's cycles.
- Links carry bytes per frame: the host link the models' input and output packets (full duplex: each
  direction has the link's bandwidth), each chip-to-chip link the activations (bfloat16) that cross it.
  Models share a link max-min fairly (packets interleave: a model that needs less than an equal share
  gets it, the others split the rest), and the host interface moves at most ``frames_in_flight``
  transfers per model and direction at once, each holding its slot for its wire time plus the link's
  latency (``accelbuild/targets/mx3/sharing.py``, the same rules the simulator times). Each model's
  bottleneck is whichever of its slowest layer, a link or the host buffers allows the fewest frames.
- Latency is one frame through the pipeline in the steady state (``mapper/latency.py``): each layer
  starts once its producers have made the rows its kernel needs, layers upstream of the bottleneck
  take a frame period per frame, plus the host transfers and the links' fixed latencies.
- Capacity per chip: MAC and ALU core counts, weight memory (a layer needs enough MAC cores to hold
  its weights) and feature-map memory (line buffers of the layers it holds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from accelbuild.targets import end_to_end
from accelbuild.targets.mx3 import sharing
from accelbuild.targets.mx3.hardware import HardwareProfile
from accelbuild.targets.mx3.mapper import latency
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
    fps: float  # the one combined figure benchmark.json's fps is (``fps_is``): the slowest model's rate
    model_fps: dict[str, float]
    latency_ms: dict[str, float]
    period_cycles: dict[str, float]
    layer_cycles: list[float]
    bottleneck: dict[str, object]  # what binds the slowest model
    model_bottleneck: dict[str, dict[str, object]]  # what binds each model
    host_bytes_per_frame: dict[str, int]
    chip_link_bytes: list[int]
    host_load: float               # bytes per second at the predicted frame rates
    chip_link_load: list[float]    # bytes per second over each chip boundary
    chips_used: int
    chip_usage: list[dict[str, int]] = field(default_factory=list)
    fps_is: str = "frames per second of the model"

    @property
    def total_fps(self) -> float:
        """The models' rates added: a tie-break of the search only (frames of different models)."""
        return sum(self.model_fps.values())

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


def interface(hw: HardwareProfile) -> sharing.Interface:
    """The host interface's buffers as the sharing rules take them."""
    return sharing.Interface(int(hw.host_link.frames_in_flight or 1), hw.host_link.latency_us * 1e-6)


def capacities(hw: HardwareProfile, num_chips: int) -> dict[str, float]:
    """Bytes per second of every link, per direction (the host link's two directions apart)."""
    found = {sharing.HOST_IN: hw.host_link.total_bytes_per_second, sharing.HOST_OUT: hw.host_link.total_bytes_per_second}
    for boundary in range(num_chips - 1):
        found[sharing.chip_link(boundary)] = hw.chip_to_chip_link.total_bytes_per_second
    return found


def evaluate(layers: list[Layer], placements: list[Placement], hw: HardwareProfile, traffic: Traffic,
             num_chips: int) -> Estimate:
    """Predict throughput, latency and the bottleneck of a placement."""
    clock = hw.chip.clock_hz
    layer_cycles = [cycles(layer, p.cores, hw) for layer, p in zip(layers, placements)]
    models = list(dict.fromkeys(layer.model for layer in layers))
    period = {m: max(c for c, layer in zip(layer_cycles, layers) if layer.model == m) for m in models}
    link_bytes = _chip_link_bytes(layers, placements, num_chips)
    streams = [sharing.Stream(m, clock / period[m], {
        sharing.HOST_IN: traffic.input_bytes.get(m, 0), sharing.HOST_OUT: traffic.output_bytes.get(m, 0),
        **{sharing.chip_link(b): link_bytes[b][m] for b in range(num_chips - 1)}}) for m in models]
    shares = sharing.allocate(streams, capacities(hw, num_chips), interface(hw), traffic.share_input)
    model_fps = shares.fps
    slowest_layer = {m: max((i for i, layer in enumerate(layers) if layer.model == m),
                            key=lambda i: (layer_cycles[i], -i)) for m in models}
    pace = min(models, key=lambda m: (clock / period[m], models.index(m)))  # share_input: everybody's pace
    named = {m: _named(shares.binding[m], layers[slowest_layer[pace if traffic.share_input else m]],
                       placements[slowest_layer[pace if traffic.share_input else m]],
                       layer_cycles[slowest_layer[pace if traffic.share_input else m]], interface(hw))
             for m in models}
    slowest = min(models, key=lambda m: (model_fps[m], models.index(m)))
    latency = {m: _latency_ms(m, models, layers, placements, layer_cycles, model_fps[m], named[m], traffic, shares,
                              link_bytes, hw) for m in models}
    host = {m: traffic.input_bytes.get(m, 0) + traffic.output_bytes.get(m, 0) for m in models}
    fps, fps_is = end_to_end.combined_fps([model_fps[m] for m in models],
                                          "shared_input" if traffic.share_input else "concurrent")
    return Estimate(
        fps=fps,
        fps_is=fps_is,
        model_fps=model_fps,
        latency_ms=latency,
        period_cycles=period,
        layer_cycles=layer_cycles,
        bottleneck=named[slowest],
        model_bottleneck=named,
        host_bytes_per_frame=host,
        chip_link_bytes=[sum(b.values()) for b in link_bytes],
        host_load=max(shares.load[sharing.HOST_IN], shares.load[sharing.HOST_OUT]),
        chip_link_load=[shares.load[sharing.chip_link(b)] for b in range(num_chips - 1)],
        chips_used=len({p.chip for p in placements}),
        chip_usage=chip_usage(layers, placements, num_chips),
    )


def _named(binding: dict[str, object], layer: Layer, place: Placement, layer_cycles: float,
           buffers: sharing.Interface) -> dict[str, object]:
    """A binding resource as mapping.json and the reports name it."""
    kind, link = binding["kind"], str(binding.get("link", ""))
    direction = {sharing.HOST_IN: "to_chip", sharing.HOST_OUT: "to_host"}.get(link)
    if kind == "host_buffers":
        return {"kind": "host_buffers", "direction": direction, "frames_in_flight": buffers.frames_in_flight}
    if kind == "link" and direction:
        return {"kind": "host_link", "direction": direction}
    if kind == "link":
        boundary = int(link.split(":")[1])
        return {"kind": "chip_link", "from_chip": boundary, "to_chip": boundary + 1}
    return {"kind": "layer", "layer": layer.name, "model": layer.model, "chip": place.chip, "cores": place.cores,
            "cycles": round(layer_cycles, 1)}


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


def start_fraction(layer: Layer) -> float:
    """The share of its input a layer needs before it can start: its kernel's rows of its rows."""
    return round(min(1.0, layer.kernel_rows / max(1, layer.rows)), 6)


def _latency_ms(model: str, models: list[str], layers: list[Layer], placements: list[Placement],
                layer_cycles: list[float], fps: float, binding: dict[str, object], traffic: Traffic,
                shares: sharing.Allocation, link_bytes: list[dict[str, int]], hw: HardwareProfile) -> float:
    """One frame through the pipeline in the steady state (``mapper/latency.py``)."""
    clock = hw.chip.clock_hz
    nodes = [latency.Node(layer.name, tuple(layer.inputs), place.chip, cyc / clock, start_fraction(layer))
             for layer, place, cyc in zip(layers, placements, layer_cycles) if layer.model == model]
    bandwidth = shares.bandwidth[model]
    if traffic.share_input:  # one transfer of the largest input, charged to the first model
        into = max(traffic.input_bytes.get(m, 0) for m in models) / shares.bandwidth[models[0]][sharing.HOST_IN]
    else:
        into = traffic.input_bytes.get(model, 0) / bandwidth[sharing.HOST_IN]
    links = {b: crossing[model] / bandwidth[sharing.chip_link(b)]
             for b, crossing in enumerate(link_bytes) if crossing.get(model)}
    pace = latency.Pace(1.0 / fps if fps > 0 else 0.0, into,
                        traffic.output_bytes.get(model, 0) / bandwidth[sharing.HOST_OUT],
                        hw.host_link.latency_us * 1e-6, hw.chip_to_chip_link.latency_us * 1e-6, links,
                        latency.paced_layers(nodes, binding))
    return 1000.0 * latency.latency_seconds(nodes, pace)
