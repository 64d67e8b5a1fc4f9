"""The ``target`` section of a pipeline of family mx3, typed (its stages' parameter objects: ``params.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from accelbuild.config.spec import derived


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
