"""Numeric simulation of an npu package: its subgraphs run in sequence (NPU programs as the QDQ integer
arithmetic they hold, in onnxruntime; host subgraphs in float, as TVM built them for this machine when the
build compiled them, else in onnxruntime), and the outputs are compared with the float model on the same
inputs."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from accelbuild.quantize import measure
from accelbuild.targets import tvm_compiler
from accelbuild.targets.npu import package, partition


@dataclass(frozen=True)
class Step:
    """One subgraph of a package, ready to run."""

    name: str
    processor: str
    model: onnx.ModelProto
    build: bytes | None = None  # TVM's build of a compiled host subgraph for this machine (host_build.tar.gz)

    def session(self) -> Any:
        return tvm_compiler.load(self.build, self.model) if self.build is not None else measure.session(self.model)


@dataclass
class Recorded:
    """A session that records its ``run`` calls: each one's wall-clock seconds, and with ``keep_feeds`` what
    it was fed (the values a subgraph reads in sequence)."""

    inner: Any
    keep_feeds: bool = False
    seconds: list[float] = field(default_factory=list)
    feeds: list[measure.Feeds] = field(default_factory=list)

    def get_inputs(self) -> Any:
        return self.inner.get_inputs()

    def get_outputs(self) -> Any:
        return self.inner.get_outputs()

    def run(self, names: Any, feeds: measure.Feeds) -> Any:
        if self.keep_feeds:
            self.feeds.append(feeds)
        start = time.perf_counter()
        result = self.inner.run(names, feeds)
        self.seconds.append(time.perf_counter() - start)
        return result

    def median_seconds(self) -> float | None:
        """The median call, the first one (it warms caches up) left out when there are others."""
        timed = self.seconds[1:] or self.seconds
        return statistics.median(timed) if timed else None


def steps_of(members: dict[str, bytes], model: str | None = None,
             builds: Mapping[str, bytes] | None = None) -> list[Step]:
    """The package's subgraphs in sequence order (of one model when ``model`` is given); ``builds``: the host
    subgraphs' builds for this machine, by subgraph name."""
    steps = []
    for config in package.configs(members):
        if model is not None and config["model"] != model:
            continue
        data = members[package.source_of(config)]
        if config["processor"] == "npu":
            data = package.read_program(data, config["file"]).model
        steps.append(Step(config["name"], config["processor"], onnx.load_from_string(data),
                          (builds or {}).get(config["name"])))
    return steps


def run_sequence(steps: Sequence[Step], feeds: list[measure.Feeds], outputs: Sequence[str],
                 sessions: Mapping[str, Any] | None = None) -> list[list[np.ndarray]]:
    """Every sample through the package's subgraphs in order, in the sessions every accuracy figure uses
    (``sessions``: ready ones by step name, e.g. timed)."""
    ready = sessions or {}
    return partition.run_sequence(list(steps), feeds, outputs, lambda step: ready.get(step.name) or step.session())
