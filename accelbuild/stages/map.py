"""Map stage: every model's ``quantized.onnx`` in; ``mapping.json`` (where each layer runs, on how many
cores, and what the cost model predicts) out."""

from __future__ import annotations

import logging

from accelbuild.build.worker import StageContext
from accelbuild.errors import ConfigError
from accelbuild.targets.mx3.hardware import load_hardware
from accelbuild.targets.mx3.mapper import plan
from accelbuild.targets.mx3.mapper.search import DoesNotFit
from accelbuild.util.files import write_json_atomic

log = logging.getLogger(__name__)


def run(ctx: StageContext) -> None:
    pipeline = ctx.pipeline
    target = pipeline.target
    hw = load_hardware(target.profile_path)
    models = [plan.ModelInput(m.name, ctx.inputs[f"{m.name}/quantized.onnx"], ctx.inputs[f"{m.name}/quantize.json"])
              for m in pipeline.models]
    layers, traffic, shapes = plan.load_layers(models, hw)
    if target.share_input:
        _check_shared_input(ctx, shapes)
    traffic = plan.cost.Traffic(traffic.input_bytes, traffic.output_bytes, target.share_input)
    try:
        mapping = plan.map_pipeline(layers, traffic, hw, target.num_chips, target.effort, target.target_fps)
    except DoesNotFit as exc:
        raise ConfigError(pipeline.where("target", "num_chips"), str(exc)) from None
    record = plan.record(mapping, hw, target.effort)
    if record["unsupported_ops"]:
        log.warning("%s: operators not in the %s profile, modelled as ALU work: %s", pipeline.name, hw.name,
                    ", ".join(record["unsupported_ops"]))
    log.info("%s: %d chip(s), %.1f FPS predicted, bottleneck %s", pipeline.name, record["num_chips"],
             record["fps"], record["bottleneck"].get("layer", record["bottleneck"]["kind"]))
    write_json_atomic(ctx.outputs["mapping.json"], record)


def _check_shared_input(ctx: StageContext, shapes: dict[str, dict[str, list[int]]]) -> None:
    distinct = {name: list(inputs.values()) for name, inputs in shapes.items()}
    first_name, first = next(iter(distinct.items()))
    for name, value in distinct.items():
        if value != first:
            raise ConfigError(
                ctx.pipeline.where("target", "share_input"),
                f"share_input feeds one stream to every model, but their inputs differ: "
                f"{first_name} {first} vs {name} {value}",
            )
