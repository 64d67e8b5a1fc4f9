"""What a benchmark measures: the chip's accuracy (numeric simulation of the DFP against the float AI
section), its speed (timing simulation), and the host sections' real time in onnxruntime.

Every figure that comes from the modelled accelerator is marked ``"simulated": true``; host times are
measured on this machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from accelbuild import accuracy
from accelbuild.quantize import frames, measure
from accelbuild.stages.params import AccuracyInputs, DataParams
from accelbuild.targets import end_to_end
from accelbuild.targets.mx3 import agreement
from accelbuild.targets.mx3.sim import numeric, timing
from accelbuild.targets.mx3.sim.program import Program


@dataclass
class ModelFiles:
    name: str
    ai: Path
    quantized: Path
    pre: onnx.ModelProto | None  # the host sections (None: the crop stage cut off none)
    post: onnx.ModelProto | None


def model_accuracy(program: Program, files: ModelFiles, source: AccuracyInputs, inputs: dict[str, Path],
                   data: DataParams | None = None, tuned: bool = False,
                   ) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, np.ndarray]]]:
    """(accuracy vs float, cross-check vs quantized.onnx, the AI section's inputs) for one model. Weights
    are quantized without data, so the frames are held out, unless auto_precision chose by them
    (``tuned``)."""
    ai = onnx.load(str(files.ai))
    pre = files.pre
    feeds, names = accuracy.stage_inputs_named(pre or ai, source, inputs, data)
    feeds = accuracy.through(pre, feeds)
    entry = next(m for m in program.models if m.name == files.name)
    chip = numeric.run(entry, program.hardware.get("approximations", {}), feeds)
    reference = measure.run_all(measure.session(ai), feeds)
    quantized = measure.bf16_outputs(onnx.load(str(files.quantized)), feeds)
    figures = frames.record(reference, chip, frames.labelled(names, len(names) if tuned else None,
                                                             accuracy.is_random(source, data)),
                            [o.name for o in ai.graph.output])
    crosscheck = measure.compare(quantized, chip)
    return ({**figures, **accuracy.describe_inputs(source, data, len(feeds))},
            {"against": "quantized.onnx in onnxruntime, bfloat16 activations", **crosscheck}, feeds)


def host_times(files: ModelFiles, ai_feeds: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Median milliseconds of the host pre/post sections in onnxruntime on this machine, and the p10 and p90 of
    their runs (the machine named in ``measured_on``: a benchmark restored from a shared cache carries another
    machine's timings)."""
    pre, post = end_to_end.host_section_times(files.pre, files.post, onnx.load(str(files.ai)), ai_feeds[0])
    result: dict[str, Any] = {"measured_on": end_to_end.measured_on()}
    for key, timed in (("pre", pre), ("post", post)):
        if timed is not None:
            result[f"{key}_ms"] = timed.median_ms
            result[f"{key}_ms_p10_p90"] = timed.p10_p90
    return result


def summary(program: Program, sim: timing.TimingResult, models: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``benchmark.json`` object. The headline is per model (``models[]``); the top-level ``fps`` is the
    one combined figure that means something (``fps_is`` names it). The cost-model figures are the simulated
    program's own (for a closed loop the chosen split's), so the comparison is of one program."""
    how = "shared_input" if program.share_input else "concurrent"
    fps, fps_is = end_to_end.combined_fps([sim.model_fps[m["name"]] for m in models], how)
    whole_fps, _ = end_to_end.combined_fps([m["end_to_end"]["fps"] for m in models], how)
    slowest_whole = min(models, key=lambda m: m["end_to_end"]["fps"])
    host_pre = max((m.get("host", {}).get("pre_ms", 0.0) for m in models), default=0.0)
    host_post = max((m.get("host", {}).get("post_ms", 0.0) for m in models), default=0.0)
    predicted = program.predicted
    names = [m["name"] for m in models]
    slowest = min(names, key=lambda n: (sim.model_fps[n], names.index(n)))
    longest = max(names, key=lambda n: (sim.steady_latency_ms[n], -names.index(n)))
    result: dict[str, Any] = {
        "simulated": True,
        "fps": round(fps, 2),
        "fps_is": fps_is,
        "latency_ms": round(sim.steady_latency_ms[longest], 4),
        "latency_model": longest,
        "first_frame_latency_ms": round(max(sim.first_latency_ms.values()), 4),
        "num_chips": program.dfp.header.num_chips,
        "chip_gen": program.dfp.header.chip_gen,
        "frames": sim.frames,
        "models": models,
        "end_to_end_fps": round(whole_fps, 2),
        "end_to_end_bound": slowest_whole["end_to_end"]["bound"],
        "binding": {"model": slowest, **sim.binding[slowest]},
        "bottleneck": predicted.get("bottleneck"),
        "cost_model": {"fps": predicted.get("fps"), "latency_ms": predicted.get("latency_ms"),
                       "bottleneck": predicted.get("bottleneck")},
        "agreement": agreement_of(program, sim, names),
    }
    if host_pre or host_post:  # a section that does not exist is null
        result["host"] = {"pre_ms": host_pre or None, "post_ms": host_post or None,
                          "measured_on": "this host, onnxruntime CPU"}
    return result


def agreement_of(program: Program, sim: timing.TimingResult, names: list[str]) -> list[dict[str, Any]]:
    """Per model, the cost model's figures for this program against the simulated ones."""
    predicted = {m["name"]: m for m in program.predicted.get("models", [])}
    return [agreement.compare(name, predicted.get(name, {}), sim.model_fps[name], sim.steady_latency_ms[name],
                              sim.first_latency_ms[name], sim.binding[name]) for name in names]


def report_mapping(program: Program, mapping: dict[str, Any]) -> dict[str, Any]:
    """``mapping.json`` as the report shows it, for the program that was simulated. With the closed loop the
    shipped program can be another split than mapping.json's (the cost model's first choice): then its
    figures and placement come from the DFP itself."""
    placed = json.loads(program.dfp.sections["program"])
    if placed["boundaries"] == mapping.get("boundaries") and placed.get("strategy") == mapping.get("strategy"):
        return mapping
    hw = program.hardware
    layers = [row for model in program.models for row in model.layers]
    chips = []
    for summary in program.dfp.header.extra.get("chips", []):
        cores = {"mac": [0.0] * int(hw["mac_cores"]), "alu": [0.0] * int(hw["alu_cores"])}
        for row in layers:
            if row["chip"] == summary["chip"]:
                for core in range(row["first_core"], row["first_core"] + row["cores"]):
                    cores[row["kind"]][core] = round(float(row["utilization"]), 3)
        chips.append({**summary, "weight_utilization": round(summary["weight_bytes"] / hw["weight_memory_bytes"], 4),
                      "mac_core_utilization": cores["mac"], "alu_core_utilization": cores["alu"]})
    predicted = program.predicted
    return {**mapping, "fps": predicted["fps"], "latency_ms": predicted["latency_ms"],
            "bottleneck": predicted["bottleneck"], "models": predicted.get("models", mapping.get("models")),
            "boundaries": placed["boundaries"], "strategy": placed.get("strategy"), "chips": chips, "layers": layers}


def layer_stats(sim: timing.TimingResult) -> list[dict[str, Any]]:
    return [{key: layer[key] for key in ("name", "model", "chip", "cores", "start_cycle", "end_cycle")}
            | {"macs": int(layer.get("macs") or 0), "weight_bytes": int(layer.get("weight_bytes") or 0)}
            for layer in sim.layers]


def timing_for_report(sim: timing.TimingResult, program: Program, max_tracks: int = 80,
                      recorded_frames: int = 12) -> dict[str, Any]:
    """Layer timings, a timeline of the first frames, and link bandwidth in the steady state, in
    microseconds. The bandwidth window is the last frame periods of the run (frames, not pipeline fill):
    each transfer moves its bytes at its own rate while it is on the link, and ``bytes_per_frame`` is what
    one frame puts on each link (the schedule's bytes, the same as quantize.json's packets and
    mapping.json's chip links)."""
    hw = program.hardware
    slowest = min(sim.model_fps.values(), default=0.0)
    period = 1.0 / slowest if slowest else 0.0  # one frame of every model
    tracks: dict[str, dict[str, Any]] = {}
    for span in sim.spans:
        if span.frame >= recorded_frames:
            continue
        track = tracks.setdefault(span.track, {"track": span.track, "group": span.track.split(" · ")[0],
                                               "kind": span.kind, "spans": []})
        track["spans"].append([round(span.start * 1e6, 3), round(span.end * 1e6, 3)])
    busiest = sorted(tracks.values(), key=lambda t: -sum(e - s for s, e in t["spans"]))
    timeline = [t for t in busiest if t["kind"] != "layer"] + [t for t in busiest if t["kind"] == "layer"][:max_tracks]
    return {
        "frame_period_us": round(period * 1e6, 3),
        "layers": [{**{k: layer[k] for k in ("name", "model", "chip", "kind", "cores", "macs", "weight_bytes",
                                               "compute_us", "data_us", "active_fraction")},
                    "start_us": round(layer["start_cycle"] / (hw["clock_mhz"]), 3),
                    "end_us": round(layer["end_cycle"] / (hw["clock_mhz"]), 3)} for layer in sim.layers],
        "timeline": timeline,
        "bandwidth": steady_bandwidth(sim, period),
    }


def steady_bandwidth(sim: timing.TimingResult, period: float, periods: int = 4) -> dict[str, Any]:
    """Per link: bytes per frame, and its rate over a window of ``periods`` frame periods ending where the
    last frame's input starts (all earlier frames' transfers are in flight by then: the steady state)."""
    transfers = [s for s in sim.spans if s.kind != "layer"]
    if not transfers or period <= 0:
        return {"t_us": [], "series": {}, "bytes_per_frame": {}}
    last = max(s.frame for s in transfers)
    steady = max(0, last - 1)  # a whole frame, not the run's last (its output may still be on the link)
    per_frame: dict[str, float] = {}
    for span in transfers:
        if span.frame == steady:
            per_frame[span.track] = per_frame.get(span.track, 0.0) + span.nbytes
    end = max(s.start for s in transfers if s.kind == "host_in" and s.frame == last)
    start = max(0.0, end - periods * period)
    grid = [start + (end - start) * i / 200 for i in range(201)]
    series: dict[str, list[float]] = {track: [0.0] * len(grid) for track in dict.fromkeys(s.track for s in transfers)}
    moved = {track: 0.0 for track in series}
    for span in transfers:
        if span.end <= start or span.start >= end or span.end <= span.start:
            continue
        rate = span.nbytes / (span.end - span.start)
        moved[span.track] += rate * (min(span.end, end) - max(span.start, start))
        for i, t in enumerate(grid):
            if span.start <= t < span.end:
                series[span.track][i] += rate
    return {"t_us": [round((t - start) * 1e6, 3) for t in grid], "series": series,
            "bytes_per_frame": {track: round(per_frame.get(track, 0.0)) for track in series},
            "window_us": round((end - start) * 1e6, 3), "window_bytes": {t: round(b) for t, b in moved.items()},
            "running": running_models(sim, transfers, start, end)}


def running_models(sim: timing.TimingResult, transfers: list[timing.Span], start: float, end: float
                   ) -> dict[str, dict[str, float | None]]:
    """Per model, when it moves data in the window ``start``..``end`` (seconds): ``from_us`` / ``until_us``
    (from the window's start) where its host transfers begin late or stop early by more than one of its
    frame periods, None where they reach the window's edge. A model with a higher frame rate finishes its
    frames before the slowest one does, so near the run's end not every model is running."""
    running: dict[str, dict[str, float | None]] = {}
    for model in sorted(sim.model_fps):
        spans = [s for s in transfers if s.kind in ("host_in", "host_out") and s.track.endswith(f" · {model}")
                 and s.end > start and s.start < end]
        if not spans:
            running[model] = {"from_us": None, "until_us": 0.0}  # done before the window
            continue
        period = 1.0 / sim.model_fps[model] if sim.model_fps[model] else end - start
        first, last = min(max(s.start, start) for s in spans), max(min(s.end, end) for s in spans)
        running[model] = {"from_us": round((first - start) * 1e6, 3) if first - start > period else None,
                          "until_us": round((last - start) * 1e6, 3) if end - last > period else None}
    return running
