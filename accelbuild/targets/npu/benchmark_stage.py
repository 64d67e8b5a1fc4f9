"""Benchmark stage of family npu: the package in; ``benchmark.json`` (simulated speed, offload, batch,
accuracy of the package's arithmetic against float), ``perf.json`` (the static performance report's
data: the unit-timeline simulation of each model) and ``report.html`` out."""

from __future__ import annotations

import json
import logging
from typing import Any

import onnx

from accelbuild import accuracy
from accelbuild.quantize import frames, measure
from accelbuild.stages.context import StageContext
from accelbuild.targets import credibility, end_to_end
from accelbuild.targets.npu import host_timing, numerics, package
from accelbuild.targets.npu.hardware import Processor
from accelbuild.targets.npu.report import render_npu_report
from accelbuild.targets.npu.simulation import PackageRun, offload_record, simulate_package
from accelbuild.targets.npu.spec import NpuBenchmarkParams
from accelbuild.util.files import write_bytes_atomic, write_json_atomic
from accelbuild.util.machine import this_machine

log = logging.getLogger(__name__)


def run(ctx: StageContext) -> None:
    b: NpuBenchmarkParams = ctx.params
    shown = ctx.inputs["package"].name
    members = package.read_package(ctx.inputs["package"], shown)
    runs = simulate_package(members, shown)
    by_name = {r.name: r for r in runs.models}
    builds = _host_builds(ctx)
    timed: dict[str, numerics.Recorded] = {}
    models: list[dict[str, Any]] = []
    for index, name in enumerate(b.models):
        r = by_name[name]
        t = r.timeline
        record, feeds = _accuracy(ctx, members, name, b.data[index] if b.data else None,
                                  b.calibration_frames[index] if b.calibration_frames else None, builds, timed)
        fps = round(runs.model_fps(r), 2)
        models.append({"name": name, "fps": fps, "latency_ms": round(t.latency_ms, 4),
                       "fps_alone": round(t.fps, 2), "batch_size": t.batch_size, "frames_in_flight": t.frames_in_flight,
                       "cost_model_fps": round(t.cost_model_fps, 2), "agreement": round(t.agreement, 4),
                       "separated_by": t.separated_by, "accuracy": record,
                       "end_to_end": end_to_end.model_record(ctx.inputs, name, fps, t.latency_ms, "simulated",
                                                             b.host, feeds[0])})
    summary = _summary(runs, models)
    summary["offload"]["host_code"] = _host_code_record(ctx, members, runs, timed)
    write_json_atomic(ctx.outputs["benchmark.json"], summary)
    perf = {"simulated": True, "platform": runs.hw.name, "clock_mhz": runs.hw.clock_mhz,
            "models": [{"name": r.name, **r.timeline.record()} for r in runs.models]}
    write_json_atomic(ctx.outputs["perf.json"], perf)
    write_bytes_atomic(ctx.outputs["report.html"], render_npu_report(_report_data(b, runs, summary)).encode("utf-8"))
    for m in models:
        log.info("%s: %s", b.pipeline, _console_line(m, len(models), host_share(by_name[m["name"]].partition)))
    if summary["offload"]["host_layers"] and summary["offload"]["host"] == "arm":
        log.info("%s: %s", b.pipeline, host_code_line(summary["offload"]["host_code"]))


def host_code_line(code: dict[str, Any]) -> str:
    """The host code in one line: what compiled it, its check and its time, or why it is not compiled."""
    if code["compiler"] == "none":
        return f"host subgraphs not compiled (float ONNX): {code['reason']}"
    rows = code["subgraphs"]
    compiled = [r for r in rows if r["compiled"]]
    text = f"host code: {code['compiler']}, {len(compiled)} of {len(rows)} host subgraph(s) compiled ({code['format']})"
    if compiled:
        text += f"; worst cosine vs onnxruntime {min(r['check']['cosine'] for r in compiled):.6f}"
        measured = [r["measured_ms"] for r in compiled if r.get("measured_ms") is not None]
        scaled = [r["scaled_ms"] for r in compiled if r.get("scaled_ms") is not None]
        if measured and scaled:
            text += (f"; {sum(measured):.3f} ms per frame measured here, {sum(scaled):.3f} ms estimated on "
                     f"{code['board_cpu']} (scaled)")
    return text


