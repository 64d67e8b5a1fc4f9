"""From a pipeline's quantized models to a mapping and its ``mapping.json`` record."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from accelbuild.targets.mx3.hardware import HardwareProfile
from accelbuild.targets.mx3.mapper import cost, search, view
from accelbuild.targets.mx3.mapper.layers import Layer, extract_layers
from accelbuild.util.onnx_graph import real_inputs

log = logging.getLogger(__name__)


@dataclass
class ModelInput:
    name: str
    quantized: Path
    record: Path  # quantize.json


@dataclass
class Mapping:
    layers: list[Layer]
    candidates: list[search.Candidate]
    num_chips: int
    request: search.Request

    @property
    def best(self) -> search.Candidate:
        return self.candidates[0]


def load_layers(models: list[ModelInput], hw: HardwareProfile) -> tuple[list[Layer], cost.Traffic, dict]:
    layers: list[Layer] = []
    inputs, outputs, shapes = {}, {}, {}
    for model in models:
        record = json.loads(model.record.read_text())
        bits = {layer["name"]: layer["bits"] for layer in record["layers"]}
        proto = onnx.load(str(model.quantized))
        layers += extract_layers(model.name, proto, bits, hw)
        inputs[model.name] = record["packets"]["input_bytes_per_frame"]
        outputs[model.name] = record["packets"]["output_bytes_per_frame"]
        shapes[model.name] = {name: list(v) for name, v in _input_shapes(proto).items()}
    return layers, cost.Traffic(inputs, outputs), shapes


def _input_shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    return {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in real_inputs(model.graph)}


def map_pipeline(layers: list[Layer], traffic: cost.Traffic, hw: HardwareProfile, num_chips: int | str,
                 effort: str, target_fps: float | None) -> Mapping:
    if num_chips == "min":
        num_chips = search.chips_needed(layers, hw)
        if num_chips > hw.system.max_chips:
            raise search.DoesNotFit(f"the models need {num_chips} chips; at most {hw.system.max_chips} act as one device")
    request = search.Request(int(num_chips), effort, target_fps, traffic)
    return Mapping(layers, search.map_layers(layers, hw, request), int(num_chips), request)


def record(mapping: Mapping, hw: HardwareProfile, effort: str) -> dict[str, Any]:
    """``mapping.json``: the chosen mapping as the cost model predicts it (every field from cost.py)."""
    best = mapping.best
    estimate = best.estimate
    layers = mapping.layers
    core_ids = assign_core_ids(layers, best.placements)
    clock = hw.chip.clock_hz
    layer_rows = []
    for layer, place, cycles, ids in zip(layers, best.placements, estimate.layer_cycles, core_ids):
        busy = cycles * estimate.model_fps[layer.model] / clock
        layer_rows.append({
            "name": layer.name, "model": layer.model, "op": layer.op, "kind": layer.kind,
            "chip": place.chip, "cores": place.cores, "first_core": ids, "cycles": round(cycles, 1),
            "macs" if layer.kind == "mac" else "ops": int(layer.work), "weight_bytes": layer.weight_bytes,
            "bits": layer.bits, "utilization": round(min(1.0, busy), 4), "fused": layer.fused,
            "inputs": layer.inputs, "out_bytes": layer.out_bytes,
            "start_fraction": cost.start_fraction(layer),
        })
    return {
        "estimate": "cost model (accelbuild/targets/mx3/mapper/cost.py)",
        "simulated": False,
        "chip_gen": hw.name,
        "clock_mhz": hw.chip.clock_mhz,
        "num_chips": estimate.chips_used,
        "num_chips_requested": mapping.num_chips,
        **({"num_chips_reason": reason} if (reason := fewer_chips_reason(mapping)) else {}),
        "effort": effort,
        "fps": round(estimate.fps, 2),
        "fps_is": estimate.fps_is,
        "latency_ms": round(estimate.latency_max_ms, 4),
        "bottleneck": estimate.bottleneck,
        "models": [{"name": m, "fps": round(estimate.model_fps[m], 2), "latency_ms": round(estimate.latency_ms[m], 4),
                    "period_cycles": round(estimate.period_cycles[m], 1), "bottleneck": estimate.model_bottleneck[m],
                    "layers": sum(1 for layer in layers if layer.model == m)} for m in estimate.model_fps],
        "links": _links(estimate, hw, mapping),
        "chips": _chips(layers, best.placements, estimate, hw, mapping.num_chips),
        "layers": layer_rows,
        "unsupported_ops": sorted({layer.op for layer in layers if not layer.supported}),
        "boundaries": list(best.boundaries),
        "strategy": best.strategy,
        "candidates": [
            {"id": i, "fps": round(c.estimate.fps, 2), "latency_ms": round(c.estimate.latency_max_ms, 4),
             "boundaries": list(c.boundaries), "strategy": c.strategy, "num_chips": c.estimate.chips_used}
            for i, c in enumerate(mapping.candidates)
        ] if effort == "hard" else [],
    }


def fewer_chips_reason(mapping: Mapping) -> str | None:
    """Why the chosen mapping uses fewer chips than ``num_chips`` (None when it uses them all). The search
    takes any split over at most num_chips chips; one over more chips was not predicted faster, because what
    binds the slowest model is something more chips do not relieve."""
    estimate, request = mapping.best.estimate, mapping.request
    used, asked = estimate.chips_used, mapping.num_chips
    if used >= asked:
        return None
    head = f"mapped on {used} of the {asked} chips requested: "
    if request.target_fps is not None and estimate.fps >= request.target_fps:
        return head + f"target_fps {request.target_fps:g} is reached on {used} (the search stops there)"
    bound = estimate.bottleneck
    kind = bound.get("kind")
    why = {"layer": "a layer runs on the cores of one chip, so more chips cannot make it faster",
           "host_link": "more chips do not widen the host link",
           "host_buffers": "more chips do not add host transfers in flight",
           "chip_link": "another chip boundary would put more activations on the chip links"}.get(
        str(kind), "no split over more chips was predicted faster")
    lazy = " (effort lazy: one greedy fill; effort normal searches the split)" if request.effort == "lazy" else ""
    return head + f"{view.describe(bound)} binds, and {why}{lazy}"


def assign_core_ids(layers: list[Layer], placements: list[cost.Placement]) -> list[int]:
    """The first core index of each layer within its chip (MAC and ALU cores numbered apart)."""
    next_free: dict[tuple[int, str], int] = {}
    first = []
    for layer, place in zip(layers, placements):
        key = (place.chip, layer.kind)
        first.append(next_free.get(key, 0))
        next_free[key] = first[-1] + place.cores
    return first


def _links(estimate: cost.Estimate, hw: HardwareProfile, mapping: Mapping) -> dict[str, Any]:
    chip_links = [
        {"from_chip": b, "to_chip": b + 1, "bytes_per_frame": nbytes,
         "utilization": round(load / hw.chip_to_chip_link.total_bytes_per_second, 4)}
        for b, (nbytes, load) in enumerate(zip(estimate.chip_link_bytes, estimate.chip_link_load))
    ]
    return {
        "host": {"bytes_per_frame": estimate.host_bytes_per_frame,
                 "utilization": round(estimate.host_load / hw.host_link.total_bytes_per_second, 4)},
        "chip_links": chip_links,
    }


def _chips(layers: list[Layer], placements: list[cost.Placement], estimate: cost.Estimate,
           hw: HardwareProfile, num_chips: int) -> list[dict[str, Any]]:
    clock = hw.chip.clock_hz
    rows = []
    for chip, usage in enumerate(estimate.chip_usage):
        mac = [0.0] * hw.chip.mac_cores.count
        alu = [0.0] * hw.chip.alu_cores.count
        first = dict(zip(range(len(layers)), assign_core_ids(layers, placements)))
        for i, (layer, place) in enumerate(zip(layers, placements)):
            if place.chip != chip:
                continue
            busy = round(min(1.0, estimate.layer_cycles[i] * estimate.model_fps[layer.model] / clock), 3)
            cores = mac if layer.kind == "mac" else alu
            for core in range(first[i], first[i] + place.cores):
                cores[core] = busy
        rows.append({
            "chip": chip, **usage,
            "weight_utilization": round(usage["weight_bytes"] / hw.weight_memory_bytes, 4),
            "mac_utilization": round(sum(mac) / len(mac), 4),
            "alu_utilization": round(sum(alu) / len(alu), 4),
            "mac_core_utilization": mac,
            "alu_core_utilization": alu,
        })
    return rows
