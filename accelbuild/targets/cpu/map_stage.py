"""map: choose the onnxruntime session options for a model and record them in ``<model>/session.json``
(threads, graph optimization level, execution mode, providers, config entries, and why)."""

from __future__ import annotations

import logging
from collections import Counter

import onnx

from accelbuild.errors import StageError
from accelbuild.stages.context import StageContext
from accelbuild.targets.cpu import session
from accelbuild.targets.cpu.spec import SessionParams
from accelbuild.util.files import write_json_atomic

log = logging.getLogger(__name__)


def run(ctx: StageContext) -> None:
    p: SessionParams = ctx.params
    config = session.choose(p.precision, p.threads, p.graph_optimization, p.onnxruntime)
    ops = Counter(node.op_type for node in onnx.load(str(ctx.inputs["quantized.onnx"]), load_external_data=False)
                  .graph.node)
    if (p.precision == "int8") != (ops["QuantizeLinear"] > 0):  # the quantize stage and the target disagree
        raise StageError(f"{p.model}: quantized.onnx has {ops['QuantizeLinear']} QuantizeLinear nodes, "
                         f"which a {p.precision} build cannot have")
    config["source"] = {"file": "quantized.onnx", "nodes": sum(ops.values()),
                        "quantize_linear": ops["QuantizeLinear"], "dequantize_linear": ops["DequantizeLinear"]}
    write_json_atomic(ctx.outputs["session.json"], config)
    log.info("%s: onnxruntime %s, %s, graph optimization %s, %s intra-op threads", p.model, p.onnxruntime,
             p.precision, p.graph_optimization, p.threads or "default")
