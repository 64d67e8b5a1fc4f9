"""Family npu behind the target boundary: its ``target`` section, precision rules, the layers its quantize
stage leaves float (the host's), and its map (partition + schedule), assemble (package) and benchmark
(unit-timeline simulation, reports) stages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelbuild.config.spec import ModelSpec, PipelineSpec, build
from accelbuild.families import ProgramFile
from accelbuild.stages.declaration import (
    Stage,
    accuracy_inputs,
    data_params,
    model_files,
    models_data,
)
from accelbuild.stages.params import ActivationParams, ActivationSettings, PrecisionRules, project
from accelbuild.targets import tvm_compiler
from accelbuild.targets.base import PlatformRule, SupportSection, TargetBase
from accelbuild.targets.npu.hardware import NPU_PROFILES
from accelbuild.targets.npu.spec import (
    HostCompileParams,
    NpuAssembleParams,
    NpuBenchmarkParams,
    NpuMapParams,
    NpuQuantizeParams,
    NpuTargetSpec,
    OffloadSettings,
)
from accelbuild.targets.profile_files import load_profile, resolve_profile
from accelbuild.util.machine import this_machine

OUTPUTS_OF_MAP = ("partition.json", "schedule.json")
OUTPUTS_OF_BENCHMARK = ("benchmark.json", "perf.json", "report.html")
OUTPUTS_OF_HOST_CODE = ("host_code.json", "host_build.tar.gz")  # offload.host_compiler: tvm


def _profile(pipeline: PipelineSpec) -> dict[str, Any]:
    return load_profile(pipeline.target.profile_path, NPU_PROFILES, copy=False)  # read only


def _default_activation_bits(allowed: tuple[int, ...]) -> int:
    """Without quantize.activation_bits: the profile's only activation precision, else 8 bits."""
    return allowed[0] if len(allowed) == 1 else 8


def package_name(pipeline: PipelineSpec) -> str:
    """The package's file name: ``target.package_name``, else ``<pipeline name>.tar.gz``."""
    return pipeline.target.package_name or f"{pipeline.base_name}.tar.gz"


def _map_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return model_files(pipeline, ("ai.onnx", "quantized.onnx"))


def _map_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {name: pipeline.output.dir / name for name in OUTPUTS_OF_MAP}


def _map_params(pipeline: PipelineSpec, model: ModelSpec | None) -> NpuMapParams:
    t = pipeline.target
    return NpuMapParams(pipeline.name, tuple(m.name for m in pipeline.models), _profile(pipeline), t.offload,
                        t.effort, t.compile_mode, t.batch_size, accuracy_inputs(pipeline),
                        tuple(data_params(m) for m in pipeline.models))


def compiles_host(pipeline: PipelineSpec) -> bool:
    """Whether TVM compiles the host subgraphs (``offload.host_compiler`` resolved, on the Arm cores)."""
    return pipeline.target.host_compiler == "tvm" and pipeline.target.offload.host == "arm"


def _host_code_outputs(pipeline: PipelineSpec) -> dict[str, Path]:
    return {name: pipeline.output.dir / name for name in OUTPUTS_OF_HOST_CODE} if compiles_host(pipeline) else {}


def _assemble_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    out = pipeline.output.dir
    checked = {**model_files(pipeline, ("ai.onnx", "pre.onnx")), **models_data(pipeline)} \
        if compiles_host(pipeline) else {}
    return {**model_files(pipeline, ("quantized.onnx",)),
            **{name: out / name for name in OUTPUTS_OF_MAP}, **checked}


def _assemble_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    out = pipeline.output.dir
    return {"package": out / package_name(pipeline), "layer_stats.yaml": out / "layer_stats.yaml",
            **_host_code_outputs(pipeline)}


