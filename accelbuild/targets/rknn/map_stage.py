"""map: ``<model>/placement.json``, every layer of the compiled program with its unit (NPU or CPU), cycles and
DDR traffic, read from the compiler's own layer table in ``rknn_build.log``."""

from __future__ import annotations

from collections import Counter

from accelbuild.errors import StageError
from accelbuild.stages.context import StageContext
from accelbuild.targets.rknn import build_log
from accelbuild.targets.rknn.spec import PlacementParams
from accelbuild.util.files import write_json_atomic

# rows of the toolkit's table that move a model's inputs and outputs, not layers of the model
IO_OPS = frozenset({"InputOperator", "OutputOperator"})


def run(ctx: StageContext) -> None:
    p: PlacementParams = ctx.params
    text = ctx.inputs["rknn_build.log"].read_text()
    layers = build_log.layers(text)
    if not layers:
        raise StageError(f"{ctx.inputs['rknn_build.log']}: no layer table in the toolkit's build log")
    write_json_atomic(ctx.outputs["placement.json"], placement(layers, build_log.memory_bytes(text), p.platform))


def placement(layers: list[build_log.Layer], memory: dict[str, int], platform: str) -> dict[str, object]:
    model_layers = [layer for layer in layers if layer.op not in IO_OPS]
    host = [layer for layer in model_layers if layer.unit == "CPU"]
    return {
        "platform": platform,
        "layers": [layer.as_json() for layer in layers],
        "npu_layers": sum(layer.unit == "NPU" for layer in layers),
        "cpu_layers": sum(layer.unit == "CPU" for layer in layers),
        "cpu_model_layers": len(host),  # CPU layers other than the input and output operators
        "host_ops": dict(sorted(Counter(layer.op for layer in host).items())),
        "cycles": sum(layer.cycles for layer in layers),
        "npu_cycles": sum(layer.npu_cycles for layer in layers),
        "ddr_cycles": sum(layer.ddr_cycles for layer in layers),
        "internal_memory_bytes": memory.get("internal"),
        "weight_memory_bytes": memory.get("weight"),
    }
