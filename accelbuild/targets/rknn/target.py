"""Family rknn behind the target boundary: Rockchip NPUs through the real RKNN-Toolkit2 compiler, run in a
toolchain environment accelbuild manages (``accelbuild.toolchains``; the toolkit pins what it runs on).

Stages (per model, then one benchmark for the pipeline):

- quantize (the family's own, in place of the shared one): the toolkit quantizes the float AI section on the
  calibration frames (its own PTQ: ``quantize.calibration`` minmax/mse/entropy as its normal/mmse/kl_divergence),
  compiles it for ``target.platform`` and exports ``<model>/<model>.rknn``; the simulator runs every accuracy
  frame and its accuracy analysis one frame (``compile_stage.py``, the toolchain side in ``driver.py``);
- map: ``<model>/placement.json`` from the compiler's layer table (``build_log.py``);
- benchmark: ``benchmark.json`` (the compiler's cycles at the platform's documented NPU clock, labelled
  "estimated by rknn-toolkit2 <version>") and ``report.html``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelbuild.config.spec import ModelSpec, PipelineSpec, build
from accelbuild.stages.declaration import (
    Stage,
    accuracy_data,
    accuracy_inputs,
    data_params,
    model_data,
    model_dir,
    model_files,
)
from accelbuild.stages.params import ActivationSettings, PrecisionRules
from accelbuild.targets.base import PlatformRule, TargetBase
from accelbuild.targets.rknn import platforms
from accelbuild.targets.rknn.spec import (
    ALGORITHMS,
    BenchmarkParams,
    CompileParams,
    NoQuantizeParams,
    PlacementParams,
    RknnTargetSpec,
)
from accelbuild.targets.rknn.toolchain import TOOLCHAIN, TOOLKIT
from accelbuild.toolchains import ToolchainRef


def _model(model: ModelSpec | None) -> ModelSpec:
    assert model is not None
    return model


def program_name(model: ModelSpec) -> str:
    return f"{model.name}.rknn"


def _compile_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    m = _model(model)
    folder = model_dir(pipeline, m)
    inputs = {"ai": folder / "ai.onnx", "pre": folder / "pre.onnx"}
    inputs.update(model_data(m) if m.data is not None else accuracy_data(pipeline))
    return inputs


def _compile_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    m = _model(model)
    folder = model_dir(pipeline, m)
    return {"program": folder / program_name(m), "quantize.json": folder / "quantize.json",
            "rknn_build.log": folder / "rknn_build.log"}


def _compile_params(pipeline: PipelineSpec, model: ModelSpec | None) -> CompileParams:
    m = _model(model)
    t: RknnTargetSpec = pipeline.target
    own = m.quantize.own
    return CompileParams(m.name, t.platform, t.precision, ALGORITHMS[own.calibration], own.calibration_frames,
                         accuracy_inputs(pipeline), data_params(m), pipeline.toolchain_ref)


def _map_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {"rknn_build.log": model_dir(pipeline, _model(model)) / "rknn_build.log"}


def _map_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {"placement.json": model_dir(pipeline, _model(model)) / "placement.json"}


def _map_params(pipeline: PipelineSpec, model: ModelSpec | None) -> PlacementParams:
    return PlacementParams(_model(model).name, pipeline.target.platform)


def _benchmark_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return model_files(pipeline, ("placement.json", "quantize.json", "ai.onnx", "pre.onnx", "post.onnx"))


def _benchmark_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {name: pipeline.output.dir / name for name in ("benchmark.json", "report.html")}


def _benchmark_params(pipeline: PipelineSpec, model: ModelSpec | None) -> BenchmarkParams:
    t: RknnTargetSpec = pipeline.target
    mhz, source = platforms.clock(t.platform, t.npu_clock_mhz)
    return BenchmarkParams(pipeline.name, tuple(m.name for m in pipeline.models), t.platform, mhz, source,
                           f"{TOOLKIT} {_version(pipeline)}", pipeline.benchmark.host)


def _version(pipeline: PipelineSpec) -> str:
    return pipeline.toolchain_ref.version_of(TOOLKIT) or "(not in the environment)"


class RknnTarget(TargetBase):
    family = "rknn"
    quantize_settings = ActivationSettings  # its quantize keys: activation_bits, calibration, calibration_frames
    code = ("accelbuild.targets.rknn", "accelbuild.toolchains", "accelbuild.quantize.frames", "accelbuild.accuracy",
            "accelbuild.data",
            "accelbuild.report")
    files = ()  # the .rknn is the toolkit's own format
    toolchain = TOOLCHAIN
    no_device_runtime = "no device runtime wired yet: a board would run the .rknn with the RKNN lite runtime"
    stages = (
        Stage("quantize", True, "accelbuild.targets.rknn.compile_stage", (), _compile_inputs, _compile_outputs,
              _compile_params),
        Stage("map", True, "accelbuild.targets.rknn.map_stage", (), _map_inputs, _map_outputs, _map_params),
        Stage("benchmark", False, "accelbuild.targets.rknn.benchmark_stage", (), _benchmark_inputs,
              _benchmark_outputs, _benchmark_params),
    )

    platform = PlatformRule("the SoC", "rk3588")

    def starter_target(self, platform: str | None) -> list[str]:
        return ["family: rknn", f"platform: {platform}            # rknn-toolkit2's target_platform (docs/rknn.md)"]

    def target_spec(self, t: dict[str, Any], checker: Any) -> RknnTargetSpec:
        return build(RknnTargetSpec, t, toolchain_python=ToolchainRef.python_given(t, checker))

    def toolchain_ref(self, spec: RknnTargetSpec, checker: Any) -> ToolchainRef:
        return ToolchainRef.checked(TOOLCHAIN, spec.toolchain_python, checker)


    def check_pipeline(self, spec: PipelineSpec, checker: Any) -> None:
        for model in spec.models:
            q = model.quantize
            at = ("models", model.index, "quantize")
            if q.weight_bits != 8:
                checker.error(at + ("weight_bits",), "family rknn takes the weight type from target.precision "
                                                     f"(w8a8, w8a16, ...), not weight_bits: {q.weight_bits}")
            for key in ("bits", "bits_file", "auto_precision"):
                if getattr(q, key, None):
                    checker.error(at + (key,), f"{key} does not apply to family rknn: the toolkit quantizes the "
                                               "whole model at target.precision", key=True)

    def precision(self, spec: PipelineSpec) -> PrecisionRules:
        return PrecisionRules(weight_bits=(), activations="float")  # the toolkit quantizes, in its own stage

    def quantize_params(self, spec: PipelineSpec) -> NoQuantizeParams:
        return NoQuantizeParams()

    def quantize_record(self, ai: Any, params: NoQuantizeParams) -> dict[str, Any]:
        return {}

    def host_nodes(self, ai: Any, params: Any) -> frozenset[str]:
        return frozenset()  # the compiler places layers; placement.json says where each went

    def show_mapping(self, output_dir: Path) -> str | None:
        return None

    def supported_ops(self) -> list[Any]:
        return []  # the pinned toolkit decides; placement.json and its refusals say what it did


TARGET = RknnTarget()