def _assemble_params(pipeline: PipelineSpec, model: ModelSpec | None) -> NpuAssembleParams:
    host = None
    if compiles_host(pipeline):
        here = this_machine()
        board = tvm_compiler.arm_target(_profile(pipeline)["host"]["arm"]["name"])
        host = HostCompileParams(tvm_compiler.version() or "", board, tvm_compiler.cross_linker(),
                                 tvm_compiler.portable_target(here.arch, here.flags),
                                 accuracy_inputs(pipeline),
                                 tuple(data_params(m) for m in pipeline.models))
    return NpuAssembleParams(pipeline.name, tuple(m.name for m in pipeline.models), package_name(pipeline),
                             _profile(pipeline), host)


def _benchmark_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    out = pipeline.output.dir
    return {"package": out / package_name(pipeline), **{name: out / name for name in OUTPUTS_OF_MAP},
            **model_files(pipeline, ("ai.onnx", "pre.onnx", "post.onnx")), **models_data(pipeline),
            **_host_code_outputs(pipeline)}


def _benchmark_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {name: pipeline.output.dir / name for name in OUTPUTS_OF_BENCHMARK}


def _benchmark_params(pipeline: PipelineSpec, model: ModelSpec | None) -> NpuBenchmarkParams:
    return NpuBenchmarkParams(pipeline.name, tuple(m.name for m in pipeline.models), accuracy_inputs(pipeline),
                              tuple(data_params(m) for m in pipeline.models),
                              tuple(m.quantize.own.calibration_frames for m in pipeline.models), pipeline.benchmark.host,
                              host_compiler_said(pipeline))


def host_compiler_said(pipeline: PipelineSpec) -> str:
    """benchmark.json's word on the host code: ``tvm``, or why the host subgraphs ship as float ONNX."""
    t = pipeline.target
    if compiles_host(pipeline):
        return "tvm"
    if t.offload.host == "dsp":
        return "onnx: offload.host is dsp (TVM compiles for the Arm cores only)"
    if not tvm_compiler.available():
        return f"onnx: Apache TVM is not installed ({tvm_compiler.EXTRA})"
    return "onnx: offload.host_compiler is onnx"


_CODE = ("accelbuild.targets.npu", "accelbuild.targets.profile_files", "accelbuild.targets.tvm_compiler",
         "accelbuild.quantize", "accelbuild.accuracy", "accelbuild.data", "accelbuild.report")


