"""The ``target`` section of a pipeline of family mx3, typed, and the parameter objects of its stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from accelbuild.config.spec import derived
from accelbuild.stages.params import AccuracyInputs, DataParams


@dataclass(frozen=True)
class ClosedLoopSpec:
    """``target.closed_loop``: simulate every candidate split of the hard mapping, ship the fastest."""

    enabled: bool
    jobs: int
    keep_splits: bool
    prioritize_model: int


@dataclass(frozen=True)
class Mx3TargetSpec:
    family: Literal["mx3"]
    chip_gen: str
    profile_path: Path = field(metadata=derived("chip_gen", "the chip generation's profile, resolved"))
    num_chips: int | Literal["min"]
    effort: Literal["lazy", "normal", "hard"]
    target_fps: float | None
    input_format: str
    output_format: str
    share_input: bool
    closed_loop: ClosedLoopSpec = field(metadata=derived("closed_loop", "its own section (ClosedLoopSpec)"))
    dfp_name: str | None  # None: <pipeline name>.dfp (``target.dfp_name``)
    sim_dfp: bool


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
