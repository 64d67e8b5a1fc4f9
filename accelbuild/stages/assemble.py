"""Assemble stage: ``mapping.json`` and every model's ``quantized.onnx`` in; the DFP program file out.

With ``closed_loop.enabled`` it also compiles and simulates every candidate split of the hard mapping,
writing ``closed_loop.json`` and the fastest split as ``best_split.dfp`` (``splits/`` with keep_splits).
"""

from __future__ import annotations

import json

from accelbuild.targets.mx3 import closed_loop
from accelbuild.targets.mx3.assembler import ModelSource, build_dfp, simcfg
from accelbuild.build.worker import StageContext
from accelbuild.targets.mx3.dfp import write_dfp
from accelbuild.targets.mx3.hardware import load_hardware
from accelbuild.targets.mx3.mapper import plan
from accelbuild.util.files import file_sha256, json_digest, write_bytes_atomic, write_json_atomic


def run(ctx: StageContext) -> None:
    pipeline = ctx.pipeline
    mapping = json.loads(ctx.inputs["mapping.json"].read_text())
    models = [ModelSource(m.name, ctx.inputs[f"{m.name}/quantized.onnx"]) for m in pipeline.models]
    sim = simcfg(pipeline.benchmark.frames, pipeline.benchmark.seed) if pipeline.output.sim_dfp else None
    hw = load_hardware(pipeline.target.profile_path)
    target = pipeline.target
    write_dfp(ctx.outputs["dfp"], build_dfp(models, mapping, hw, target.input_format, target.output_format, sim))
    if pipeline.closed_loop.enabled:
        _closed_loop(ctx, mapping, models, hw, sim)


def _closed_loop(ctx: StageContext, mapping: dict, models: list[ModelSource], hw, sim: dict | None) -> None:
    pipeline, loop, bench, target = ctx.pipeline, ctx.pipeline.closed_loop, ctx.pipeline.benchmark, ctx.pipeline.target
    inputs = [plan.ModelInput(m.name, ctx.inputs[f"{m.name}/quantized.onnx"], ctx.inputs[f"{m.name}/quantize.json"])
              for m in pipeline.models]
    records = closed_loop.split_records(inputs, mapping, hw, int(mapping["num_chips_requested"]), target.share_input)
    digest = json_digest({role: file_sha256(path) for role, path in sorted(ctx.inputs.items())})
    settings = {"frames": bench.frames, "seed": bench.seed, "input_format": target.input_format,
                "output_format": target.output_format, "sim": sim, "profile": hw.digest}
    jobs = [closed_loop.SplitJob(i, closed_loop.split_key(digest, r, settings), r, tuple(models),
                                 target.profile_path, target.input_format, target.output_format, sim,
                                 bench.frames, bench.seed) for i, r in enumerate(records)]
    results = closed_loop.run(jobs, loop.jobs, ctx.cache)
    figures = [f for _, f in results]
    best = closed_loop.choose(figures, loop.prioritize_model, [m.name for m in pipeline.models])
    write_bytes_atomic(ctx.outputs["best_split.dfp"], results[best][0])
    write_json_atomic(ctx.outputs["closed_loop.json"],
                      closed_loop.record(figures, records, best, loop.prioritize_model, bench.frames))
    closed_loop.write_splits(pipeline.output.dir / "splits", results, loop.keep_splits)
