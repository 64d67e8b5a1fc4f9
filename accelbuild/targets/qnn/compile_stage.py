"""map: onnxruntime-qnn compiles quantized.onnx for the SoC's HTP: ``<model>/<model>_ctx.onnx`` (the EPContext
model onnxruntime-qnn loads on a device) with ``<model>/<model>_qnn.bin`` (the HTP context binary), and
``<model>/placement.json``: every node of quantized.onnx, on the HTP or the CPU (with the provider's reason),
from the provider's op trace."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import onnx

from accelbuild.stages.context import StageContext
from accelbuild.targets.qnn.spec import CompileParams
from accelbuild.targets.qnn.toolchain import RUNTIME
from accelbuild.toolchains import run_driver, workspace
from accelbuild.util.files import copy_atomic, write_json_atomic

log = logging.getLogger(__name__)
DRIVER = Path(__file__).with_name("driver.py")
QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})


def run(ctx: StageContext) -> None:
    p: CompileParams = ctx.params
    env = p.toolchain.environment()
    with workspace("accelbuild-qnn-") as work:
        context = work / f"{p.model}.onnx"  # the provider names the binary <stem>_qnn.bin beside it
        run_driver(env, DRIVER, "compile", {"model": str(ctx.inputs["quantized.onnx"].resolve()),
                                            "soc_model": p.soc_model, "context": str(context),
                                            "trace_dir": str(work / "trace")}, work)
        trace = json.loads((work / "trace" / "qnn_op_trace.json").read_text())
        copy_atomic(context, ctx.outputs["context"])
        copy_atomic(work / f"{p.model}_qnn.bin", ctx.outputs["binary"])
    model = onnx.load(str(ctx.inputs["quantized.onnx"]))
    sdk = _sdk_version(onnx.load(str(ctx.outputs["context"])))
    record = placement(model, trace, p.soc, p.soc_model, f"{RUNTIME} {p.toolchain.version_of(RUNTIME)}", sdk)
    write_json_atomic(ctx.outputs["placement.json"], record)
    log.info("%s: compiled for the %s HTP (soc_model %d, QAIRT %s): %d of %d layers on the HTP", p.model, p.soc,
             p.soc_model, sdk, record["htp_layers"], record["htp_layers"] + record["cpu_layers"])


def _sdk_version(context: onnx.ModelProto) -> str:
    for node in context.graph.node:
        for attribute in node.attribute:
            if node.op_type == "EPContext" and attribute.name == "ep_sdk_version":
                return attribute.s.decode()
    return "unknown"


def placement(model: onnx.ModelProto, trace: dict[str, Any], soc: str, soc_model: int, compiled_by: str,
              sdk: str) -> dict[str, Any]:
    """Every node of the QDQ model with its unit: on the CPU when the trace lists it among the provider's
    unsupported nodes (with its reason), else on the HTP (the trace's own op names carry suffixes of its own,
    ``stem.conv_token_7``, so its list of unsupported nodes is the one that names ours)."""
    reasons = {entry["node_name"]: entry.get("reason", "") for entry in trace.get("unsupported_nodes", [])}
    nodes = []
    for node in model.graph.node:
        entry: dict[str, Any] = {"name": node.name, "op": node.op_type, "unit": "CPU" if node.name in reasons else "HTP"}
        if node.name in reasons:
            entry["reason"] = reasons[node.name]
        nodes.append(entry)
    layers = [n for n in nodes if n["op"] not in QDQ]
    host = [n for n in layers if n["unit"] == "CPU"]
    return {
        "soc": soc,
        "soc_model": soc_model,
        "compiled_by": compiled_by,
        "qairt": sdk,
        "nodes": nodes,
        "htp_nodes": sum(n["unit"] == "HTP" for n in nodes),
        "cpu_nodes": sum(n["unit"] == "CPU" for n in nodes),
        "htp_layers": len(layers) - len(host),  # nodes other than Quantize/DequantizeLinear
        "cpu_layers": len(host),
        "host_ops": dict(sorted(Counter(n["op"] for n in host).items())),
        "qnn_subgraphs": trace.get("summary", {}).get("qnn_subgraphs"),
        "trace_summary": trace.get("summary", {}),
    }
