"""Numeric simulation of an npu package: its subgraphs run in sequence in onnxruntime (NPU programs as
the QDQ integer arithmetic they hold, host subgraphs in float), and the outputs are compared with the
float model on the same inputs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx

from accelbuild.quantize import measure
from accelbuild.targets.npu import package, partition


@dataclass(frozen=True)
class Step:
    """One subgraph of a package, ready to run."""

    name: str
    processor: str
    model: onnx.ModelProto


def steps_of(members: dict[str, bytes], model: str | None = None) -> list[Step]:
    """The package's subgraphs in sequence order (of one model when ``model`` is given)."""
    steps = []
    for config in package.configs(members):
        if model is not None and config["model"] != model:
            continue
        data = members[config["file"]]
        if config["processor"] == "npu":
            data = package.read_program(data, config["file"]).model
        steps.append(Step(config["name"], config["processor"], onnx.load_from_string(data)))
    return steps


def run_sequence(steps: Sequence[Step], feeds: list[measure.Feeds], outputs: Sequence[str]) -> list[list[np.ndarray]]:
    """Every sample through the package's subgraphs in order, in the sessions every accuracy figure uses."""
    return partition.run_sequence([step.model for step in steps], feeds, outputs, measure.session)
