"""The parameter objects of family mx3's stages (quantize's packet part, map, assemble, benchmark): what each
stage's task key digests. Apart from the target spec (``spec.py``), so loading a pipeline does not build them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelbuild.stages.params import AccuracyInputs, DataParams


@dataclass(frozen=True)
class PacketParams:
    """mx3's part of the quantize stage's parameters: the host packet formats it records bytes for."""

    input_format: str
    output_format: str


@dataclass(frozen=True)
class MapParams:
    pipeline: str
    models: tuple[str, ...]
    num_chips: int | str
    effort: str
    target_fps: float | None
    share_input: bool
    profile: dict[str, Any]  # the merged, validated hardware profile (digested by content)


@dataclass(frozen=True)
class ClosedLoopParams:
    enabled: bool
    prioritize_model: int
    keep_splits: bool


@dataclass(frozen=True)
class AssembleParams:
    models: tuple[str, ...]
    input_format: str
    output_format: str
    share_input: bool
    sim_dfp: bool
    frames: int | None  # simulation settings: only with sim_dfp or the closed loop
    seed: int | None
    closed_loop: ClosedLoopParams
    profile: dict[str, Any]
    dfp_name: str  # the program to ship; with the closed loop, the best measured split (closed_loop.json names it)


@dataclass(frozen=True)
class BenchmarkParams:
    pipeline: str
    models: tuple[str, ...]
    frames: int
    host: bool
    seed: int  # of the timing simulation's host jitter
    accuracy: AccuracyInputs
    closed_loop: bool
    data: tuple[DataParams | None, ...] = ()  # each model's models[].data (its files: inputs "<model>/data:...")
    tuned: tuple[bool, ...] = ()  # each model: auto_precision chose its precisions on its accuracy frames
    credibility: dict[str, Any] = field(default_factory=dict)  # the profile's error band (targets/credibility.py)
