"""map: quantized.onnx -> ``<model>/int8.tflite`` (the full-integer TFLite model) and ``<model>/int8.json``
(its operators and the check that LiteRT runs it like quantized.onnx runs in onnxruntime)."""

from __future__ import annotations

import logging
from collections import Counter

import onnx

from accelbuild import accuracy
from accelbuild.errors import ConfigError, StageError
from accelbuild.quantize import frames, measure
from accelbuild.stages.context import StageContext
from accelbuild.targets.ethos_u import vela
from accelbuild.targets.ethos_u.spec import MAX_STEPS, WriteParams
from accelbuild.targets.ethos_u.tflite import kernels, verify
from accelbuild.targets.ethos_u.tflite.writer import UnsupportedOperatorsError, io_layout, write
from accelbuild.util import onnx_graph as g
from accelbuild.util.files import write_bytes_atomic, write_json_atomic

log = logging.getLogger(__name__)
# The check is per operator (verify.check's layers): each TFLite operator, fed its own input codes, against the
# QDQ operator fed the same codes. End to end, each operator may round its requantization one step away
# from onnxruntime's float rounding (TFLite rounds in fixed point) and deep networks compound that; the
# output difference is recorded, not checked.


def run(ctx: StageContext) -> None:
    p: WriteParams = ctx.params
    vela.require()
    qdq = onnx.load(str(ctx.inputs["quantized.onnx"]))
    try:
        data, written_float = write(qdq)
    except UnsupportedOperatorsError as exc:
        raise ConfigError(ctx.locate("path"), f"model {p.model!r}: {exc}") from exc
    ai = onnx.load(str(ctx.inputs["ai.onnx"]))
    feeds, names = accuracy.ai_inputs_named(p.model, ctx.inputs, ctx.inputs["ai.onnx"], ctx.inputs["pre.onnx"],
                                            p.accuracy, p.data, ai)
    chosen = kernels.choose(qdq, len(feeds))
    checked = verify.check(data, qdq, feeds, measure.session(ai), chosen.name)
    layers, outputs = checked.layers, checked.outputs
    labels = frames.labelled(names, p.calibration_frames, accuracy.is_random(p.accuracy, p.data))
    against_float = frames.record(checked.reference, checked.lite, labels, [o.name for o in ai.graph.output])
    record = {
        "bytes": len(data),
        "operators": dict(sorted(Counter(_builtins(data)).items())),
        "channel_last": io_layout(qdq),
        # nodes with no int8 form, written as float operators between DEQUANTIZE and QUANTIZE (Vela runs them
        # on the CPU: benchmark.json's cpu_ops)
        "float_operators": written_float,
        "check": {"against": "quantized.onnx in onnxruntime (no graph optimizations)",
                  "runtime": chosen.runtime, "frames": layers.frames,
                  **accuracy.describe_inputs(p.accuracy, p.data, layers.frames),
                  "layers": {"tensors": layers.tensors, "max_steps": layers.max_steps,
                             "worst_tensor": layers.worst_tensor, "within_one_step": layers.within_one,
                             "differing_by_operator": layers.differing,
                             "allowed_steps": p.max_steps},
                  "outputs": {"max_steps": outputs.max_steps, "within_one_step": outputs.within_one}},
        "accuracy": {"against": "ai.onnx (float) in onnxruntime", "runtime": f"{chosen.runtime}, int8.tflite", **against_float},
    }
    if chosen.name != kernels.REFERENCE:
        record["check"]["kernels"] = {**chosen.record(), "against_reference": _against_reference(data, qdq, feeds)}
    allowed = p.max_steps if p.max_steps is not None else MAX_STEPS[_activation_bits(qdq)]
    record["check"]["layers"]["allowed_steps"] = allowed
    if layers.max_steps > allowed:
        raise StageError(f"{p.model}: int8.tflite in LiteRT differs from quantized.onnx by {layers.max_steps:g} "
                         f"quantization steps at {layers.worst_tensor!r} (fed the same input codes; allowed "
                         f"{allowed:g})")
    if written_float:
        log.warning("%s: %d node(s) without an int8 form written as float CPU operators: %s", p.model,
                    len(written_float), ", ".join(f"{e['op']} ({e['node']})" for e in written_float[:8])
                    + (", ..." if len(written_float) > 8 else ""))
    write_bytes_atomic(ctx.outputs["int8.tflite"], data)
    write_json_atomic(ctx.outputs["int8.json"], record)
    log.info("%s: int8.tflite %d bytes, %d operators; every tensor within %g step(s) of quantized.onnx's operator "
             "(outputs end to end: up to %g steps, %.1f %% within one)", p.model, len(data),
             sum(record["operators"].values()), layers.max_steps, outputs.worst, 100 * outputs.within_one)


def _against_reference(data: bytes, qdq: onnx.ModelProto, feeds: list) -> dict:
    """The optimised kernels against the reference kernels on the first frame (every tensor)."""
    interp = kernels.interpreter(data, kernels.OPTIMISED)
    inputs = [v.name for v in g.real_inputs(qdq.graph)]
    codes, _ = verify.input_codes(interp, feeds[0], io_layout(qdq), inputs)
    return kernels.difference(data, codes)


def _activation_bits(qdq: onnx.ModelProto) -> int:
    """16 when the QDQ model quantizes activations to int16 (int16x8, as auto_precision may choose), else 8."""
    sixteen = {onnx.TensorProto.INT16, onnx.TensorProto.UINT16}
    zero_points = {n.input[2] for n in qdq.graph.node if n.op_type == "QuantizeLinear" and len(n.input) > 2}
    return 16 if any(t.data_type in sixteen for t in qdq.graph.initializer if t.name in zero_points) else 8


def _builtins(data: bytes) -> list[str]:
    import tflite

    model = tflite.Model.GetRootAsModel(data, 0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    graph = model.Subgraphs(0)
    return [names[model.OperatorCodes(graph.Operators(i).OpcodeIndex()).BuiltinCode()]
            for i in range(graph.OperatorsLength())]
