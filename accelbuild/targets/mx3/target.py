"""Family mx3 behind the target boundary: its ``target`` section, precision rules, and its map,
assemble and benchmark stages (what each reads, writes and is parameterised by)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbuild.config.spec import ModelSpec, PipelineSpec, build
from accelbuild.families import ProgramFile
from accelbuild.quantize.precision import BITS
from accelbuild.stages.declaration import Stage, accuracy_data, accuracy_inputs, data_params, model_data, model_dir
from accelbuild.stages.params import PrecisionRules
from accelbuild.targets import credibility
from accelbuild.targets.base import SupportSection, TargetBase
from accelbuild.targets.mx3.profiles import MX3_PROFILES
from accelbuild.targets.mx3.spec import ClosedLoopSpec, Mx3TargetSpec
from accelbuild.targets.profile_files import load_profile, resolve_profile
from accelbuild.util.files import json_digest

if TYPE_CHECKING:  # the stages' parameter objects are built when a plan reaches them, not when a pipeline loads
    from accelbuild.targets.mx3.params import AssembleParams, BenchmarkParams, MapParams, PacketParams

SPLITS = "splits/"
CHOICE = "cost_model_choice.dfp"  # the cost model's first choice, when the closed loop ships another split


def _profile(pipeline: PipelineSpec) -> dict[str, Any]:
    return load_profile(pipeline.target.profile_path, MX3_PROFILES, copy=False)  # read only


def dfp_name(pipeline: PipelineSpec) -> str:
    """The program file's name: ``target.dfp_name``, else ``<pipeline name>.dfp``."""
    return pipeline.target.dfp_name or f"{pipeline.base_name}.dfp"


def _quantized_inputs(pipeline: PipelineSpec, with_records: bool) -> dict[str, Path]:
    inputs = {}
    for m in pipeline.models:
        folder = model_dir(pipeline, m)
        inputs[f"{m.name}/quantized.onnx"] = folder / "quantized.onnx"
        if with_records:
            inputs[f"{m.name}/quantize.json"] = folder / "quantize.json"
    return inputs


def _map_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return _quantized_inputs(pipeline, with_records=True)


def _map_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {"mapping.json": pipeline.output.dir / "mapping.json"}


def _map_params(pipeline: PipelineSpec, model: ModelSpec | None) -> MapParams:
    from accelbuild.targets.mx3.params import MapParams

    t = pipeline.target
    return MapParams(pipeline.name, tuple(m.name for m in pipeline.models), t.num_chips, t.effort, t.target_fps,
                     t.share_input, _profile(pipeline))


def _assemble_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    # the closed loop re-maps its splits from the layers and their bits
    return {"mapping.json": pipeline.output.dir / "mapping.json",
            **_quantized_inputs(pipeline, with_records=pipeline.target.closed_loop.enabled)}


def _assemble_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    out = pipeline.output
    outputs = {"dfp": out.dir / dfp_name(pipeline)}
    if pipeline.target.closed_loop.enabled:
        outputs["closed_loop.json"] = out.dir / "closed_loop.json"
        outputs["best_split.dfp"] = out.dir / "best_split.dfp"
        outputs[CHOICE] = out.dir / CHOICE
        outputs[SPLITS] = out.dir / "splits"
    return outputs


def _assemble_params(pipeline: PipelineSpec, model: ModelSpec | None) -> AssembleParams:
    from accelbuild.targets.mx3.params import AssembleParams, ClosedLoopParams

    t, bench = pipeline.target, pipeline.benchmark
    loop = t.closed_loop
    simulates = t.sim_dfp or loop.enabled
    return AssembleParams(
        models=tuple(m.name for m in pipeline.models),
        input_format=t.input_format,
        output_format=t.output_format,
        share_input=t.share_input,
        sim_dfp=t.sim_dfp,
        frames=bench.frames if simulates else None,
        seed=bench.seed if simulates else None,
        closed_loop=ClosedLoopParams(loop.enabled, loop.prioritize_model, loop.keep_splits),
        profile=_profile(pipeline),
        dfp_name=dfp_name(pipeline),
    )


def _benchmark_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    out = pipeline.output  # with the closed loop, <dfp_name> is the best measured split
    inputs = {"dfp": out.dir / dfp_name(pipeline), "mapping.json": out.dir / "mapping.json"}
    for m in pipeline.models:
        folder = model_dir(pipeline, m)
        for name in ("ai.onnx", "quantized.onnx", "pre.onnx", "post.onnx"):  # host sections: accuracy, timing
            inputs[f"{m.name}/{name}"] = folder / name
        inputs[f"{m.name}/crop.json"] = folder / "crop.json"  # what the chip does not run, for the report
    inputs.update(accuracy_data(pipeline))
    for m in pipeline.models:  # roles per model: two models may read files of the same name
        inputs.update({f"{m.name}/{role}": path for role, path in model_data(m).items()})
    return inputs


def _benchmark_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {name: pipeline.output.dir / name for name in ("benchmark.json", "layer_stats.yaml", "report.html")}


def _benchmark_params(pipeline: PipelineSpec, model: ModelSpec | None) -> BenchmarkParams:
    from accelbuild.targets.mx3.params import BenchmarkParams

    bench = pipeline.benchmark
    return BenchmarkParams(
        pipeline=pipeline.name,
        models=tuple(m.name for m in pipeline.models),
        frames=bench.frames,
        host=bench.host,
        seed=bench.seed,
        accuracy=accuracy_inputs(pipeline),
        closed_loop=pipeline.target.closed_loop.enabled,
        data=tuple(data_params(m) for m in pipeline.models),
        tuned=tuple(m.quantize.auto_precision is not None for m in pipeline.models),
        credibility=_credibility(pipeline),
    )


