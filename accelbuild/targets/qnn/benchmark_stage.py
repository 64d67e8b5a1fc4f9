"""benchmark: ``benchmark.json`` and ``report.html``. Accuracy: the context model run by onnxruntime-qnn with the
HTP emulated on x86, every frame against the float model in onnxruntime. No timing: the emulator's cycle counts
vary several-fold between runs of one model, so ``fps`` and ``latency_ms`` are null with ``"timing": "needs a
device"`` (measured figures come from a device: docs/qnn.md)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from accelbuild import accuracy
from accelbuild.quantize import frames, measure
from accelbuild.stages.context import StageContext
from accelbuild.targets.qnn.report import render
from accelbuild.targets.qnn.spec import BenchmarkParams
from accelbuild.targets.qnn.toolchain import RUNTIME
from accelbuild.toolchains import read_outputs, run_driver, workspace, write_frames
from accelbuild.util.files import write_bytes_atomic, write_json_atomic
from accelbuild.util.onnx_graph import real_inputs

log = logging.getLogger(__name__)
DRIVER = Path(__file__).with_name("driver.py")
TIMING = "needs a device: the emulator's cycle counts are not a device figure"


def run(ctx: StageContext) -> None:
    p: BenchmarkParams = ctx.params
    env = p.toolchain.environment()
    runtime = f"{RUNTIME} {p.toolchain.version_of(RUNTIME)}"
    models = [_model(ctx, p, env, i, name, runtime) for i, name in enumerate(p.models)]
    summary: dict[str, Any] = {
        "emulated_by": f"{runtime}, HTP emulated on x86",
        "soc": p.soc,
        "soc_model": p.soc_model,
        "fps": None,
        "latency_ms": None,
        "timing": TIMING,
        "offload": {"npu_layers": sum(m["htp_layers"] for m in models),
                    "host_layers": sum(m["cpu_layers"] for m in models)},
        "models": models,
    }
    write_json_atomic(ctx.outputs["benchmark.json"], summary)
    placements = {name: _placement(ctx, name) for name in p.models}
    write_bytes_atomic(ctx.outputs["report.html"], render(p.pipeline, summary, placements).encode())
    for m in models:
        log.info("%s: %s: %d HTP / %d CPU layers on %s; emulated cosine %.5f vs float (%s); no timing (%s)",
                 p.pipeline, m["name"], m["htp_layers"], m["cpu_layers"], p.soc, m["accuracy"]["cosine"],
                 frames.said(m["accuracy"]), TIMING)


def _placement(ctx: StageContext, name: str) -> dict[str, Any]:
    return json.loads(ctx.inputs[f"{name}/placement.json"].read_text())


def _model(ctx: StageContext, p: BenchmarkParams, env, index: int, name: str, runtime: str) -> dict[str, Any]:
    data = p.data[index]
    ai = onnx.load(str(ctx.inputs[f"{name}/ai.onnx"]))
    feeds, names = accuracy.ai_inputs_named(name, ctx.inputs, ctx.inputs[f"{name}/ai.onnx"],
                                            ctx.inputs[f"{name}/pre.onnx"], p.accuracy, data, ai)
    with workspace("accelbuild-qnn-") as work:
        (work / "outputs").mkdir()
        files = write_frames(work / "frames", feeds, [i.name for i in real_inputs(ai.graph)])
        answer = run_driver(env, DRIVER, "emulate", {
            "context": str(ctx.inputs[f"{name}/{name}_ctx.onnx"].resolve()), "soc_model": p.soc_model,
            "frames": files, "outputs": str(work / "outputs")}, work)
        emulated = [[o.astype(np.float32) for o in frame] for frame in read_outputs(answer["outputs"])]
    reference = measure.run_all(measure.session(ai), feeds)
    labels = frames.labelled(names, p.calibration_frames[index], accuracy.is_random(p.accuracy, data))
    placement = _placement(ctx, name)
    return {
        "name": name,
        "fps": None,
        "latency_ms": None,
        "timing": TIMING,
        "htp_layers": placement["htp_layers"],
        "cpu_layers": placement["cpu_layers"],
        "host_ops": placement["host_ops"],
        "accuracy": {**frames.record(reference, emulated, labels, [o.name for o in ai.graph.output]),
                     "runtime": f"{runtime}: the context binary with the HTP emulated on x86",
                     **accuracy.describe_inputs(p.accuracy, data, len(feeds))},
    }
