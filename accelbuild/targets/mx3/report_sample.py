"""Realistic, deterministic report data for tests and for looking at ``report.html``.

``sample_data(layers, chips)`` builds the dict ``html.render_report`` takes, shaped exactly like the
benchmark stage's: a two-model pipeline ("det", then "cls") whose layers fill the chips in topological
order, a mapping.json like the map stage writes (cores in proportion to work, per-core utilisation),
first-frame layer timing, a timeline of the first frames and the link bandwidth over one frame period.
The numbers follow the built-in mx3 profile (250 MAC and 125 ALU cores per chip, 600 MHz) closely
enough to look real; nothing here is a measurement. Same arguments, same dict.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

MAC_CORES, ALU_CORES = 250, 125
MACS_PER_CYCLE, OPS_PER_CYCLE = 20, 8
CLOCK_MHZ = 600
OVERHEAD_CYCLES = 40
WEIGHT_MEMORY_BYTES = 10_500_000
HOST_BYTES_PER_US = 1_600.0        # about 1.6 GB/s of PCIe payload
LINK_LATENCY_US = 3.0
SIM_SLOWDOWN = 1.035               # what the simulator adds to the cost model: fill, contention, jitter
FRAMES_SHOWN = 3
BANDWIDTH_SAMPLES = 240
MODEL_IO_BYTES = {"det": (320 * 320 * 3 * 2, 2100 * 144 * 2), "cls": (224 * 224 * 3 * 2, 1000 * 2)}  # BF16 in, out

_DET_OPS = (("Conv", "mac", "conv"), ("Sigmoid", "alu", "act.sigmoid"), ("Mul", "alu", "act.mul"))
_DET_EXTRA = (("Add", "alu", "add"), ("Concat", "alu", "concat"), ("Resize", "alu", "upsample"))
_CLS_OPS = (("Conv", "mac", "conv"), ("HardSigmoid", "alu", "hswish.hsig"), ("Mul", "alu", "hswish.mul"))
_CLS_TAIL = (("GlobalAveragePool", "alu", "pool"), ("Gemm", "mac", "fc"), ("Softmax", "alu", "softmax"))


@dataclass
class _Layer:
    name: str
    model: str
    op: str
    kind: str
    work: int
    factor: float
    weight_bytes: int
    bits: int
    chip: int = 0
    cores: int = 1
    first_core: int = 0
    cycles: float = 0.0
    start_us: float = 0.0
    end_us: float = 0.0
    compute_us: float = 0.0
    data_us: float = 0.0


def sample_data(layers: int = 40, chips: int = 2) -> dict[str, Any]:
    """Report data for a det + cls pipeline of ``layers`` layers on ``chips`` chips."""
    if layers < 8 or chips < 1:
        raise ValueError("sample_data needs at least 8 layers and 1 chip")
    rng = random.Random(7919 * layers + chips)
    graph = _build_layers(layers, rng)
    _assign_chips(graph, chips)
    _allocate_cores(graph)
    periods = _model_periods(graph)
    period_us = max(periods.values()) / CLOCK_MHZ * SIM_SLOWDOWN
    _time_layers(graph, period_us, rng)
    mapping = _mapping(graph, chips, periods)
    timing = _timing(graph, chips, period_us)
    return {
        "pipeline": "p", "chip_gen": "mx3", "num_chips": chips, "clock_mhz": CLOCK_MHZ, "simulated": True,
        "benchmark": _benchmark(graph, chips, periods, mapping, rng),
        "mapping": mapping,
        "timing": timing,
    }


def _build_layers(count: int, rng: random.Random) -> list[_Layer]:
    cls_count = max(6, count // 5)
    det = [_make(rng, "det", op, kind, name) for op, kind, name in _det_names(count - cls_count)]
    cls = [_make(rng, "cls", op, kind, name) for op, kind, name in _cls_names(cls_count)]
    return det + cls


def _det_names(count: int) -> list[tuple[str, str, str]]:
    names: list[tuple[str, str, str]] = []
    block = 0
    while len(names) < count:
        prefix = "stem" if block == 0 else f"stage{1 + (block - 1) // 3}.c{(block - 1) % 3}"
        ops = _DET_OPS + ((_DET_EXTRA[block % 3],) if block % 2 else ())
        names += [(op, kind, f"{prefix}.{suffix}") for op, kind, suffix in ops]
        block += 1
    return names[:count]


def _cls_names(count: int) -> list[tuple[str, str, str]]:
    body = [(op, kind, f"b{i // 3}.{suffix}") for i, (op, kind, suffix) in
            enumerate(_CLS_OPS[i % 3] for i in range(count - len(_CLS_TAIL)))]
    return body + list(_CLS_TAIL)


def _make(rng: random.Random, model: str, op: str, kind: str, name: str) -> _Layer:
    if kind == "mac":
        work = int(math.exp(rng.uniform(math.log(2e7), math.log(4e8))))
        if op == "Gemm":
            work = 1_280_000
        bits = rng.choice((8, 8, 8, 4, 16))
        weights = work // int(math.exp(rng.uniform(math.log(400), math.log(6400))))
        return _Layer(name, model, op, kind, work, rng.uniform(1.0, 2.2), weights * bits // 8, bits)
    work = int(math.exp(rng.uniform(math.log(1e6), math.log(1.5e7))))
    return _Layer(name, model, op, kind, work, rng.uniform(1.0, 2.2), 0, 0)


def _assign_chips(graph: list[_Layer], chips: int) -> None:
    """Fill chips in topological order, about the same MACs on each."""
    total = sum(layer.work for layer in graph if layer.kind == "mac")
    done = 0
    for layer in graph:
        if layer.kind == "mac":
            done += layer.work
        layer.chip = min(chips - 1, int((done - layer.work / 2) / total * chips))


def _allocate_cores(graph: list[_Layer]) -> None:
    """Cores in proportion to work (94% of each chip; the efficiency factor half taken into account, as a
    mapper that does not quite know it would), then each layer's cycles on its cores."""
    for chip in sorted({layer.chip for layer in graph}):
        for kind, budget, rate in (("mac", MAC_CORES, MACS_PER_CYCLE), ("alu", ALU_CORES, OPS_PER_CYCLE)):
            group = [layer for layer in graph if layer.chip == chip and layer.kind == kind]
            total = sum(_demand(layer) for layer in group) or 1.0
            first = 0
            for layer in group:
                layer.cores = max(1, round(_demand(layer) / total * budget * 0.94))
                layer.first_core, first = first, first + layer.cores
                layer.cycles = round(layer.work * layer.factor / (layer.cores * rate) + OVERHEAD_CYCLES, 1)


