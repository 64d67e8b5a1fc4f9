"""Family cpu behind the target boundary: onnxruntime on the host CPU, the measured baseline.

Stages (per model, then one benchmark for the pipeline):

- quantize (shared): ``precision: float`` leaves the model unchanged (``PrecisionRules(activations="float")``);
  ``precision: int8`` is the integer PTQ path (uint8 activations, int8 weights per channel, the QDQ form
  onnxruntime fuses into its integer kernels);
- map: ``<model>/session.json``, the session options (threads, graph optimization level, execution mode);
- assemble: ``<model>/model.ort``, quantized.onnx optimized by onnxruntime and saved in its ORT format
  (canonical bytes), and ``<model>/ort.json`` (its operators; the check against quantized.onnx); with
  ``backend: tvm``, ``<model>/model.so`` (the model compiled by TVM for this CPU, ``targets/tvm_compiler.py``) and
  ``<model>/tvm.json``;
- benchmark: ``benchmark.json`` and ``report.html``, every figure measured on this machine and labelled so.

Everything cpu-specific lives in this package: its ``target`` keys (``target.schema.json``, assembled into
the pipeline schema), and the report (``report.py``). It is registered like any plug-in, through the
entry-point group ``accelbuild.families``, and uses only the public family API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelbuild.config.spec import ModelSpec, PipelineSpec, build
from accelbuild.errors import StageError
from accelbuild.stages.declaration import (
    Stage,
    accuracy_data,
    accuracy_inputs,
    data_params,
    model_data,
    model_dir,
    model_files,
    models_data,
)
from accelbuild.stages.params import ActivationParams, ActivationSettings, PrecisionRules, project
from accelbuild.targets import tvm_compiler
from accelbuild.targets.base import TargetBase
from accelbuild.targets.cpu.spec import (
    ClosedLoopParams,
    CpuBenchmarkParams,
    CpuTargetSpec,
    NoQuantizeParams,
    OrtParams,
    SessionParams,
    TvmParams,
    program_files,
)
from accelbuild.util.machine import logical_cores_in, machine_identity, onnxruntime_version, this_machine

# quantize keys that choose per-layer or per-model precisions: the cpu family has one precision per build
PRECISION_KEYS = ("bits", "bits_file", "auto_precision")
CALIBRATION_KEYS = ("activation_bits", "calibration", "calibration_frames")


def _model(model: ModelSpec | None) -> ModelSpec:
    assert model is not None
    return model


def _map_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    m = _model(model)
    folder = model_dir(pipeline, m)
    if not pipeline.target.closed_loop:
        return {name: folder / name for name in ("quantized.onnx", "ai.onnx")}
    inputs = {name: folder / name for name in ("quantized.onnx", "ai.onnx", "pre.onnx")}  # + the frames it runs
    inputs.update(model_data(m) if m.data is not None else accuracy_data(pipeline))
    return inputs


def _map_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    folder = model_dir(pipeline, _model(model))
    names = ("session.json", "closed_loop.json") if pipeline.target.closed_loop else ("session.json",)
    return {name: folder / name for name in names}


def _map_params(pipeline: PipelineSpec, model: ModelSpec | None) -> SessionParams | ClosedLoopParams:
    t, m = pipeline.target, _model(model)
    if not pipeline.target.closed_loop:
        return SessionParams(m.name, t.precision, t.threads, t.graph_optimization, onnxruntime_version())
    machine = _measuring_machine(pipeline)
    cores = logical_cores_in(machine) or this_machine().logical_cores
    device = pipeline.benchmark.device
    return ClosedLoopParams(m.name, (t.precision, t.graph_optimization, t.threads or 0),
                            tuple(sorted({1, cores, t.threads or 0})), accuracy_inputs(pipeline), data_params(m),
                            pipeline.benchmark.frames, onnxruntime_version(), machine,
                            device.resource if device is not None else None)


def _map_jobs(pipeline: PipelineSpec) -> int | None:
    """The closed loop runs in the build's process and sends its measurements to the device (one at a time)."""
    return 1 if pipeline.target.closed_loop else None


def _measuring_machine(pipeline: PipelineSpec) -> str:
    """Where the pipeline's figures are measured: its device (its description, read on it), or this machine."""
    device = pipeline.benchmark.device
    return device.machine if device is not None and device.machine else this_machine().describe(
        onnxruntime_version())


def _assemble_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    m = _model(model)
    folder = model_dir(pipeline, m)
    inputs = {name: folder / name for name in ("quantized.onnx", "session.json", "ai.onnx", "pre.onnx")}
    inputs.update(model_data(m) if m.data is not None else accuracy_data(pipeline))
    return inputs


def _assemble_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    folder = model_dir(pipeline, _model(model))
    return {name: folder / name for name in program_files(pipeline.target.backend)}


def _assemble_params(pipeline: PipelineSpec, model: ModelSpec | None) -> OrtParams | TvmParams:
    m = _model(model)
    if pipeline.target.backend == "tvm":
        machine = this_machine()
        return TvmParams(m.name, accuracy_inputs(pipeline), data_params(m), tvm_compiler.version() or "",
                         f"{machine.cpu} ({machine.arch}: {', '.join(machine.flags)})")
    chosen_later = pipeline.target.closed_loop  # the closed loop may choose the level all
    isa = this_machine().vector_isa if pipeline.target.graph_optimization == "all" or chosen_later else None
    return OrtParams(m.name, accuracy_inputs(pipeline), data_params(m), onnxruntime_version(), isa)


def _benchmark_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    names = ("ai.onnx", "pre.onnx", "post.onnx", "session.json", *program_files(pipeline.target.backend))
    return {**model_files(pipeline, names), **models_data(pipeline)}


