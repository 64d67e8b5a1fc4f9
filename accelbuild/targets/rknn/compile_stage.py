"""quantize, rknn's own: rknn-toolkit2 quantizes the float AI section on the calibration frames, compiles it
for the platform and exports ``<model>/<model>.rknn``; every accuracy frame runs through the toolkit's
simulator in the same session, and its per-layer accuracy analysis runs on the first held-out frame.

Writes ``quantize.json`` (the accuracy record of the simulator against the float model in onnxruntime, the
per-layer analysis as ``layers``, the program's weight memory) and ``rknn_build.log`` (the compiler's report
from the toolkit's log: the layer table the map stage reads; ``build_log.cleaned``).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx

from accelbuild import accuracy
from accelbuild.errors import StageError
from accelbuild.quantize import frames, measure
from accelbuild.stages.context import StageContext
from accelbuild.targets.rknn import build_log
from accelbuild.targets.rknn.spec import CompileParams
from accelbuild.targets.rknn.toolchain import TOOLKIT
from accelbuild.toolchains import read_outputs, run_driver, workspace, write_frames
from accelbuild.util.files import copy_atomic, write_bytes_atomic, write_json_atomic
from accelbuild.util.onnx_graph import real_inputs

log = logging.getLogger(__name__)
DRIVER = Path(__file__).with_name("driver.py")
MAX_OPSET = 19  # the newest ONNX opset rknn-toolkit2 2.5 loads
RECURRENT = frozenset({"LSTM", "GRU", "RNN"})


def run(ctx: StageContext) -> None:
    p: CompileParams = ctx.params
    ai = onnx.load(str(ctx.inputs["ai"]))
    feeds, names = accuracy.ai_inputs_named(p.model, ctx.inputs, ctx.inputs["ai"], ctx.inputs["pre"], p.accuracy,
                                            p.data, ai)
    random = accuracy.is_random(p.accuracy, p.data)
    calibrating = min(p.calibration_frames, len(feeds))
    env = p.toolchain.environment()
    with workspace("accelbuild-rknn-") as work:
        frame_files = write_frames(work / "frames", feeds, [i.name for i in real_inputs(ai.graph)])
        (work / "outputs").mkdir()
        analysed = frame_files[calibrating] if calibrating < len(frame_files) else frame_files[0]
        model_path = _for_toolkit(ai, ctx.inputs["ai"], work)
        answer = run_driver(env, DRIVER, "build", {
            "model": str(model_path), "platform": p.platform, "precision": p.precision,
            "algorithm": p.algorithm, "calibration": frame_files[:calibrating] or frame_files,
            "frames": frame_files, "analysis_frame": analysed, "rknn": str(work / "model.rknn"),
            "build_log": str(work / "build.log"), "outputs": str(work / "outputs"), "workdir": str(work),
        }, work)
        measured = read_outputs(answer["outputs"])
        copy_atomic(work / "model.rknn", ctx.outputs["program"])
        text = build_log.cleaned((work / "build.log").read_text(errors="replace"))
    write_bytes_atomic(ctx.outputs["rknn_build.log"], text.encode())
    reference = measure.run_all(measure.session(ai), feeds)
    _check_shapes(reference[0], measured[0], [o.name for o in ai.graph.output])
    labels = frames.labelled(names, calibrating if p.precision != "float" else None, random)
    record = frames.record(reference, measured, labels, [o.name for o in ai.graph.output])
    memory = build_log.memory_bytes(text)
    write_json_atomic(ctx.outputs["quantize.json"], {
        "quantized_by": f"{TOOLKIT} {env_version(env)}",
        "platform": p.platform,
        "precision": p.precision,
        "quantized_algorithm": p.algorithm if p.precision != "float" else None,
        "calibration_frames": calibrating if p.precision != "float" else 0,
        "weight_bytes": memory.get("weight"),
        "internal_memory_bytes": memory.get("internal"),
        "output": {**record, "runtime": f"{TOOLKIT} simulator (x86), in the session that built the program",
                   **accuracy.describe_inputs(p.accuracy, p.data, len(feeds))},
        "layers": answer["layers"],
        "layers_measured_on": names[frame_files.index(analysed)] if answer["layers"] else None,
    })
    log.info("%s: %s built for %s (%s); simulator cosine %.5f vs float (%s)", p.model, TOOLKIT, p.platform,
             p.precision, record["cosine"], frames.said(record))


def _for_toolkit(ai: onnx.ModelProto, path: Path, work: Path) -> Path:
    """The AI section at an opset the toolkit reads (it takes ONNX opsets up to 19; accelbuild's import may
    write newer ones), converted by onnx's version converter."""
    opset = next((o.version for o in ai.opset_import if o.domain in ("", "ai.onnx")), MAX_OPSET)
    if opset <= MAX_OPSET:
        defaults = _default_layouts(ai)
        if defaults is None:
            return path.resolve()
        target = work / "ai_for_toolkit.onnx"
        onnx.save(defaults, str(target))
        return target
    from onnx import version_converter

    try:
        converted = version_converter.convert_version(ai, MAX_OPSET)
    except Exception as error:  # onnx raises several kinds for an operator it cannot move between opsets
        raise StageError(f"{TOOLKIT} reads ONNX opsets up to {MAX_OPSET}; the AI section is opset {opset} and "
                         f"onnx's version converter could not take it down: {error}") from None
    target = work / "ai_opset19.onnx"
    onnx.save(_default_layouts(converted) or converted, str(target))
    return target


def _default_layouts(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The model without the recurrent layers' ``layout: 0`` (their default), which the toolkit's onnx checker
    refuses ("Unrecognized attribute: layout for operator LSTM"); None when no layer states it."""
    if not any(a.name == "layout" and a.i == 0 for n in model.graph.node if n.op_type in RECURRENT for a in n.attribute):
        return None
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in copy.graph.node:
        if node.op_type in RECURRENT:
            kept = [a for a in node.attribute if not (a.name == "layout" and a.i == 0)]
            del node.attribute[:]
            node.attribute.extend(kept)
    return copy


def _check_shapes(reference: list[np.ndarray], measured: list[np.ndarray], names: list[str]) -> None:
    """The simulator's outputs are the float model's, output for output (never reshaped to fit: a layout the
    toolkit changed would compare the wrong values)."""
    got = [tuple(m.shape) for m in measured]
    want = [tuple(r.shape) for r in reference]
    if got != want:
        raise StageError(f"{TOOLKIT}'s simulator gave outputs of shapes {got} where the model's outputs "
                         f"{names} are {want}")


def env_version(env) -> str:
    return next((pin.split("==")[1] for pin in env.packages if pin.startswith("rknn-toolkit2==")), "?")

