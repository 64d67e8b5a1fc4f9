"""The ``target`` section of family cpu, typed, and the parameter objects of its stages."""

from __future__ import annotations

from dataclasses import dataclass, field

from accelbuild.config.spec import key
from accelbuild.stages.params import AccuracyInputs, DataParams


def program_files(backend: str) -> tuple[str, str]:
    """(the program, its record) a model's assemble writes: onnxruntime's or TVM's."""
    return ("model.so", "tvm.json") if backend == "tvm" else ("model.ort", "ort.json")


@dataclass(frozen=True)
class CpuTargetSpec:
    """``target`` of family cpu (``target.schema.json``: each key's description and default), built by
    ``accelbuild.config.spec.build``."""

    family: str  # "cpu"
    backend: str  # onnxruntime | tvm
    threads: int | None  # intra-op threads; None: onnxruntime's default (one per physical core)
    precision: str  # float | int8
    graph_optimization: str  # basic | extended | all
    # measure every session configuration, keep the fastest
    closed_loop: bool = field(metadata=key("closed_loop.enabled"))


@dataclass(frozen=True)
class NoQuantizeParams:
    """cpu adds nothing to the quantize stage's parameters."""


@dataclass(frozen=True)
class SessionParams:
    """map: the onnxruntime session options every later stage (and a deployment) uses."""

    model: str
    precision: str
    threads: int | None
    graph_optimization: str
    onnxruntime: str  # the version (a new onnxruntime re-runs the family's stages)


@dataclass(frozen=True)
class ClosedLoopParams:
    """map with ``closed_loop.enabled``: measure every candidate session configuration (``closed_loop.py``) on
    the device (or here) and record the fastest measured in session.json, every candidate in closed_loop.json."""

    model: str
    default: tuple[str, str, int]  # (precision, graph optimization, threads) the target keys give
    threads: tuple[int, ...]  # the thread counts tried (0: onnxruntime's default)
    accuracy: AccuracyInputs  # the frames each candidate runs (the benchmark's)
    data: DataParams | None
    frames: int
    onnxruntime: str
    machine: str  # where the candidates are measured: a device's (or this machine's) description
    device: str | None = None  # benchmark.device's resource


@dataclass(frozen=True)
class OrtParams:
    """assemble: write ``model.ort`` with the session's optimizations and check it against quantized.onnx."""

    model: str
    accuracy: AccuracyInputs
    data: DataParams | None
    onnxruntime: str
    # graph_optimization: all lays tensors out in NCHWc blocks of the CPU's vector width, so the .ort
    # depends on it (None at the portable levels)
    vector_isa: str | None


@dataclass(frozen=True)
class TvmParams:
    """assemble, backend tvm: compile quantized.onnx for this CPU into ``model.so`` and check it."""

    model: str
    accuracy: AccuracyInputs
    data: DataParams | None
    tvm: str  # apache-tvm's version (a new TVM re-runs the stage)
    cpu: str  # the CPU compiled for (LLVM's -mcpu of this machine): another CPU compiles its own


@dataclass(frozen=True)
class CpuBenchmarkParams:
    """benchmark: time every model.ort on this machine and measure its accuracy against float."""

    pipeline: str
    models: tuple[str, ...]
    accuracy: AccuracyInputs
    data: tuple[DataParams | None, ...]
    frames: int
    host: bool  # time the cropped pre/post sections too (end-to-end figures)
    machine: str  # where the figures are measured: another machine re-measures rather than reusing them
    machine_id: str  # which machine (util.machine.machine_identity): one of the same kind re-measures too
    calibration_frames: tuple[int | None, ...]  # per model, int8: its first accuracy inputs calibrated it
    backend: str  # what runs each model: onnxruntime (model.ort) or tvm (model.so)
    device: str | None  # benchmark.device's resource: measured on that device (``machine`` is its)