def _console_line(m: dict[str, Any], count: int, share: str) -> str:
    """One model's figures for the terminal: the rate it gets, what the cost model says of the same thing
    (its rate alone), the end-to-end figures when host sections were timed, and its accuracy."""
    text = f"{m['name']}: {m['fps']:,.1f} FPS, latency {m['latency_ms']:.3f} ms, batch {m['batch_size']} (simulated"
    if count > 1:
        text += f", taking turns with {count - 1} other model(s); {m['fps_alone']:,.1f} FPS alone"
    text += f"; the cost model says {m['cost_model_fps']:,.1f} FPS alone, x{m['agreement']:.3f})"
    if m["separated_by"]:
        text += f", separated by {m['separated_by']}"
    whole = m["end_to_end"]
    if whole["host_measured_on"]:
        text += (f"; end to end {whole['fps']:,.1f} FPS, {whole['latency_ms']:.3f} ms ({whole['bound']}-bound, "
                 "host sections measured here)")
    return text + f"; cosine {m['accuracy']['cosine']:.5f} vs float ({frames.said(m['accuracy'])}){share}"


def host_share(part: Any) -> str:
    """``"; runs entirely / mostly on the host (H of N layers)"`` when the host has most of the layers, else ``""``:
    a build whose NPU does little must say so where the user reads the result."""
    host, npu = len(part.host_layers), len(part.npu_layers)
    if host == 0 or host < npu:
        return ""
    how = "entirely" if npu == 0 else "mostly"
    return f"; runs {how} on the host ({host} of {host + npu} layers)"


def _accuracy(ctx: StageContext, members: dict[str, bytes], name: str, data: Any, calibrated: int | None,
              builds: dict[str, bytes], timed: dict[str, numerics.Recorded]) -> tuple[dict[str, Any],
                                                                                          list[dict[str, Any]]]:
    """The package's subgraphs in sequence against the float model, on the model's accuracy inputs (the
    first ``calibrated`` of them calibrated the activations: labelled so, the headline is the rest). The
    host subgraphs TVM compiled run as built for this machine (``builds``), each call timed into ``timed``."""
    b: NpuBenchmarkParams = ctx.params
    ai_path = ctx.inputs[f"{name}/ai.onnx"]
    ai = onnx.load(str(ai_path))
    feeds, names = accuracy.ai_inputs_named(name, ctx.inputs, ai_path, ctx.inputs[f"{name}/pre.onnx"], b.accuracy,
                                            data, ai)
    reference = measure.run_all(measure.session(ai), feeds)
    steps = numerics.steps_of(members, name, builds)
    timed.update({s.name: numerics.Recorded(s.session()) for s in steps if s.build is not None})
    measured = numerics.run_sequence(steps, feeds, [o.name for o in ai.graph.output], timed)
    labels = frames.labelled(names, calibrated, accuracy.is_random(b.accuracy, data))
    return ({**frames.record(reference, measured, labels, [o.name for o in ai.graph.output]),
             **accuracy.describe_inputs(b.accuracy, data, len(feeds))},
            feeds)


def _host_builds(ctx: StageContext) -> dict[str, bytes]:
    """host_build.tar.gz's builds for this machine, by subgraph name (none without host_compiler tvm)."""
    b: NpuBenchmarkParams = ctx.params
    if b.host_compiler != "tvm":
        return {}
    found = package.read_archive(ctx.inputs["host_build.tar.gz"], "host_build.tar.gz")
    return {name.removesuffix(".so"): data for name, data in found.items()}


