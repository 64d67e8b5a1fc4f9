"""Map stage of family npu: every model's ``quantized.onnx`` in; ``partition.json`` (which layers run on
the NPU and which on the host, as standalone subgraphs whose composition is checked against the whole
model) and ``schedule.json`` (each NPU subgraph's schedule from the cost model) out."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import onnx

from accelbuild.accuracy import random_inputs
from accelbuild.config.schema_check import did_you_mean
from accelbuild.errors import ConfigError, StageError
from accelbuild.stages.context import StageContext
from accelbuild.targets.npu import partition as partitioning
from accelbuild.targets.npu.hardware import npu_hardware
from accelbuild.targets.npu.schedule import schedule
from accelbuild.targets.npu.spec import NpuMapParams
from accelbuild.targets.npu.target import offload
from accelbuild.util.files import write_json_atomic

log = logging.getLogger(__name__)

COMPOSITION_SAMPLES = 2  # seeded random inputs: the check is of the cut, not of accuracy
COMPOSITION_SEED = 0
# The subgraphs hold the very nodes of the whole model and run with graph optimisations off, so their
# composition must reproduce it to float rounding.
COMPOSITION_TOLERANCE = 1e-4


def subgraph_name(model: str, subgraph_id: int) -> str:
    """The name of a subgraph in the package and the records: ``<model>_<id>``."""
    return f"{model}_{subgraph_id}"


def run(ctx: StageContext) -> None:
    p: NpuMapParams = ctx.params
    hw = npu_hardware(p.profile)
    subgraphs: list[dict[str, Any]] = []
    schedules: list[dict[str, Any]] = []
    npu_layers = host_layers = 0
    host_ops: dict[str, int] = {}
    composition: dict[str, float] = {}
    models = {name: onnx.load(str(ctx.inputs[f"{name}/quantized.onnx"])) for name in p.models}
    _check_deny_layers(ctx, list(models.values()), p.offload.deny_layers)
    for name, model in models.items():
        # decided on the float model, as the quantize stage did (its host layers are float in the QDQ model);
        # fail_on_fallback and max_subgraphs fail here, with the reason of each host layer
        decided = partitioning.partition(onnx.load(str(ctx.inputs[f"{name}/ai.onnx"])), hw, offload(p.offload))
        part = partitioning.partition(model, hw, offload(p.offload), units=decided.units)
        error = partitioning.composition_error(model, part, random_inputs(model, COMPOSITION_SAMPLES,
                                                                          COMPOSITION_SEED))
        composition[name] = error
        _check_npu_layers_quantized(name, part)
        if error > COMPOSITION_TOLERANCE:
            raise StageError(f"{name}: running the {len(part.subgraphs)} subgraphs in sequence differs from the "
                             f"whole model by {error:.3g} (a partitioning bug; partition.json not written)")
        files = {sg.id: subgraph_name(name, sg.id) + (".npu" if sg.unit == "npu" else ".onnx")
                 for sg in part.subgraphs}
        record = part.record(name, files)
        log.info("%s: %s: %d subgraph(s), %d on the NPU; %d layer(s) on the NPU%s", p.pipeline, name,
                 len(part.subgraphs), len(part.npu_subgraphs), record["npu_layers"],
                 f", {record['host_layers']} on the host{host_reasons(decided.reasons)}" if record["host_layers"] else "")
        for entry in record["subgraphs"]:
            entry["name"] = subgraph_name(name, entry["id"])
        subgraphs.extend(record["subgraphs"])
        npu_layers += record["npu_layers"]
        host_layers += record["host_layers"]
        for op, count in record["host_ops"].items():
            host_ops[op] = host_ops.get(op, 0) + count
        for sg in part.subgraphs:
            if sg.unit == "npu":
                s = schedule(sg.model, hw, p.effort, p.compile_mode, p.batch_size)
                schedules.append({"name": subgraph_name(name, sg.id), "model": name, "id": sg.id, **s.record()})
    write_json_atomic(ctx.outputs["partition.json"], {
        "platform": hw.name, "subgraphs": subgraphs, "npu_layers": npu_layers, "host_layers": host_layers,
        "host_ops": dict(sorted(host_ops.items())), "host": p.offload.host,
        "composition": {"max_abs_error": composition, "inputs": "random", "samples": COMPOSITION_SAMPLES},
    })
    write_json_atomic(ctx.outputs["schedule.json"], {
        "platform": hw.name, "effort": p.effort, "compile_mode": p.compile_mode, "subgraphs": schedules})
    for entry in schedules:
        log.info("%s: %s: %d layers scheduled, %s cycles, batch %d of %d desired", p.pipeline, entry["name"],
                 len(entry["layers"]), f"{entry['cycles']:,}", entry["actual_batch_size"],
                 entry["desired_batch_size"])
    if host_layers:
        log.info("%s: %d layer(s) on the host (%s): %s", p.pipeline, host_layers, p.offload.host,
                 ", ".join(f"{op} x{n}" for op, n in sorted(host_ops.items())))


def host_reasons(reasons: dict[str, str], shown: int = 2) -> str:
    """`` (9: not supported by the NPU: Softmax; 3: merged into the host: ...)``: why layers run on the host, the
    commonest reasons first (partition.json lists the layers; this says why where the user reads the count)."""
    counted = Counter(reasons.values()).most_common()
    if not counted:
        return ""
    parts = [f"{count}: {reason}" for reason, count in counted[:shown]]
    rest = sum(count for _, count in counted[shown:])
    return f" ({'; '.join(parts)}{f'; {rest} for other reasons' if rest else ''})"


def _check_deny_layers(ctx: StageContext, models: list[onnx.ModelProto], deny_layers: tuple[str, ...]) -> None:
    names = [n.name for model in models for n in model.graph.node]
    known = set(names)
    for index, layer in enumerate(deny_layers):
        if layer not in known:
            raise ConfigError(ctx.locate("target", "offload", "deny_layers", index),
                              f"no layer named {layer!r} in the pipeline's models{did_you_mean(layer, names)}")


WEIGHTED = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})


def _check_npu_layers_quantized(model: str, part: partitioning.Partition) -> None:
    """Every weighted layer placed on the NPU reads integer weights (through DequantizeLinear): an integer
    NPU cannot run float weights, and figures measured on a float layer would be float compared with float."""
    from accelbuild.util import onnx_graph as g

    unquantized = []
    for sg in part.subgraphs:
        if sg.unit != "npu":
            continue
        graph = sg.model.graph
        float_weights = {t.name for t in graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
        unquantized += [n.name for n in graph.node if n.op_type in WEIGHTED and len(n.input) > 1
                        and n.input[1] in float_weights and n.input[1] not in g.producers(graph)]
    if unquantized:
        shown = ", ".join(unquantized[:8]) + (f" and {len(unquantized) - 8} more" if len(unquantized) > 8 else "")
        raise StageError(f"{model}: {len(unquantized)} layer(s) placed on the NPU were not quantized (float weights "
                         f"in quantized.onnx): {shown}; the NPU runs integer layers only. This is a quantizer "
                         f"limitation for this graph: list them in target.offload.deny_layers to run them on the host")
