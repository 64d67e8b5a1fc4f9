"""Benchmark stage: the DFP in; ``benchmark.json`` (simulated speed and accuracy, host times),
``layer_stats.yaml`` (per layer placement and timing) and ``report.html`` out."""

from __future__ import annotations

import json
import logging

import yaml

from accelbuild.passes.sections import read_section
from accelbuild.stages.context import StageContext
from accelbuild.targets import end_to_end
from accelbuild.targets.mx3 import agreement, benchmarking
from accelbuild.targets.mx3.params import BenchmarkParams
from accelbuild.targets.mx3.sim import timing
from accelbuild.targets.mx3.sim.program import load_program
from accelbuild.util.files import write_bytes_atomic, write_json_atomic

log = logging.getLogger(__name__)

RECORDED_FRAMES = 12  # frames whose events the report's timeline and bandwidth charts show


def run(ctx: StageContext) -> None:
    bench: BenchmarkParams = ctx.params
    program = load_program(ctx.inputs["dfp"])
    mapping = json.loads(ctx.inputs["mapping.json"].read_text())
    sim = timing.simulate(program, bench.frames, seed=bench.seed, record_frames=RECORDED_FRAMES)
    models = []
    for name in bench.models:
        files = _files(ctx, name)
        own = {role[len(name) + 1:]: path for role, path in ctx.inputs.items() if role.startswith(f"{name}/data:")}
        data = bench.data[bench.models.index(name)] if bench.data else None
        tuned = bench.tuned[bench.models.index(name)] if bench.tuned else False
        figures, crosscheck, feeds = benchmarking.model_accuracy(program, files, bench.accuracy,
                                                                 own if data is not None else ctx.inputs, data, tuned)
        entry = {"name": name, "fps": round(sim.model_fps[name], 2),
                 "latency_ms": round(sim.steady_latency_ms[name], 4),
                 "first_frame_latency_ms": round(sim.first_latency_ms[name], 4),
                 "binding": sim.binding[name], "accuracy": figures, "crosscheck": crosscheck}
        if bench.host and (files.pre is not None or files.post is not None):
            entry["host"] = benchmarking.host_times(files, feeds)
        unsupported = json.loads(ctx.inputs[f"{name}/crop.json"].read_text()).get("unsupported")
        if unsupported:  # operators the chip does not run: moved to the host sections, or kept as ALU work
            entry["unsupported"] = unsupported
        host = entry.get("host", {})
        entry["end_to_end"] = end_to_end.record(entry["fps"], entry["latency_ms"], "simulated", host.get("pre_ms"),
                                                host.get("post_ms"), bench.host, host.get("pre_ms_p10_p90"),
                                                host.get("post_ms_p10_p90"))
        models.append(entry)
    summary = benchmarking.summary(program, sim, models)
    summary["dfp"] = ctx.inputs["dfp"].name
    summary["credibility"] = bench.credibility
    write_json_atomic(ctx.outputs["benchmark.json"], summary)
    text = yaml.safe_dump(benchmarking.layer_stats(sim), sort_keys=False, default_flow_style=False)
    write_bytes_atomic(ctx.outputs["layer_stats.yaml"], text.encode("utf-8"))
    from accelbuild.targets.mx3.report import render_report

    report = render_report({
        "pipeline": bench.pipeline, "chip_gen": program.dfp.header.chip_gen, "num_chips": program.dfp.header.num_chips,
        "clock_mhz": program.hardware["clock_mhz"], "simulated": True, "benchmark": summary,
        "mapping": benchmarking.report_mapping(program, mapping),
        "timing": benchmarking.timing_for_report(sim, program, recorded_frames=RECORDED_FRAMES),
    })
    write_bytes_atomic(ctx.outputs["report.html"], report.encode("utf-8"))
    _log_summary(bench.pipeline, summary)


def _log_summary(pipeline: str, summary: dict) -> None:
    """The terminal's account, per model: its simulated rate and binding resource against the cost model, and
    its end-to-end figures with the host sections; a combined figure only when there is more than one model."""
    for entry, model in zip(summary["agreement"], summary["models"]):
        log.info("%s: %s", pipeline, agreement.summary_line(entry))
        whole = model["end_to_end"]
        if whole["host_measured_on"]:
            log.info("%s: %s: end to end %s FPS, %.3f ms (%s-bound; host sections measured here)", pipeline,
                     model["name"], f"{whole['fps']:,.1f}", whole["latency_ms"], whole["bound"])
    if len(summary["models"]) > 1:
        log.info("%s: %s %s", pipeline, f"{summary['fps']:,.1f}", summary["fps_is"])


def _files(ctx: StageContext, name: str) -> benchmarking.ModelFiles:
    return benchmarking.ModelFiles(
        name, ctx.inputs[f"{name}/ai.onnx"], ctx.inputs[f"{name}/quantized.onnx"],
        read_section(ctx.inputs[f"{name}/pre.onnx"]), read_section(ctx.inputs[f"{name}/post.onnx"]),
    )