def _host_code_record(ctx: StageContext, members: dict[str, bytes], runs: PackageRun,
                      timed: dict[str, numerics.Recorded]) -> dict[str, Any]:
    """benchmark.json's ``offload.host_code``: what compiled the host subgraphs, each one's check against
    onnxruntime (host_code.json), and its time measured here, modelled for the board and scaled from the
    measurement (host_timing.py)."""
    b: NpuBenchmarkParams = ctx.params
    compiler, _, reason = b.host_compiler.partition(": ")
    if compiler != "tvm":
        return {"compiler": "none", "reason": reason}
    record = json.loads(ctx.inputs["host_code.json"].read_text())
    board = runs.hw.arm
    here: Processor | None = None
    sources = {c["name"]: package.source_of(c) for c in package.configs(members)}
    rows = []
    for row in record["subgraphs"]:
        if row["compiled"] and row["name"] in timed:
            here = here or host_timing.reference_core()
            model = onnx.load_from_string(members[sources[row["name"]]])
            row = {**row, **host_timing.subgraph_record(model, timed[row["name"]].median_seconds(), board, here)}
        rows.append(row)
    machine = this_machine()
    return {"compiler": record["compiler"], "format": record["format"], "board_target": record["board_target"],
            "board_cpu": board.name, "measured_on": f"{machine.cpu} ({machine.arch}), one core; TVM's build for "
                                                    f"{record['build_target'].get('mcpu', machine.arch)}",
            "this_core": host_timing.reference_record(here) if here else None, "tolerance": record["tolerance"],
            "subgraphs": rows}


def _summary(runs: PackageRun, models: list[dict[str, Any]]) -> dict[str, Any]:
    desired = [s.desired_batch_size for r in runs.models for s in r.schedules.values()]
    combined = end_to_end.combined_fps([m["fps_alone"] for m in models], "in_turn")
    return {
        "simulated": True,
        "platform": runs.hw.name,
        "credibility": credibility.band("npu", runs.hw.name, runs.hw.digest),
        "fps": round(combined[0], 2),
        "fps_is": combined[1],
        "latency_ms": max(m["latency_ms"] for m in models),
        "batch_size": min((m["batch_size"] for m in models), default=1),
        "frames_in_flight": max((m["frames_in_flight"] for m in models), default=1),
        "desired_batch_size": max(desired, default=1),
        "offload": offload_record(runs),
        "agreement": {"predicted_fps": round(end_to_end.combined_fps([m["cost_model_fps"] for m in models],
                                                                     "in_turn")[0], 2),
                      "simulated_fps": round(combined[0], 2),
                      "ratio": round(min(r.timeline.agreement for r in runs.models), 4),
                      "explanation": _agreement_text(runs)},
        "models": models,
    }


def _agreement_text(runs: PackageRun) -> str:
    parts = []
    for r in runs.models:
        t = r.timeline
        if t.separated_by:
            parts.append(f"{r.name}: simulation and cost model differ by more than 10%, mostly by "
                         f"{t.separated_by.replace('_', ' ')} ({t.effects[t.separated_by]:+.1%})")
        else:
            parts.append(f"{r.name}: simulation within 10% of the cost model")
    return "; ".join(parts)


def _report_data(b: NpuBenchmarkParams, runs: PackageRun, summary: dict[str, Any]) -> dict[str, Any]:
    layers = []
    for r in runs.models:
        for sid, s in sorted(r.schedules.items()):
            for plan in s.record()["layers"]:
                layers.append({"subgraph": f"{r.name}_{sid}", **plan})
    first = runs.models[0].timeline
    return {
        "pipeline": b.pipeline, "platform": runs.hw.name, "clock_mhz": runs.hw.clock_mhz, "benchmark": summary,
        "layers": layers,
        "timeline": {"units": first.units, "frame_us": first.latency_ms * 1e3,
                     "intervals": [i.record() for i in first.intervals]},
        "bandwidth": {"t_us": [first.ddr_bin_us * (k + 0.5) for k in range(len(first.ddr_gbps))],
                      "bytes_per_second": [v * 1e9 for v in first.ddr_gbps],
                      "peak_bytes_per_second": runs.hw.memory.effective_ddr_bytes_per_second},
    }