def _benchmark_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {name: pipeline.output.dir / name for name in ("benchmark.json", "report.html")}


def _benchmark_params(pipeline: PipelineSpec, model: ModelSpec | None) -> CpuBenchmarkParams:
    device = pipeline.benchmark.device
    # measured on a device: its identity (resource and machine, read from the worker) keys the task
    integer = pipeline.target.precision == "int8" or pipeline.target.closed_loop
    return CpuBenchmarkParams(pipeline.name, tuple(m.name for m in pipeline.models), accuracy_inputs(pipeline),
                              tuple(data_params(m) for m in pipeline.models), pipeline.benchmark.frames,
                              pipeline.benchmark.host, _measuring_machine(pipeline),
                              machine_identity() if device is None else f"device {device.resource}",
                              tuple(m.quantize.own.calibration_frames if integer else None
                                    for m in pipeline.models), pipeline.target.backend,
                              device.resource if device is not None else None)


class CpuTarget(TargetBase):
    family = "cpu"
    quantize_settings = ActivationSettings  # its quantize keys: activation_bits, calibration, calibration_frames
    code = ("accelbuild.targets.cpu", "accelbuild.targets.tvm_compiler", "accelbuild.quantize", "accelbuild.accuracy", "accelbuild.data", "accelbuild.report")
    files = ()  # model.ort is onnxruntime's own format: onnxruntime loads and inspects it
    toolchain = None  # runs in accelbuild's own environment
    stages = (
        Stage("map", True, "accelbuild.targets.cpu.map_stage", (), _map_inputs, _map_outputs, _map_params,
              jobs=_map_jobs),
        Stage("assemble", True, "accelbuild.targets.cpu.assemble_stage", (), _assemble_inputs, _assemble_outputs,
              _assemble_params),
        Stage("benchmark", False, "accelbuild.targets.cpu.benchmark_stage", (), _benchmark_inputs,
              _benchmark_outputs, _benchmark_params),
    )

    def starter_target(self, platform: str | None) -> list[str]:
        return ["family: cpu", "precision: float"]

    def target_spec(self, t: dict[str, Any], checker: Any) -> CpuTargetSpec:
        if t["backend"] == "tvm" and not tvm_compiler.available():
            checker.error(("target", "backend"), f"backend tvm needs Apache TVM: {tvm_compiler.EXTRA}")
        return build(CpuTargetSpec, t)


    def activation_params(self, spec: PipelineSpec, model: ModelSpec) -> ActivationParams:
        return project(ActivationParams, model.quantize.own)

    def check_pipeline(self, spec: PipelineSpec, checker: Any) -> None:
        if spec.target.closed_loop and spec.target.backend == "tvm":
            checker.error(("target", "closed_loop", "enabled"), "closed_loop measures onnxruntime configurations (model.ort); "
                                                      "backend tvm has none to choose from")
        if spec.benchmark.device is not None and spec.target.backend == "tvm":
            checker.error(("benchmark", "device"), "backend tvm compiles model.so for this machine's CPU; a device "
                                                   "measures model.ort (backend onnxruntime)", key=True)
        precision = spec.target.precision
        for model in spec.models:
            q = model.quantize
            at = ("models", model.index, "quantize")
            if q.weight_bits != 8:
                checker.error(at + ("weight_bits",), f"family cpu runs int8 weights or the float model, not "
                                                     f"{q.weight_bits}-bit weights")
            for key in PRECISION_KEYS:
                if getattr(q, key, None):
                    checker.error(at + (key,), f"{key} does not apply to family cpu: the whole model is "
                                               f"{precision} (target.precision)", key=True)
            for key in CALIBRATION_KEYS if precision == "float" and not spec.target.closed_loop else ():
                if checker.written(at + (key,)):
                    checker.error(at + (key,), f"{key} does not apply to precision: float (the model runs as it "
                                               "is); use target.precision: int8 to quantize", key=True)

    def precision(self, spec: PipelineSpec) -> PrecisionRules:
        # the closed loop measures float (ai.onnx) and int8 (quantized.onnx) candidates
        if spec.target.precision == "float" and not spec.target.closed_loop:
            return PrecisionRules(weight_bits=(), activations="float")
        # uint8 activations with zero points and int8 weights per channel: onnxruntime's U8S8 integer kernels
        return PrecisionRules(weight_bits=(8,), activations="integer", activation_bits=(8,), symmetric=False)

    def quantize_params(self, spec: PipelineSpec) -> NoQuantizeParams:
        return NoQuantizeParams()

    def quantize_record(self, ai: Any, params: NoQuantizeParams) -> dict[str, Any]:
        return {}

    def host_nodes(self, ai: Any, params: Any) -> frozenset[str]:
        return frozenset()  # everything runs on the host CPU; no layer needs to stay float

    def show_mapping(self, output_dir: Path) -> str | None:
        return None  # one CPU, nothing mapped

    def supported_ops(self) -> list[Any]:
        return []  # onnxruntime runs every operator the ONNX frontend accepts

    def device_runtime(self) -> str:
        """On a device: this machine with its onnxruntime (what the benchmark's figures are measured with)."""
        return device_description()


def device_description() -> str:
    """The machine and onnxruntime here, as the benchmark records and keys them; a clear error without
    onnxruntime (a device must have the family's runtime installed)."""
    from importlib.metadata import PackageNotFoundError

    try:
        version = onnxruntime_version()
    except PackageNotFoundError:
        raise StageError("onnxruntime is not installed on this device (pip install onnxruntime)") from None
    return this_machine().describe(version)


TARGET = CpuTarget()
