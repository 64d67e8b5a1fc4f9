"""benchmark: every ``model.ort`` timed on this machine with its recorded session options (median, p90 and
mean latency over ``benchmark.frames``, fps = 1000 / median), its accuracy against the float model,
end-to-end figures with the cropped host sections, and ``report.html``. Every figure is measured, labelled
with the machine."""

from __future__ import annotations

import json
import logging
from typing import Any

import onnx

from accelbuild import accuracy
from accelbuild.errors import StageError
from accelbuild.passes.sections import read_section
from accelbuild.quantize import frames, measure
from accelbuild.stages.context import StageContext
from accelbuild.targets import end_to_end, tvm_compiler
from accelbuild.targets.cpu import report, session
from accelbuild.targets.cpu.spec import CpuBenchmarkParams, program_files
from accelbuild.targets.cpu.timing import time_frames
from accelbuild.util.files import write_bytes_atomic, write_json_atomic
from accelbuild.util.machine import onnxruntime_version, this_machine

log = logging.getLogger(__name__)


def run(ctx: StageContext) -> None:
    p: CpuBenchmarkParams = ctx.params
    machine = this_machine()
    measured_on = machine.describe(onnxruntime_version())
    if p.device is not None and measured_on != p.machine:  # the worker with the resource is another machine
        raise StageError(f"device {p.device}: this worker is {measured_on}, but the build keyed its measurement on "
                         f"{p.machine}; a device name must stand for one kind of machine")
    where = f"device {p.device} ({measured_on})" if p.device is not None else measured_on  # in every figure
    models = [_model(ctx, p, name, p.data[i], where) for i, name in enumerate(p.models)]
    configs = {name: json.loads(ctx.inputs[f"{name}/session.json"].read_text()) for name in p.models}
    record = program_files(p.backend)[1]
    records = {name: json.loads(ctx.inputs[f"{name}/{record}"].read_text()) for name in p.models}
    first = configs[p.models[0]]
    combined = end_to_end.combined_fps([m["fps"] for m in models], "in_turn")
    summary = {
        "measured": True,
        "measured_on": {"device": p.device, "machine": measured_on} if p.device is not None else measured_on,
        "machine": machine.record(),
        "backend": p.backend,
        **({"tvm": records[p.models[0]]["tvm"], "tvm_target": records[p.models[0]]["target"]}
           if p.backend == "tvm" else {}),
        "onnxruntime": onnxruntime_version(),
        "precision": first["precision"],
        "graph_optimization": first["graph_optimization"],
        "intra_op_num_threads": first["intra_op_num_threads"],
        "fps": round(combined[0], 2),
        "fps_is": combined[1],
        "latency_ms": max(m["latency_ms"] for m in models),
        "latency_p90_ms": max(m["latency_p90_ms"] for m in models),
        "models": models,
    }
    write_json_atomic(ctx.outputs["benchmark.json"], summary)
    write_bytes_atomic(ctx.outputs["report.html"], report.render(p.pipeline, summary, configs, records).encode())
    for m in models:
        log.info("%s: %s: %.1f FPS (1000 / median), latency %.3f ms median, %.3f ms p90, %.3f ms mean (measured "
                 "on %s); cosine %.5f vs float (%s)", p.pipeline, m["name"], m["fps"], m["latency_ms"],
                 m["latency_p90_ms"], m["latency_mean_ms"], where,
                 m["accuracy"]["cosine"], frames.said(m["accuracy"]))


