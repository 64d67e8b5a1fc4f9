"""Family ethos-u behind the target boundary: Arm Ethos-U NPUs through the real Vela compiler.

Stages (per model, then one benchmark for the pipeline):

- map: ``<model>/int8.tflite``, the full-integer TFLite model written from quantized.onnx
  (``tflite/writer.py``) and checked in LiteRT against quantized.onnx in onnxruntime
  (``<model>/int8.json`` records the check);
- assemble: Vela compiles it: ``<model>/int8_vela.tflite``, ``vela/<model>/`` (Vela's summary and
  per-layer CSV, its console output) and ``<model>/vela.json`` (what accelbuild read from them);
- benchmark: ``benchmark.json`` (Vela's estimates, labelled with its version, and the int8 model's
  accuracy against float measured in LiteRT), ``layer_stats.yaml`` and ``report.html``.

Vela and LiteRT come with the ``accelbuild[ethos-u]`` extra; without it, loading a pipeline of this
family is an exit-2 error naming the extra.
"""

from __future__ import annotations

import configparser
from functools import lru_cache
from pathlib import Path
from typing import Any

from accelbuild.config import schema_check
from accelbuild.config.spec import ModelSpec, PipelineSpec, build
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
from accelbuild.targets.base import PlatformRule, SupportSection, TargetBase
from accelbuild.targets.ethos_u import vela
from accelbuild.targets.ethos_u.spec import (
    MAX_STEPS,
    BenchmarkParams,
    EthosUTargetSpec,
    NoQuantizeParams,
    VelaParams,
    WriteParams,
)

VELA_FILES = ("summary.csv", "per-layer.csv", "vela.log")


def _model(model: ModelSpec | None) -> ModelSpec:
    assert model is not None
    return model


def _map_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    m = _model(model)
    folder = model_dir(pipeline, m)
    inputs = {"quantized.onnx": folder / "quantized.onnx", "ai.onnx": folder / "ai.onnx",
              "pre.onnx": folder / "pre.onnx"}
    inputs.update(model_data(m) if m.data is not None else accuracy_data(pipeline))
    return inputs


def _map_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    folder = model_dir(pipeline, _model(model))
    return {"int8.tflite": folder / "int8.tflite", "int8.json": folder / "int8.json"}


def _map_params(pipeline: PipelineSpec, model: ModelSpec | None) -> WriteParams:
    m = _model(model)
    bits = m.quantize.own.bits
    steps = None if m.quantize.auto_precision is not None else MAX_STEPS[bits]  # None: as quantize chose
    return WriteParams(m.name, accuracy_inputs(pipeline), data_params(m), steps, m.quantize.own.calibration_frames)


def _assemble_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {"int8.tflite": model_dir(pipeline, _model(model)) / "int8.tflite"}


def _assemble_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    m = _model(model)
    folder = model_dir(pipeline, m)
    outputs = {"int8_vela.tflite": folder / "int8_vela.tflite", "vela.json": folder / "vela.json"}
    outputs.update({f"vela/{name}": pipeline.output.dir / "vela" / m.name / name for name in VELA_FILES})
    return outputs


def _assemble_params(pipeline: PipelineSpec, model: ModelSpec | None) -> VelaParams:
    t = pipeline.target
    return VelaParams(_model(model).name, t.accelerator, t.system_config, t.memory_mode, t.optimise, vela.version())


def _benchmark_inputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {**model_files(pipeline, ("ai.onnx", "pre.onnx", "post.onnx", "quantized.onnx", "int8.tflite", "int8.json",
                                     "vela.json")), **models_data(pipeline)}


def _benchmark_outputs(pipeline: PipelineSpec, model: ModelSpec | None) -> dict[str, Path]:
    return {name: pipeline.output.dir / name for name in ("benchmark.json", "layer_stats.yaml", "report.html")}


def _benchmark_params(pipeline: PipelineSpec, model: ModelSpec | None) -> BenchmarkParams:
    return BenchmarkParams(pipeline.name, tuple(m.name for m in pipeline.models), accuracy_inputs(pipeline),
                           tuple(data_params(m) for m in pipeline.models), pipeline.target.accelerator,
                           vela.version(), tuple(m.quantize.own.calibration_frames for m in pipeline.models),
                           pipeline.benchmark.host)


_CODE = ("accelbuild.targets.ethos_u", "accelbuild.quantize", "accelbuild.accuracy", "accelbuild.data", "accelbuild.report",
         "accelbuild.util.tflite_builder")


@lru_cache(maxsize=1)
def vela_ini_names() -> dict[str, tuple[str, ...]]:
    """System configs and memory modes of the vela.ini that Vela uses by default."""
    import ethosu.vela

    parser = configparser.ConfigParser()
    parser.read(Path(ethosu.vela.__file__).parent.parent / "config_files" / "Arm" / "vela.ini")
    names: dict[str, list[str]] = {"System_Config": [], "Memory_Mode": []}
    for section in parser.sections():
        kind, _, name = section.partition(".")
        if kind in names:
            names[kind].append(name)
    return {k: tuple(v) for k, v in names.items()}