class NpuTarget(TargetBase):
    family = "npu"
    quantize_settings = ActivationSettings  # its quantize keys: activation_bits, calibration, calibration_frames
    code = _CODE
    files = (ProgramFile("npu package", (".tar.gz",), (b"\x1f\x8b",), "accelbuild.targets.npu.files:inspect",
                         "accelbuild.targets.npu.files:bench"),)
    toolchain = None  # runs in accelbuild's own environment
    no_device_runtime = "its figures come from the modelled NPU's simulator"
    stages = (
        Stage("map", False, "accelbuild.targets.npu.map_stage", (), _map_inputs, _map_outputs, _map_params),
        Stage("assemble", False, "accelbuild.targets.npu.assemble_stage", (), _assemble_inputs, _assemble_outputs,
              _assemble_params),
        Stage("benchmark", False, "accelbuild.targets.npu.benchmark_stage", (), _benchmark_inputs,
              _benchmark_outputs, _benchmark_params),
    )

    platform = PlatformRule("the platform", required="a built-in platform (am62a, am68a, mlsoc, tda4vm, x3, x5; "
                            "docs/npu.md) or a profile .yaml", example="tda4vm, x5")

    def starter_target(self, platform: str | None) -> list[str]:
        return ["family: npu", f"platform: {platform}"]

    def target_spec(self, t: dict[str, Any], checker: Any) -> NpuTargetSpec:
        platform = t["platform"]
        profile_path, profile = resolve_profile(platform, NPU_PROFILES, checker, ("target", "platform"),
                                                "npu platform")
        o = t["offload"]
        if o["host"] == "dsp" and profile is not None and profile["host"]["dsp"] is None:
            checker.error(("target", "offload", "host"),
                          f"platform {platform} has no DSP to offload to (its profile lists none); use host: arm")
        if profile is not None and t["batch_size"] > profile["npu"]["max_batch"]:
            checker.error(("target", "batch_size"), f"platform {platform} compiles batches of at most "
                                                    f"{profile['npu']['max_batch']}, not {t['batch_size']}")
        return build(NpuTargetSpec, t, profile_path=profile_path, offload=build(OffloadSettings, o),
                     host_compiler=_host_compiler(o, checker))


    def activation_params(self, spec: PipelineSpec, model: ModelSpec) -> ActivationParams:
        own = model.quantize.own
        return project(ActivationParams, own,
                       bits=own.bits or _default_activation_bits(self.precision(spec).activation_bits))

    def check_pipeline(self, spec: PipelineSpec, checker: Any) -> None:
        for model in spec.models:
            q = model.quantize
            if q.weight_bits == 4:
                checker.error(("models", model.index, "quantize", "weight_bits"),
                              "4-bit weights are stored by mx3 only; family npu stores 8 or 16 bits")

    def precision(self, spec: PipelineSpec) -> PrecisionRules:
        q = _profile(spec)["quantization"]
        return PrecisionRules(weight_bits=tuple(sorted(q["weight_bits"])), activations="integer",
                              activation_bits=tuple(sorted(q["activation_bits"])),
                              symmetric=q["activation_symmetric"], share_concat_scales=q["concat_shared_scale"],
                              split_layer_bits=True)

    def quantize_params(self, spec: PipelineSpec) -> NpuQuantizeParams:
        return NpuQuantizeParams(_profile(spec), spec.target.offload)

    def quantize_record(self, ai: Any, params: NpuQuantizeParams) -> dict[str, Any]:
        return {}

    def host_nodes(self, ai: Any, params: NpuQuantizeParams) -> frozenset[str]:
        from accelbuild.targets.npu.hardware import npu_hardware
        from accelbuild.targets.npu.partition import assign_units

        units = assign_units(ai, npu_hardware(params.profile), offload(params.offload))
        return frozenset(name for name, unit in units.items() if unit != "npu")

    def show_mapping(self, output_dir: Path) -> str | None:
        return None  # partition.json and schedule.json say where each layer runs

    def supported_ops(self) -> list[SupportSection]:
        """One section per built-in profile, from the predicates that give the partitioner its reasons."""
        from accelbuild.targets.npu import support
        from accelbuild.targets.npu.hardware import builtin_profiles, load_npu_hardware

        intro = ("Layers that fail a condition run on the host (`target.offload.host`), and partition.json and "
                 "`offload.fail_on_fallback` give the failed condition as the reason. Units are the profile's "
                 "(`accelbuild/targets/npu/profiles/{name}.yaml`).")
        sections = []
        for name in sorted(builtin_profiles()):
            hw = load_npu_hardware(name)
            sections.append((f"Family npu: {name} ({hw.description})", intro.format(name=name), support.rows(hw)))
        return sections


def _host_compiler(o: dict[str, Any], checker: Any) -> str:
    """``offload.host_compiler``; its default is tvm when the ``tvm`` extra is installed, else onnx."""
    asked = o.get("host_compiler")
    if asked is None:
        return "tvm" if tvm_compiler.available() else "onnx"
    if asked == "tvm" and not tvm_compiler.available():
        checker.error(("target", "offload", "host_compiler"), f"host_compiler tvm needs Apache TVM: {tvm_compiler.EXTRA}")
    elif asked == "tvm" and o["host"] == "dsp":
        checker.error(("target", "offload", "host_compiler"), "host_compiler tvm compiles for the Arm cores, but "
                                                              "offload.host is dsp (use host_compiler: onnx)")
    return asked


def offload(settings: OffloadSettings) -> Any:
    """The partitioner's ``Offload`` for ``target.offload``."""
    from accelbuild.targets.npu.partition import Offload

    return Offload(host=settings.host, deny_ops=frozenset(settings.deny_ops),
                   deny_layers=frozenset(settings.deny_layers), max_subgraphs=settings.max_subgraphs,
                   fail_on_fallback=settings.fail_on_fallback)


TARGET = NpuTarget()