def _demand(layer: _Layer) -> float:
    return layer.work * layer.factor ** 0.5


def _model_periods(graph: list[_Layer]) -> dict[str, float]:
    periods: dict[str, float] = {}
    for layer in graph:
        periods[layer.model] = max(periods.get(layer.model, 0.0), layer.cycles)
    return periods


def _time_layers(graph: list[_Layer], period_us: float, rng: random.Random) -> None:
    """First-frame timing: each layer starts once its producer has made enough rows."""
    previous: dict[str, _Layer] = {}
    for layer in graph:
        layer.compute_us = round(layer.cycles / CLOCK_MHZ * SIM_SLOWDOWN, 3)
        layer.data_us = round(min(period_us - layer.compute_us, layer.compute_us * rng.uniform(0.05, 0.3)), 3)
        before = previous.get(layer.model)
        if before is None:
            layer.start_us = 2.0
        else:
            hop = LINK_LATENCY_US if before.chip != layer.chip else 0.0
            layer.start_us = round(before.start_us + before.compute_us * rng.uniform(0.03, 0.12) + hop, 3)
        layer.end_us = round(layer.start_us + layer.compute_us + layer.data_us, 3)
        previous[layer.model] = layer


def _mapping(graph: list[_Layer], chips: int, periods: dict[str, float]) -> dict[str, Any]:
    fps = {model: CLOCK_MHZ * 1e6 / cycles for model, cycles in periods.items()}
    latency = {model: _model_latency_us(graph, model) / SIM_SLOWDOWN / 1000 for model in periods}
    slowest = max(graph, key=lambda layer: layer.cycles)
    return {
        "chip_gen": "mx3", "clock_mhz": CLOCK_MHZ, "effort": "hard", "estimate": "cost model (sample)",
        "num_chips": chips, "num_chips_requested": chips, "simulated": False, "strategy": "proportional",
        "fps": round(sum(fps.values()), 2), "latency_ms": round(max(latency.values()), 4),
        "bottleneck": {"kind": "layer", "layer": slowest.name, "model": slowest.model, "chip": slowest.chip,
                       "cores": slowest.cores, "cycles": slowest.cycles},
        "chips": [_chip_record(graph, chip) for chip in range(chips)],
        "layers": [_layer_record(layer, periods[layer.model]) for layer in graph],
        "links": _links(graph, chips, fps),
        "models": [{"name": model, "fps": round(fps[model], 2), "latency_ms": round(latency[model], 4),
                    "layers": sum(layer.model == model for layer in graph), "period_cycles": periods[model],
                    "bottleneck": _slowest(graph, model)}
                   for model in periods],
        "unsupported_ops": [],
    }