class EthosUTarget(TargetBase):
    family = "ethos-u"
    quantize_settings = ActivationSettings  # its quantize keys: activation_bits, calibration, calibration_frames
    code = _CODE
    files = ()  # its program is a Vela TFLite file; Vela itself inspects it
    toolchain = None  # runs in accelbuild's own environment
    no_device_runtime = "Vela estimates its figures; nothing of it runs on a board here"
    stages = (
        Stage("map", True, "accelbuild.targets.ethos_u.map_stage", (), _map_inputs, _map_outputs, _map_params),
        Stage("assemble", True, "accelbuild.targets.ethos_u.assemble_stage", (), _assemble_inputs,
              _assemble_outputs, _assemble_params),
        Stage("benchmark", False, "accelbuild.targets.ethos_u.benchmark_stage", (), _benchmark_inputs,
              _benchmark_outputs, _benchmark_params),
    )

    platform = PlatformRule("the Vela accelerator config", "ethos-u55-128", names_family=True)

    def starter_target(self, platform: str | None) -> list[str]:
        return ["family: ethos-u", f"accelerator: {platform}"]

    def target_spec(self, t: dict[str, Any], checker: Any) -> EthosUTargetSpec:
        spec = build(EthosUTargetSpec, t)
        try:
            vela.require()
        except vela.MissingExtraError as exc:
            checker.error(("target", "family"), str(exc))
            return spec
        known = vela.accelerators()
        if spec.accelerator not in known:
            checker.error(("target", "accelerator"), f"unknown accelerator {spec.accelerator!r} for Vela "
                          f"{vela.version()} (one of {', '.join(known)})"
                          f"{schema_check.did_you_mean(spec.accelerator, list(known))}")
        names = vela_ini_names()
        for key, kind in (("system_config", "System_Config"), ("memory_mode", "Memory_Mode")):
            value = getattr(spec, key)
            if value is not None and value not in names[kind]:
                checker.error(("target", key), f"Vela {vela.version()} has no {key} {value!r} (one of "
                              f"{', '.join(names[kind])}){schema_check.did_you_mean(value, list(names[kind]))}")
        return spec


    def activation_params(self, spec: PipelineSpec, model: ModelSpec) -> ActivationParams:
        return project(ActivationParams, model.quantize.own)

    def check_pipeline(self, spec: PipelineSpec, checker: Any) -> None:
        for model in spec.models:
            q = model.quantize
            if q.weight_bits != 8:
                checker.error(("models", model.index, "quantize", "weight_bits"),
                              f"Ethos-U takes int8 weights (weight_bits: 8), not {q.weight_bits}")
            for key in ("bits", "bits_file"):
                if getattr(q, key, None):
                    checker.error(("models", model.index, "quantize", key),
                                  f"{key} does not apply to ethos-u: the whole model is int8, or int16x8 with "
                                  "activation_bits: 16 (auto_precision chooses between them)", key=True)
            if q.auto_precision is not None and checker.written(("models", model.index, "quantize", "activation_bits")):
                checker.error(("models", model.index, "quantize", "activation_bits"),
                              "auto_precision chooses int8 or int16x8 for the whole model on ethos-u; give "
                              "activation_bits or auto_precision, not both", key=True)

    def precision(self, spec: PipelineSpec) -> PrecisionRules:
        return PrecisionRules(weight_bits=(8,), activations="integer", activation_bits=(8, 16), symmetric=False,
                              share_concat_scales=True, conventions="tflite", whole_model_bits=True)  # TFLite's int8 Concat requantizes nothing

    def quantize_params(self, spec: PipelineSpec) -> NoQuantizeParams:
        return NoQuantizeParams()

    def quantize_record(self, ai: Any, params: NoQuantizeParams) -> dict[str, Any]:
        return {}

    def host_nodes(self, ai: Any, params: Any) -> frozenset[str]:
        return frozenset()  # Vela decides what stays on the CPU, from the int8 TFLite model

    def show_mapping(self, output_dir: Path) -> str | None:
        return None  # vela.json and Vela's own reports say where each operator runs

    def supported_ops(self) -> list[SupportSection]:
        return []  # the installed Vela decides; benchmark.json lists its CPU operators with its reasons

    def model_problems(self, ai: Any) -> list[str]:
        """``validate``: operators of the AI section the TFLite writer has no form for, int8 or float (the map
        stage would refuse them; the conditions of the ones it has are checked when it writes)."""
        from accelbuild.targets.ethos_u.tflite.fallback import FLOAT_CONVERTERS
        from accelbuild.targets.ethos_u.tflite.ops import CONVERTERS

        missing: dict[str, list[str]] = {}
        for node in ai.graph.node:
            known = node.op_type in CONVERTERS or node.op_type in FLOAT_CONVERTERS
            if not known and node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
                missing.setdefault(node.op_type, []).append(node.name or node.output[0])
        return [f"operator {op} ({len(names)} node(s): {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}) "
                "cannot be written by the ethos-u int8 TFLite writer, nor as a float CPU operator; crop it to "
                "the host (crop.outputs) or choose another family" for op, names in sorted(missing.items())]


TARGET = EthosUTarget()
