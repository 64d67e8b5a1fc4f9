"""Map stage: every model's ``quantized.onnx`` in; ``mapping.json`` (where each layer runs, on how many
cores, and what the cost model predicts) out."""

from __future__ import annotations

import logging

from accelbuild.errors import ConfigError
from accelbuild.stages.context import StageContext
from accelbuild.targets.mx3.hardware import hardware_from_dict
from accelbuild.targets.mx3.mapper import plan
from accelbuild.targets.mx3.mapper.search import DoesNotFit
from accelbuild.targets.mx3.mapper.view import describe
from accelbuild.targets.mx3.params import MapParams
from accelbuild.util.files import write_json_atomic

log = logging.getLogger(__name__)


def run(ctx: StageContext) -> None:
    target: MapParams = ctx.params
    hw = hardware_from_dict(target.profile)
    models = [plan.ModelInput(name, ctx.inputs[f"{name}/quantized.onnx"], ctx.inputs[f"{name}/quantize.json"])
              for name in target.models]
    layers, traffic, shapes = plan.load_layers(models, hw)
    if target.share_input:
        _check_shared_input(ctx, shapes)
    traffic = plan.cost.Traffic(traffic.input_bytes, traffic.output_bytes, target.share_input)
    try:
        mapping = plan.map_pipeline(layers, traffic, hw, target.num_chips, target.effort, target.target_fps)
    except DoesNotFit as exc:
        raise ConfigError(ctx.locate("target", "num_chips"), str(exc)) from None
    record = plan.record(mapping, hw, target.effort)
    if record["unsupported_ops"]:
        log.warning("%s: operators not in the %s profile, modelled as ALU work: %s", target.pipeline, hw.name,
                    ", ".join(record["unsupported_ops"]))
    if record.get("num_chips_reason"):
        log.info("%s: %s", target.pipeline, record["num_chips_reason"])  # a note: fewer chips is the mapper's choice
    for entry in record["models"]:
        log.info("%s: %s: %.1f FPS predicted on %d chip(s), latency %.3f ms, bottleneck %s", target.pipeline,
                 entry["name"], entry["fps"], record["num_chips"], entry["latency_ms"], describe(entry["bottleneck"]))
    write_json_atomic(ctx.outputs["mapping.json"], record)


def _check_shared_input(ctx: StageContext, shapes: dict[str, dict[str, list[int]]]) -> None:
    distinct = {name: list(inputs.values()) for name, inputs in shapes.items()}
    first_name, first = next(iter(distinct.items()))
    for name, value in distinct.items():
        if value != first:
            raise ConfigError(
                ctx.locate("target", "share_input"),
                f"share_input feeds one stream to every model, but their inputs differ: "
                f"{first_name} {first} vs {name} {value}",
            )