def _slowest(graph: list[_Layer], model: str) -> dict[str, Any]:
    layer = max((layer for layer in graph if layer.model == model), key=lambda layer: layer.cycles)
    return {"kind": "layer", "layer": layer.name, "model": model, "chip": layer.chip, "cores": layer.cores,
            "cycles": layer.cycles}


def _chip_record(graph: list[_Layer], chip: int) -> dict[str, Any]:
    periods = _model_periods(graph)
    record: dict[str, Any] = {"chip": chip}
    for kind, count in (("mac", MAC_CORES), ("alu", ALU_CORES)):
        cores = [0.0] * count
        for layer in graph:
            if layer.chip == chip and layer.kind == kind:
                for core in range(layer.first_core, layer.first_core + layer.cores):
                    cores[core] = round(layer.cycles / periods[layer.model], 3)
        record[f"{kind}_core_utilization"] = cores
        record[f"{kind}_cores"] = sum(1 for u in cores if u > 0)
        record[f"{kind}_utilization"] = round(sum(cores) / count, 4)
    weights = sum(layer.weight_bytes for layer in graph if layer.chip == chip)
    record["weight_bytes"] = weights
    record["weight_utilization"] = round(weights / WEIGHT_MEMORY_BYTES, 4)
    record["feature_bytes"] = sum(int(layer.work ** 0.5) * 24 for layer in graph if layer.chip == chip)
    return record


def _layer_record(layer: _Layer, period: float) -> dict[str, Any]:
    record: dict[str, Any] = {
        "bits": layer.bits, "chip": layer.chip, "cores": layer.cores, "cycles": layer.cycles,
        "first_core": layer.first_core, "fused": [], "kind": layer.kind, "model": layer.model,
        "name": layer.name, "op": layer.op, "utilization": round(layer.cycles / period, 4),
        "weight_bytes": layer.weight_bytes,
    }
    record["macs" if layer.kind == "mac" else "ops"] = layer.work
    return record


def _links(graph: list[_Layer], chips: int, fps: dict[str, float]) -> dict[str, Any]:
    host = {model: sum(MODEL_IO_BYTES[model]) for model in fps}
    load = sum(host[model] * fps[model] for model in fps) / (HOST_BYTES_PER_US * 1e6)
    crossing = [_crossing_bytes(graph, chip) for chip in range(chips - 1)]
    return {
        "host": {"bytes_per_frame": host, "utilization": round(min(1.0, load), 4)},
        "chip_links": [{"from_chip": chip, "to_chip": chip + 1, "bytes_per_frame": crossing[chip],
                        "utilization": round(min(1.0, crossing[chip] * max(fps.values()) / 2e9), 4)}
                       for chip in range(chips - 1)],
    }


def _crossing_bytes(graph: list[_Layer], chip: int) -> int:
    last = [layer for layer in graph if layer.chip == chip]
    return int(last[-1].work ** 0.5) * 16 if last else 0


def _model_latency_us(graph: list[_Layer], model: str) -> float:
    last = [layer for layer in graph if layer.model == model][-1]
    return last.end_us + MODEL_IO_BYTES[model][1] / HOST_BYTES_PER_US


