"""assemble, ``backend: tvm``: quantized.onnx compiled by TVM for this CPU into ``<model>/model.so``, and
``<model>/tvm.json``: the target, the operators compiled, and the check that model.so computes what
quantized.onnx computes in onnxruntime (same inputs as every accuracy figure)."""

from __future__ import annotations

import logging
import tempfile
from collections import Counter
from pathlib import Path

import onnx

from accelbuild import accuracy
from accelbuild.errors import StageError
from accelbuild.quantize import measure
from accelbuild.stages.context import StageContext
from accelbuild.targets import tvm_compiler
from accelbuild.targets.cpu.assemble_stage import MIN_FLOAT_COSINE, reference_session
from accelbuild.targets.cpu.spec import TvmParams
from accelbuild.util.files import write_bytes_atomic, write_json_atomic

log = logging.getLogger(__name__)


def run(ctx: StageContext) -> None:
    p: TvmParams = ctx.params
    tvm_compiler.require_version(p.tvm)
    model = onnx.load(str(ctx.inputs["quantized.onnx"]))
    target = tvm_compiler.host_target()
    with tempfile.TemporaryDirectory(prefix="accelbuild-tvm-") as tmp:
        library = Path(tmp) / "model.so"
        tvm_compiler.compile_model(model, target, library)
        data = library.read_bytes()
    feeds = accuracy.ai_inputs(p.model, ctx.inputs, ctx.inputs["ai.onnx"], ctx.inputs["pre.onnx"], p.accuracy, p.data)
    compiled = tvm_compiler.load(data, model)
    check = measure.compare(measure.run_all(reference_session(model), feeds), measure.run_all(compiled, feeds))
    float_model = not any(n.op_type == "QuantizeLinear" for n in model.graph.node)
    if float_model and check["cosine"] < MIN_FLOAT_COSINE:
        raise StageError(f"{p.model}: model.so differs from quantized.onnx (cosine {check['cosine']:.6f}, below "
                         f"{MIN_FLOAT_COSINE}): TVM's compilation changed what the model computes")
    ops = Counter(f"{n.domain or 'ai.onnx'}:{n.op_type}" for n in model.graph.node)
    write_bytes_atomic(ctx.outputs["model.so"], data)
    write_json_atomic(ctx.outputs["tvm.json"], {
        "tvm": p.tvm,
        "program": "model.so",
        "bytes": len(data),
        "target": target,
        "abi": "Relax VM executable: tvm.relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())['main'], "
               "inputs and outputs in the ONNX graph's order",
        "operators": dict(sorted(ops.items())),
        "integer_operators": sum(n for op, n in ops.items() if op.endswith(("QuantizeLinear", "DequantizeLinear"))),
        "check": {"against": "quantized.onnx in onnxruntime (no graph optimizations, 1 thread)",
                  "runtime": f"TVM {p.tvm} VM, model.so", "tolerance_cosine": MIN_FLOAT_COSINE if float_model else None,
                  **check, **accuracy.describe_inputs(p.accuracy, p.data, len(feeds))},
    })
    log.info("%s: model.so %d bytes for %s; against quantized.onnx: cosine %.6f, max abs err %.3g", p.model,
             len(data), target["mcpu"], check["cosine"], check["max_abs_err"])
