"""assemble: quantized.onnx optimized by onnxruntime with the session's options and saved in its ORT format,
``<model>/model.ort`` (canonical bytes, ``ort_format``), and ``<model>/ort.json``: its operators after
optimization and the check that it computes what quantized.onnx computes."""

from __future__ import annotations

import json
import logging
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import onnx

from accelbuild import accuracy
from accelbuild.errors import StageError
from accelbuild.frontends.onnx_model import serialize
from accelbuild.quantize import measure
from accelbuild.stages.context import StageContext
from accelbuild.targets.cpu import ort_format, session
from accelbuild.targets.cpu.spec import OrtParams, TvmParams
from accelbuild.util.files import write_bytes_atomic, write_json_atomic
from accelbuild.util.machine import onnxruntime_version

log = logging.getLogger(__name__)
# float graph rewrites (fusions) only reorder float arithmetic; int8 kernels round once per requantization
MIN_FLOAT_COSINE = 0.9999
NCHWC_ORDER = ("onnxruntime's NCHWc transformer creates its ReorderOutput nodes in hash-map order, so their "
               "indices and names can differ between builds; the rest of model.ort is canonical")


def run(ctx: StageContext) -> None:
    if isinstance(ctx.params, TvmParams):  # backend tvm
        from accelbuild.targets.cpu import tvm_stage

        tvm_stage.run(ctx)
        return
    p: OrtParams = ctx.params
    installed = onnxruntime_version()
    if installed != p.onnxruntime:  # the build digested another onnxruntime than the one that would run
        raise StageError(f"onnxruntime {installed} is installed, but the build was planned with {p.onnxruntime}")
    config = json.loads(ctx.inputs["session.json"].read_text())
    # the model session.json names: quantized.onnx, or ai.onnx where the closed loop chose float
    source = config.get("source", {}).get("file", "quantized.onnx")
    model = onnx.load(str(ctx.inputs[source]))
    raw = optimize(serialize(model), config)
    data = ort_format.canonical(raw)
    ops = operators(data)
    feeds = accuracy.ai_inputs(p.model, ctx.inputs, ctx.inputs["ai.onnx"], ctx.inputs["pre.onnx"], p.accuracy, p.data)
    check = _check(model, data, config, feeds)
    if config["precision"] == "float" and check["cosine"] < MIN_FLOAT_COSINE:
        raise StageError(f"{p.model}: model.ort differs from {source} (cosine {check['cosine']:.6f}, below "
                         f"{MIN_FLOAT_COSINE}): onnxruntime's optimizations changed what the model computes")
    nchwc = sum(n for op, n in ops.items() if op.startswith("com.microsoft.nchwc:"))
    write_bytes_atomic(ctx.outputs["model.ort"], data)
    write_json_atomic(ctx.outputs["ort.json"], {
        "onnxruntime": p.onnxruntime,
        "bytes": len(data),
        "graph_optimization": config["graph_optimization"],
        "operators": ops,
        "integer_operators": sum(n for op, n in ops.items() if _integer(op)),
        "hardware_specific": {"nchwc_operators": nchwc, "vector_isa": p.vector_isa,
                              "deterministic": False, "why": NCHWC_ORDER} if nchwc else None,
        "canonical": {"from_bytes": len(raw), "why": "onnxruntime orders the FlatBuffer by hash-map iteration; "
                      "accelbuild rewrites the same content in one fixed order"},
        "check": {"against": f"{source} in onnxruntime (no graph optimizations, 1 thread)",
                  "runtime": "onnxruntime, model.ort (1 thread)", **check,
                  **accuracy.describe_inputs(p.accuracy, p.data, len(feeds))},
    })
    log.info("%s: model.ort %d bytes, %d operators (%d integer%s); against %s: cosine %.6f", p.model, len(data), sum(ops.values()), sum(n for op, n in ops.items() if _integer(op)),
             f", {nchwc} NCHWc" if nchwc else "", source, check["cosine"])


def optimize(model: bytes, config: dict) -> bytes:
    """onnxruntime's optimized graph of ``model`` in its ORT format (as onnxruntime writes it)."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="accelbuild-ort-") as tmp:
        target = Path(tmp) / "model.ort"
        so = session.options(config, threads=1, for_saving=True)
        so.optimized_model_filepath = str(target)
        so.add_session_config_entry("session.save_model_format", "ORT")
        try:
            ort.InferenceSession(model, so, providers=list(config["providers"]))
        except Exception as exc:  # onnxruntime's own exception types
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StageError(f"onnxruntime cannot optimize the model ({first[:300]})") from None
        return target.read_bytes()


def operators(data: bytes) -> dict[str, int]:
    """``domain:op_type`` -> count of the nodes in an ORT format model (sorted)."""
    from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs.InferenceSession import InferenceSession

    graph = InferenceSession.GetRootAsInferenceSession(data, 0).Model().Graph()
    names = Counter()
    for i in range(graph.NodesLength()):
        node = graph.Nodes(i)
        names[f"{(node.Domain() or b'').decode() or 'ai.onnx'}:{node.OpType().decode()}"] += 1
    return dict(sorted(names.items()))


def _integer(op: str) -> bool:
    name = op.split(":", 1)[1]
    return name.startswith("QLinear") or "Integer" in name or name in ("QGemm", "QAttention")


def _check(model: onnx.ModelProto, data: bytes, config: dict, feeds: list[measure.Feeds]) -> dict[str, float]:
    """model.ort against quantized.onnx as written (onnxruntime with every optimization off)."""
    compiled = session.load(data, config, threads=1)
    return measure.compare(measure.run_all(reference_session(model), feeds), measure.run_all(compiled, feeds))


def reference_session(model: onnx.ModelProto) -> Any:
    """quantized.onnx as written: onnxruntime's CPU provider with every optimization off, 1 thread."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(serialize(model), so, providers=list(session.PROVIDERS))