def _model(ctx: StageContext, p: CpuBenchmarkParams, name: str, data: Any, measured_on: str) -> dict[str, Any]:
    config = json.loads(ctx.inputs[f"{name}/session.json"].read_text())
    ai_path = ctx.inputs[f"{name}/ai.onnx"]
    ai = onnx.load(str(ai_path))
    compiled = tvm_compiler.load(ctx.inputs[f"{name}/model.so"].read_bytes(), ai) if p.backend == "tvm" else \
        session.load(ctx.inputs[f"{name}/model.ort"].read_bytes(), config)
    feeds, names = accuracy.ai_inputs_named(name, ctx.inputs, ai_path, ctx.inputs[f"{name}/pre.onnx"], p.accuracy,
                                            data, ai)
    wanted = [i.name for i in compiled.get_inputs()]
    frames = [{k: f[k] for k in wanted} for f in feeds]
    timing = time_frames(lambda i: compiled.run(None, frames[i % len(frames)]), p.frames)
    reference = measure.run_all(measure.session(ai), feeds)
    measured = measure.run_all(compiled, feeds)
    figures = timing.record()
    return {
        "name": name,
        **figures,
        "accuracy": {**frames_record(reference, measured, names, p, name, data, [o.name for o in ai.graph.output],
                                     calibrated=config["precision"] == "int8"),
                     "runtime": (f"TVM, model.so ({config['precision']})" if p.backend == "tvm" else
                                 f"onnxruntime, model.ort ({config['precision']})"),
                     "against": "ai.onnx (float) in onnxruntime", **accuracy.describe_inputs(p.accuracy, data, len(feeds))},
        "end_to_end": _end_to_end(ctx, p, name, data, config, compiled, figures, measured_on),
    }


def frames_record(reference: list[list[Any]], measured: list[list[Any]], names: list[str], p: CpuBenchmarkParams,
                  model: str, data: Any, outputs: list[str] | None = None, calibrated: bool = True) -> dict[str, Any]:
    """The per-frame accuracy record: with int8, the model's first calibration frames are labelled so (not
    for a float model the closed loop chose over the int8 one: it was never calibrated)."""
    calibrated_frames = p.calibration_frames[p.models.index(model)] if p.calibration_frames and calibrated else None
    return frames.record(reference, measured, frames.labelled(names, calibrated_frames,
                                                              accuracy.is_random(p.accuracy, data)), outputs)


def _end_to_end(ctx: StageContext, p: CpuBenchmarkParams, name: str, data: Any, config: dict[str, Any],
                compiled: Any, alone: dict[str, Any], measured_on: str) -> dict[str, Any]:
    """The whole model on this CPU: the cropped pre/post sections (onnxruntime, the same session options, from
    their ONNX files) around model.ort, one frame at a time."""
    ai_path = ctx.inputs[f"{name}/ai.onnx"]
    sections = [path if read_section(path) is not None else None
                for path in (ctx.inputs[f"{name}/{s}"] for s in ("pre.onnx", "post.onnx"))]
    record = {"fps": alone["fps"], "latency_ms": alone["latency_ms"], "host_measured_on": measured_on,
              "accelerator": "measured", "sections": "ai.onnx only (no pre/post sections)"}
    if not p.host or not any(sections):
        if any(sections):
            record["sections"] = "ai.onnx only (benchmark.host: false)"
        return record
    pre, post = (None if path is None else _section(path.read_bytes(), config) for path in sections)
    first = onnx.load(str(sections[0] or ai_path))
    own = {role[len(name) + 1:]: path for role, path in ctx.inputs.items() if role.startswith(f"{name}/data:")}
    raw = accuracy.stage_inputs(first, p.accuracy, own if data is not None and own else ctx.inputs, data)

    def frame(i: int) -> None:
        values = dict(raw[i % len(raw)])
        for sess in (pre, compiled, post):
            if sess is not None:
                names = [o.name for o in sess.get_outputs()]
                outs = sess.run(names, {k.name: values[k.name] for k in sess.get_inputs()})
                values.update(zip(names, outs))

    timing = time_frames(frame, p.frames).record()
    record.update(fps=timing["fps"], latency_ms=timing["latency_ms"], latency_p90_ms=timing["latency_p90_ms"],
                  sections=" + ".join(s for s, path in zip(("pre.onnx", program_files(p.backend)[0], "post.onnx"),
                                                             (sections[0], True, sections[1])) if path))
    return record


def _section(model: bytes, config: dict[str, Any]) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(model, session.options(config, for_saving=True), providers=list(config["providers"]))
