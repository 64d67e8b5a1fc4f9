"""Assemble stage: ``mapping.json`` and every model's ``quantized.onnx`` in; the DFP program file out.

With ``closed_loop.enabled`` it also compiles and simulates every candidate split of the hard mapping:
the fastest measured split is the program to ship, written as the DFP (``<dfp_name>``) and, the same
bytes, as ``best_split.dfp``; the cost model's own first choice is kept as ``cost_model_choice.dfp`` when
it differs; ``closed_loop.json`` says which is which; with keep_splits every split is under ``splits/``
(a declared folder output, so a cache hit restores it too).
"""

from __future__ import annotations

import json

from accelbuild.errors import StageError
from accelbuild.stages.context import StageContext
from accelbuild.targets.mx3 import closed_loop
from accelbuild.targets.mx3.assembler import ModelSource, build_dfp, simcfg
from accelbuild.targets.mx3.dfp import dfp_bytes, write_dfp
from accelbuild.targets.mx3.hardware import HardwareProfile, hardware_from_dict
from accelbuild.targets.mx3.mapper import plan
from accelbuild.targets.mx3.params import AssembleParams
from accelbuild.util.files import file_sha256, json_digest, write_bytes_atomic, write_json_atomic


def run(ctx: StageContext) -> None:
    params: AssembleParams = ctx.params
    mapping = json.loads(ctx.inputs["mapping.json"].read_text())
    models = [ModelSource(name, ctx.inputs[f"{name}/quantized.onnx"]) for name in params.models]
    sim = None
    if params.sim_dfp:
        if params.frames is None or params.seed is None:
            raise StageError("assemble: sim_dfp is set but the benchmark's frames and seed are not")
        sim = simcfg(params.frames, params.seed)
    hw = hardware_from_dict(params.profile)
    program = build_dfp(models, mapping, hw, params.input_format, params.output_format, sim,
                        share_input=params.share_input)
    if params.closed_loop.enabled:
        _closed_loop(ctx, params, mapping, models, hw, sim, dfp_bytes(program))
    else:
        write_dfp(ctx.outputs["dfp"], program)


def _closed_loop(ctx: StageContext, params: AssembleParams, mapping: dict, models: list[ModelSource],
                 hw: HardwareProfile, sim: dict | None, first_choice: bytes) -> None:
    """Every split measured; the best one is the program to ship (``<dfp_name>``, the same bytes as
    best_split.dfp); the cost model's own first choice is kept as cost_model_choice.dfp when it differs."""
    loop = params.closed_loop
    assert params.frames is not None and params.seed is not None
    inputs = [plan.ModelInput(name, ctx.inputs[f"{name}/quantized.onnx"], ctx.inputs[f"{name}/quantize.json"])
              for name in params.models]
    records = closed_loop.split_records(inputs, mapping, hw, int(mapping["num_chips_requested"]), params.share_input)
    digest = json_digest({role: file_sha256(path) for role, path in sorted(ctx.inputs.items())})
    settings = {"frames": params.frames, "seed": params.seed, "input_format": params.input_format,
                "output_format": params.output_format, "share_input": params.share_input, "sim": sim,
                "profile": hw.digest}
    # the engine hands the stage the digest of accelbuild's code (keys of cached splits depend on mx3's)
    assert ctx.cache is None or ctx.code_digest is not None, "a split cache needs the code digest"
    code = ctx.code_digest(("accelbuild.targets.mx3",)) if ctx.code_digest is not None else None
    jobs = [closed_loop.SplitJob(i, closed_loop.split_key(digest, r, settings, code), r, tuple(models),
                                 params.profile, params.input_format, params.output_format, params.share_input,
                                 sim, params.frames, params.seed) for i, r in enumerate(records)]
    results = closed_loop.run(jobs, ctx.jobs, ctx.cache, ctx.fan_out)
    figures = [f for _, f in results]
    best = closed_loop.choose(figures, loop.prioritize_model, list(params.models))
    shipped = results[best][0]
    kept = shipped != first_choice
    write_bytes_atomic(ctx.outputs["dfp"], shipped)
    write_bytes_atomic(ctx.outputs["best_split.dfp"], shipped)
    if kept:
        write_bytes_atomic(ctx.outputs[closed_loop.CHOICE], first_choice)
    files = closed_loop.Files(params.dfp_name, closed_loop.CHOICE if kept else params.dfp_name)
    write_json_atomic(ctx.outputs["closed_loop.json"],
                      closed_loop.record(figures, records, best, loop.prioritize_model, params.frames, files))
    if loop.keep_splits:
        closed_loop.write_splits(ctx.outputs["splits/"], results)
