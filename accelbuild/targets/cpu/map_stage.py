"""map: choose the onnxruntime session options for a model and record them in ``<model>/session.json``
(threads, graph optimization level, execution mode, providers, config entries, and why)."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import onnx

from accelbuild.errors import StageError
from accelbuild.stages.context import StageContext
from accelbuild.targets.cpu import session
from accelbuild.targets.cpu.spec import ClosedLoopParams, SessionParams
from accelbuild.util.files import write_json_atomic

log = logging.getLogger(__name__)


def run(ctx: StageContext) -> None:
    if isinstance(ctx.params, ClosedLoopParams):
        _closed_loop(ctx)
        return
    p: SessionParams = ctx.params
    config = session.choose(p.precision, p.threads, p.graph_optimization, p.onnxruntime)
    ops = _op_counts(ctx.inputs["quantized.onnx"])
    _check_quantizers(p, ops["QuantizeLinear"], _op_counts(ctx.inputs["ai.onnx"])["QuantizeLinear"])
    config["source"] = _source("quantized.onnx", ops)
    write_json_atomic(ctx.outputs["session.json"], config)
    log.info("%s: onnxruntime %s, %s, graph optimization %s, %s intra-op threads", p.model, p.onnxruntime,
             p.precision, p.graph_optimization, p.threads or "default")


def _closed_loop(ctx: StageContext) -> None:
    """closed_loop.enabled: the session options of the fastest candidate measured (``closed_loop.py``), whose
    model (ai.onnx for float, quantized.onnx for int8) assemble then optimizes."""
    from accelbuild.targets.cpu import closed_loop

    p: ClosedLoopParams = ctx.params
    if _op_counts(ctx.inputs["quantized.onnx"])["QuantizeLinear"] == 0:
        raise StageError(f"{p.model}: quantized.onnx has no QuantizeLinear nodes; the closed loop's int8 "
                         "candidates need the integer model")
    chosen, record = closed_loop.run(ctx)
    config = session.choose(chosen.precision, chosen.threads or None, chosen.graph_optimization, p.onnxruntime)
    config["notes"].append(f"chosen by the closed loop: {record['chosen']['label']} measured fastest on "
                           f"{'device ' + p.device if p.device else 'this machine'} (closed_loop.json)")
    name = closed_loop.MODEL_OF[chosen.precision]
    config["source"] = _source(name, _op_counts(ctx.inputs[name]))
    write_json_atomic(ctx.outputs["closed_loop.json"], record)
    write_json_atomic(ctx.outputs["session.json"], config)


def _source(name: str, ops: Counter[str]) -> dict[str, object]:
    return {"file": name, "nodes": sum(ops.values()), "quantize_linear": ops["QuantizeLinear"],
            "dequantize_linear": ops["DequantizeLinear"]}


def _op_counts(path: Path) -> Counter[str]:
    return Counter(node.op_type for node in onnx.load(str(path), load_external_data=False).graph.node)


def _check_quantizers(p: SessionParams, quantized: int, own: int) -> None:
    """The quantize stage and the target must agree: an int8 build has quantizers, a float build only the
    model's own (``own``, those in ai.onnx: a model may end in its own int8 quantizer; it runs as it is)."""
    if p.precision == "int8" and quantized == 0:
        raise StageError(f"{p.model}: quantized.onnx has no QuantizeLinear nodes, which an int8 build must have")
    if p.precision == "float" and quantized != own:
        raise StageError(f"{p.model}: quantized.onnx has {quantized} QuantizeLinear nodes where the model has "
                         f"{own}; a float build runs the model as it is")