def _timing(graph: list[_Layer], chips: int, period_us: float) -> dict[str, Any]:
    tracks = _layer_tracks(graph, period_us) + _host_tracks(graph, period_us) + _link_tracks(graph, chips, period_us)
    return {
        "frame_period_us": round(period_us, 3),
        "layers": [{"name": layer.name, "model": layer.model, "chip": layer.chip, "kind": layer.kind,
                    "cores": layer.cores, "start_us": layer.start_us, "end_us": layer.end_us,
                    "compute_us": layer.compute_us, "data_us": layer.data_us,
                    "active_fraction": round((layer.compute_us + layer.data_us) / period_us, 4),
                    "macs": layer.work if layer.kind == "mac" else 0, "weight_bytes": layer.weight_bytes}
                   for layer in graph],
        "timeline": tracks,
        "bandwidth": _bandwidth(graph, chips, period_us),
    }


def _repeat(start: float, end: float, period_us: float) -> list[list[float]]:
    return [[round(start + f * period_us, 3), round(end + f * period_us, 3)] for f in range(FRAMES_SHOWN)]


def _layer_tracks(graph: list[_Layer], period_us: float) -> list[dict[str, Any]]:
    return [{"track": f"chip {layer.chip} · {layer.kind.upper()} · {layer.model}/{layer.name}",
             "group": f"chip {layer.chip}", "kind": "layer",
             "spans": _repeat(layer.start_us, layer.end_us, period_us)} for layer in graph]


