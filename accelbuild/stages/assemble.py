"""Assemble stage: ``mapping.json`` and every model's ``quantized.onnx`` in; the DFP program file out."""

from __future__ import annotations

import json

from accelbuild.assembler import ModelSource, build_dfp, simcfg
from accelbuild.build.worker import StageContext
from accelbuild.dfp import write_dfp
from accelbuild.hw.model import load_hardware


def run(ctx: StageContext) -> None:
    pipeline = ctx.pipeline
    mapping = json.loads(ctx.inputs["mapping.json"].read_text())
    models = [ModelSource(m.name, ctx.inputs[f"{m.name}/quantized.onnx"]) for m in pipeline.models]
    sim = simcfg(pipeline.benchmark.frames, pipeline.benchmark.seed) if pipeline.output.sim_dfp else None
    dfp = build_dfp(models, mapping, load_hardware(pipeline.target.profile_path), pipeline.target.input_format,
                    pipeline.target.output_format, sim)
    write_dfp(ctx.outputs["dfp"], dfp)
