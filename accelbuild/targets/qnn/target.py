"""Family qnn behind the target boundary: Qualcomm's HTP (Hexagon NPU) through onnxruntime-qnn, which bundles
Qualcomm's QAIRT compiler and an x86 emulator of the HTP; it runs in a toolchain environment accelbuild manages.

Stages (the shared quantize, then per model, then one benchmark for the pipeline):

- quantize (shared): accelbuild's post-training QDQ quantization, 8-bit weights per output channel and
  ``target.activations`` (8- or 16-bit grids with zero points) from the pipeline's frames;
- map: onnxruntime-qnn compiles quantized.onnx for ``target.soc``: ``<model>/<model>_ctx.onnx`` +
  ``<model>/<model>_qnn.bin`` (the EPContext form onnxruntime-qnn loads on a device) and ``placement.json``
  from the provider's op trace (``compile_stage.py``; the toolchain side in ``driver.py``);
- benchmark: the context binary with the HTP emulated, every frame against float; no timing without a device.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelbuild.config.spec import ModelSpec, PipelineSpec, build
from accelbuild.stages.declaration import (
    Stage,
    accuracy_inputs,
    data_params,
    model_dir,
    model_files,
    models_data,
)
from accelbuild.stages.params import ActivationParams, ActivationSettings, PrecisionRules, project
from accelbuild.targets.base import PlatformRule, TargetBase
from accelbuild.targets.qnn.socs import SOCS
from accelbuild.targets.qnn.spec import BenchmarkParams, CompileParams, NoQuantizeParams, QnnTargetSpec
from accelbuild.targets.qnn.toolchain import TOOLCHAIN
from accelbuild.toolchains import ToolchainRef

BITS = {"uint8": 8, "uint16": 16}


def _model(model: ModelSpec | None) -> ModelSpec:
    assert model is not None
    return model


def _map_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {"quantized.onnx": model_dir(pipeline, _model(model)) / "quantized.onnx"}


def _map_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    m = _model(model)
    folder = model_dir(pipeline, m)
    return {"context": folder / f"{m.name}_ctx.onnx", "binary": folder / f"{m.name}_qnn.bin",
            "placement.json": folder / "placement.json"}


def _map_params(pipeline: PipelineSpec, model: ModelSpec | None) -> CompileParams:
    t: QnnTargetSpec = pipeline.target
    return CompileParams(_model(model).name, t.soc, SOCS[t.soc][0], pipeline.toolchain_ref)


def _benchmark_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    inputs = {**model_files(pipeline, ("ai.onnx", "pre.onnx", "placement.json")), **models_data(pipeline)}
    for m in pipeline.models:
        inputs.update({f"{m.name}/{m.name}_{kind}": model_dir(pipeline, m) / f"{m.name}_{kind}"
                       for kind in ("ctx.onnx", "qnn.bin")})
    return inputs


def _benchmark_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {name: pipeline.output.dir / name for name in ("benchmark.json", "report.html")}


def _benchmark_params(pipeline: PipelineSpec, model: ModelSpec | None) -> BenchmarkParams:
    t: QnnTargetSpec = pipeline.target
    return BenchmarkParams(pipeline.name, tuple(m.name for m in pipeline.models), t.soc, SOCS[t.soc][0],
                           accuracy_inputs(pipeline), tuple(data_params(m) for m in pipeline.models),
                           tuple(m.quantize.own.calibration_frames for m in pipeline.models), pipeline.toolchain_ref)


class QnnTarget(TargetBase):
    family = "qnn"
    quantize_settings = ActivationSettings  # its quantize keys: activation_bits, calibration, calibration_frames
    code = ("accelbuild.targets.qnn", "accelbuild.toolchains", "accelbuild.quantize", "accelbuild.accuracy",
            "accelbuild.data",
            "accelbuild.report")
    files = ()  # the context model is onnxruntime's own format
    toolchain = TOOLCHAIN
    no_device_runtime = "no device runtime wired yet: a board would run the context binary with onnxruntime-qnn"
    stages = (
        Stage("map", True, "accelbuild.targets.qnn.compile_stage", (), _map_inputs, _map_outputs, _map_params),
        Stage("benchmark", False, "accelbuild.targets.qnn.benchmark_stage", (), _benchmark_inputs,
              _benchmark_outputs, _benchmark_params),
    )

    platform = PlatformRule("the SoC", "sm8650")

    def starter_target(self, platform: str | None) -> list[str]:
        return ["family: qnn", f"soc: {platform}               # the Snapdragon SoC (docs/qnn.md)"]

    def target_spec(self, t: dict[str, Any], checker: Any) -> QnnTargetSpec:
        return build(QnnTargetSpec, t, toolchain_python=ToolchainRef.python_given(t, checker))

    def toolchain_ref(self, spec: QnnTargetSpec, checker: Any) -> ToolchainRef:
        return ToolchainRef.checked(TOOLCHAIN, spec.toolchain_python, checker)


    def activation_params(self, spec: PipelineSpec, model: ModelSpec) -> ActivationParams:
        return project(ActivationParams, model.quantize.own, bits=self.precision(spec).activation_bits[0])

    def check_pipeline(self, spec: PipelineSpec, checker: Any) -> None:
        for model in spec.models:
            q = model.quantize
            at = ("models", model.index, "quantize")
            if q.weight_bits != 8:
                checker.error(at + ("weight_bits",), f"the HTP takes 8-bit weights here, not {q.weight_bits}")
            for key in ("bits", "bits_file", "auto_precision"):
                if getattr(q, key, None):
                    checker.error(at + (key,), f"{key} does not apply to family qnn: the whole model is "
                                               "quantized at target.activations", key=True)

    def precision(self, spec: PipelineSpec) -> PrecisionRules:
        return PrecisionRules(weight_bits=(8,), activations="integer", activation_bits=(BITS[spec.target.activations],),
                              symmetric=False)

    def quantize_params(self, spec: PipelineSpec) -> NoQuantizeParams:
        return NoQuantizeParams()

    def quantize_record(self, ai: Any, params: NoQuantizeParams) -> dict[str, Any]:
        return {}

    def host_nodes(self, ai: Any, params: Any) -> frozenset[str]:
        return frozenset()  # the execution provider decides; placement.json says where each node went

    def show_mapping(self, output_dir: Path) -> str | None:
        return None

    def supported_ops(self) -> list[Any]:
        return []  # the pinned QNN provider decides; placement.json gives its reasons


TARGET = QnnTarget()