def _host_windows(graph: list[_Layer], model: str,
                  period_us: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """When a model's input streams in (while its first layer runs) and its output streams out (while
    its last layer produces, finishing a little after it)."""
    layers = [layer for layer in graph if layer.model == model]
    first, last = layers[0], layers[-1]
    out_end = last.end_us + 0.2 * MODEL_IO_BYTES[model][1] / HOST_BYTES_PER_US
    return (0.0, first.end_us), (max(last.start_us, out_end - 0.9 * period_us), out_end)


def _host_tracks(graph: list[_Layer], period_us: float) -> list[dict[str, Any]]:
    tracks = []
    for model in dict.fromkeys(layer.model for layer in graph):
        (in_start, in_end), (out_start, out_end) = _host_windows(graph, model, period_us)
        chips = [layer.chip for layer in graph if layer.model == model]
        tracks.append({"track": f"host → chip {chips[0]} · {model} input", "group": "host link",
                       "kind": "host_in", "spans": _repeat(in_start, in_end, period_us)})
        tracks.append({"track": f"chip {chips[-1]} → host · {model} output", "group": "host link",
                       "kind": "host_out", "spans": _repeat(out_start, out_end, period_us)})
    return tracks


def _link_window(graph: list[_Layer], chip: int) -> tuple[float, float]:
    last = [layer for layer in graph if layer.chip == chip][-1]
    return last.start_us, last.end_us + LINK_LATENCY_US


def _link_tracks(graph: list[_Layer], chips: int, period_us: float) -> list[dict[str, Any]]:
    return [{"track": f"chip {chip}→{chip + 1}", "group": "chip links", "kind": "chip_link",
             "spans": _repeat(*_link_window(graph, chip), period_us)} for chip in range(chips - 1)]


def _bandwidth(graph: list[_Layer], chips: int, period_us: float) -> dict[str, Any]:
    t_us = [round(period_us * i / BANDWIDTH_SAMPLES, 3) for i in range(BANDWIDTH_SAMPLES + 1)]
    inputs, outputs = [], []
    for model in dict.fromkeys(layer.model for layer in graph):
        window_in, window_out = _host_windows(graph, model, period_us)
        inputs.append((window_in, MODEL_IO_BYTES[model][0]))
        outputs.append((window_out, MODEL_IO_BYTES[model][1]))
    series = {"host in": _rate_series(t_us, inputs, period_us, 0.0),
              "host out": _rate_series(t_us, outputs, period_us, 1.3)}
    for chip in range(chips - 1):
        transfer = [(_link_window(graph, chip), _crossing_bytes(graph, chip))]
        series[f"chip {chip}→{chip + 1}"] = _rate_series(t_us, transfer, period_us, 2.1 + chip)
    return {"t_us": t_us, "series": series}


def _rate_series(t_us: list[float], transfers: list[tuple[tuple[float, float], int]], period_us: float,
                 phase: float) -> list[float]:
    """Bytes per second at each time in the frame: each transfer streams evenly over its window
    (folded into one period), with a little jitter as the simulator's host model adds."""
    values = []
    for t in t_us:
        rate = 0.0
        for (start, end), size in transfers:
            width = min(period_us, end - start)
            if width > 0 and (t - start) % period_us < width:
                rate += size / width * 1e6
        values.append(round(rate * (1 + _jitter(t / period_us, phase)), 1))
    return values


def _benchmark(graph: list[_Layer], chips: int, periods: dict[str, float], mapping: dict[str, Any],
               rng: random.Random) -> dict[str, Any]:
    models = [_model_benchmark(graph, model, cycles, rng) for model, cycles in periods.items()]
    for model in models:  # the simulator's binding resource: the same layer, busy every cycle
        model["binding"] = {**_slowest(graph, model["name"]), "busy": 1.0}
    fps = round(min(model["fps"] for model in models), 1)
    slowest = min(models, key=lambda model: model["fps"])
    longest = max(models, key=lambda model: model["latency_ms"])
    post_ms = round(1000 / (fps * 0.73), 3)        # NMS on the host: the usual end-to-end bound
    pre_ms = round(post_ms * 0.36, 3)
    stages = {"host_pre": 1000 / pre_ms, "accelerator": fps, "host_post": 1000 / post_ms}
    bound = min(stages, key=lambda stage: stages[stage])
    for model in models:  # each model with the host sections (the same ones here)
        model["end_to_end"] = {"fps": round(min(model["fps"], 1000 / pre_ms, 1000 / post_ms), 2),
                               "latency_ms": round(model["latency_ms"] + pre_ms + post_ms, 4),
                               "accelerator": "simulated", "host_measured_on": "sample machine",
                               "bound": min({"accelerator": model["fps"], "host pre": 1000 / pre_ms,
                                             "host post": 1000 / post_ms}.items(), key=lambda kv: kv[1])[0],
                               "host_pre_ms": pre_ms, "host_post_ms": post_ms}
    return {
        "simulated": True, "fps": fps, "fps_is": "sets per second, one frame of each of the 2 models (the slowest "
        "model's rate)", "latency_ms": longest["latency_ms"], "latency_model": longest["name"],
        "num_chips": chips, "frames": 200, "models": models, "binding": {"model": slowest["name"], **slowest["binding"]},
        "agreement": [_agreement(model, predicted) for model, predicted in zip(models, mapping["models"])],
        "host": {"pre_ms": pre_ms, "post_ms": post_ms},
        "end_to_end_fps": round(stages[bound], 1),
        "end_to_end_bound": bound.replace("_", " "),
        "bottleneck": mapping["bottleneck"],                # the accelerator's own (cost model)
        "cost_model": {"fps": mapping["fps"], "latency_ms": mapping["latency_ms"]},
    }


def _agreement(model: dict[str, Any], predicted: dict[str, Any]) -> dict[str, Any]:
    return {"model": model["name"],
            "cost_model": {key: predicted[key] for key in ("fps", "latency_ms", "bottleneck")},
            "simulated": {"fps": model["fps"], "latency_ms": model["latency_ms"], "binding": model["binding"]},
            "fps_ratio": round(model["fps"] / predicted["fps"], 4),
            "latency_ratio": round(model["latency_ms"] / predicted["latency_ms"], 4),
            "same_binding": True, "agree": True, "effects": []}


def _model_benchmark(graph: list[_Layer], model: str, cycles: float, rng: random.Random) -> dict[str, Any]:
    latency_ms = round(_model_latency_us(graph, model) / 1000, 3)
    return {
        "name": model, "fps": round(CLOCK_MHZ * 1e6 / cycles / SIM_SLOWDOWN, 1), "latency_ms": latency_ms,
        "first_frame_latency_ms": round(latency_ms * 1.4 + 0.3, 3),
        "accuracy": {"cosine": round(1 - rng.uniform(2e-5, 4e-4), 6), "sqnr_db": round(rng.uniform(31, 42), 2),
                     "max_abs_err": round(rng.uniform(0.004, 0.05), 4)},
    }


def _jitter(x: float, phase: float) -> float:
    """A few percent of smooth, irregular variation over the frame (periodic in x, so frames join)."""
    return 0.035 * math.sin(2 * math.pi * 3 * x + phase) + 0.025 * math.sin(2 * math.pi * 11 * x + 2.7 * phase) \
        + 0.015 * math.sin(2 * math.pi * 29 * x + 0.4 + phase)