def _credibility(pipeline: PipelineSpec) -> dict[str, Any]:
    """benchmark.json's band for the profile (docs/credibility.md): a parameter, so a new band re-runs it."""
    raw = _profile(pipeline)
    return credibility.band("mx3", raw["name"], json_digest(raw))


def _check_weights(spec: PipelineSpec, checker: Any) -> None:
    """A num_chips too small for the models' weights, said at load (the map stage would say it after import
    and quantize): a lower bound from the model files (``weight_floor``)."""
    from accelbuild.targets.mx3 import weight_floor

    if getattr(checker, "errors", None):  # a profile or model already refused: nothing to count against
        return
    if not any(weight_floor.countable(m) for m in spec.models):  # the floor is 1 chip: no profile needed
        return
    from accelbuild.targets.mx3.hardware import hardware_from_dict

    hw = hardware_from_dict(_profile(spec))
    problem = weight_floor.problem(weight_floor.chips_floor(spec, hw), hw, spec.target.num_chips)
    if problem:
        checker.error(("target", "num_chips"), problem)


_CODE = ("accelbuild.targets.mx3", "accelbuild.targets.profile_files", "accelbuild.quantize", "accelbuild.accuracy", "accelbuild.data",
         "accelbuild.report")


class Mx3Target(TargetBase):
    family = "mx3"
    code = _CODE
    files = (ProgramFile("mx3 DFP program file", (".dfp",), (b"ACCELDFP",), "accelbuild.targets.mx3.files:inspect",
                         "accelbuild.targets.mx3.files:bench", "accelbuild.targets.mx3.files:parts"),)
    toolchain = None  # runs in accelbuild's own environment
    no_device_runtime = "its figures come from the modelled chip's simulator"
    stages = (
        Stage("map", False, "accelbuild.targets.mx3.map_stage", (), _map_inputs, _map_outputs, _map_params),
        Stage("assemble", False, "accelbuild.targets.mx3.assemble_stage", (), _assemble_inputs,
              _assemble_outputs, _assemble_params, optional_outputs=frozenset({SPLITS, CHOICE}),
              jobs=lambda pipeline: pipeline.target.closed_loop.jobs),
        Stage("benchmark", False, "accelbuild.targets.mx3.benchmark_stage", (), _benchmark_inputs,
              _benchmark_outputs, _benchmark_params),
    )

    def starter_target(self, platform: str | None) -> list[str]:
        return ["family: mx3", "chip_gen: mx3", "num_chips: min               # the fewest chips the model fits on",
                "effort: normal"]

    def target_spec(self, t: dict[str, Any], checker: Any) -> Mx3TargetSpec:
        chip_gen = t["chip_gen"]
        # a built-in profile is read where a figure needs it (the weight floor, the stages' parameters)
        profile_path, _ = resolve_profile(chip_gen, MX3_PROFILES, checker, ("target", "chip_gen"), "chip_gen",
                                          read_builtin=False)
        return build(Mx3TargetSpec, t, profile_path=profile_path,
                     closed_loop=build(ClosedLoopSpec, t["closed_loop"]))

    def check_pipeline(self, spec: PipelineSpec, checker: Any) -> None:
        _check_weights(spec, checker)
        loop = spec.target.closed_loop
        if loop.prioritize_model >= len(spec.models):
            checker.error(
                ("target", "closed_loop", "prioritize_model"),
                f"prioritize_model {loop.prioritize_model} is not a model index: this pipeline has "
                f"{len(spec.models)} model(s), indices 0..{len(spec.models) - 1} (or -1 for the combined FPS)",
            )
        if loop.enabled and spec.target.effort != "hard":
            checker.error(
                ("target", "closed_loop", "enabled"),
                f"closed_loop needs target.effort: hard (it measures the hard mapper's candidate splits); "
                f"effort is {spec.target.effort!r}",
            )

    def precision(self, spec: PipelineSpec) -> PrecisionRules:
        chip = _profile(spec)["chip"]
        bits = tuple(sorted(chip["weight_bits"]))
        unknown = sorted(set(bits) - set(BITS))
        if unknown:  # the profile schema allows only these; a mismatch is a bug between the two
            raise ValueError(f"profile {spec.target.chip_gen}: weight bits {unknown} have no storage type")
        return PrecisionRules(weight_bits=bits, activations=chip["activation_dtype"])

    def quantize_params(self, spec: PipelineSpec) -> PacketParams:
        from accelbuild.targets.mx3.params import PacketParams

        return PacketParams(spec.target.input_format, spec.target.output_format)

    def quantize_record(self, ai: Any, params: PacketParams) -> dict[str, Any]:
        from accelbuild.targets.mx3.packets import packet_record

        return {"packets": packet_record(ai, params.input_format, params.output_format)}

    def host_nodes(self, ai: Any, params: PacketParams) -> frozenset[str]:
        return frozenset()  # mx3 quantizes weights only; crop decides what the host runs

    def show_mapping(self, output_dir: Path) -> str:
        from accelbuild.targets.mx3.files import show_mapping

        return show_mapping(output_dir)

    def chip_ops(self, spec: PipelineSpec) -> frozenset[str]:
        """The operators the profile's cores run; the crop stage moves others at the ai section's ends to
        the host and names those in its middle (they stay, modelled as ALU work)."""
        ops = _profile(spec)["ops"]
        return frozenset(op for kind in ("mac", "alu", "fused", "layout") for op in ops.get(kind, ()))

    def supported_ops(self) -> list[SupportSection]:
        return []  # the profile's ops lists; the crop stage moves the others to the host


TARGET = Mx3Target()
