"""Simulating an npu package on its own (the benchmark stage and ``accelbuild bench`` both start here).

A package holds everything the timing simulation needs: the platform profile, each NPU program (its QDQ
subgraph and the schedule's settings) and each host subgraph. Each model's partition is rebuilt from the
members and each NPU subgraph is scheduled again with the recorded settings (the scheduler is
deterministic, so this is the schedule the build recorded; a mismatch in cycles is an error), then
``timeline.simulate`` runs it. Models of one pipeline take turns on the one NPU: each gets one frame per
round, so each model's rate is 1 / (sum over models of 1 / its rate alone).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import onnx

from accelbuild.errors import InputFileError
from accelbuild.targets.npu import package
from accelbuild.targets.npu.graph_info import QDQ_OPS
from accelbuild.targets.npu.hardware import NpuHardware, npu_hardware
from accelbuild.targets.npu.partition import Partition, Subgraph
from accelbuild.targets.npu.schedule import Schedule, schedule
from accelbuild.targets.npu.timeline import Timeline, simulate


@dataclass
class ModelRun:
    name: str
    partition: Partition
    schedules: dict[int, Schedule]
    timeline: Timeline


@dataclass
class PackageRun:
    hw: NpuHardware
    host: str
    models: list[ModelRun]

    @property
    def round_seconds(self) -> float:
        """One frame of every model, one after another on the shared NPU."""
        return sum(1.0 / m.timeline.fps for m in self.models if m.timeline.fps)

    def model_fps(self, run: ModelRun) -> float:
        return 1.0 / self.round_seconds if self.round_seconds else run.timeline.fps


def simulate_package(members: dict[str, bytes], shown: str) -> PackageRun:
    if package.PROFILE not in members:
        raise InputFileError(shown, f"package has no {package.PROFILE}")
    hw = npu_hardware(json.loads(members[package.PROFILE]))
    configs = package.configs(members)
    host = configs[0]["host"] if configs else "arm"
    runs = []
    for name in dict.fromkeys(c["model"] for c in configs):
        subgraphs, schedules = [], {}
        for index, config in enumerate(c for c in configs if c["model"] == name):
            data = members[package.source_of(config)]
            if config["processor"] == "npu":
                program = package.read_program(data, config["file"])
                model = onnx.load_from_string(program.model)
                recorded = program.header["schedule"]
                again = schedule(model, hw, recorded["effort"], recorded["compile_mode"],
                                 recorded["desired_batch_size"])
                if again.cycles != recorded["cycles"]:
                    raise InputFileError(shown, f"{config['file']}: its schedule ({recorded['cycles']:,} cycles) "
                                                f"is not what this accelbuild schedules ({again.cycles:,}); "
                                                "rebuild the package")
                schedules[index] = again
            else:
                model = onnx.load_from_string(data)
            layers = [n.name for n in model.graph.node if n.op_type not in QDQ_OPS and n.op_type != "Constant"]
            subgraphs.append(Subgraph(index, config["processor"], layers, list(config["inputs"]),
                                      list(config["outputs"]), model))
        units = {layer: s.unit for s in subgraphs for layer in s.nodes}
        op_types = {n.name: n.op_type for s in subgraphs for n in s.model.graph.node if n.name in units}
        part = Partition(subgraphs, units, {}, op_types)
        runs.append(ModelRun(name, part, schedules, simulate(part, schedules, hw, host)))
    return PackageRun(hw, host, runs)


def offload_record(runs: PackageRun) -> dict[str, Any]:
    """benchmark.json's ``offload``: layers on the NPU and on the host, and subgraphs, over every model."""
    npu = sum(len(r.partition.npu_layers) for r in runs.models)
    host = sum(len(r.partition.host_layers) for r in runs.models)
    ops: Counter[str] = Counter()
    for r in runs.models:
        ops.update(r.partition.host_ops())
    return {"npu_layers": npu, "host_layers": host, "host": runs.host,
            "subgraphs": sum(len(r.partition.subgraphs) for r in runs.models),
            "npu_subgraphs": sum(len(r.partition.npu_subgraphs) for r in runs.models),
            "host_ops": dict(sorted(ops.items()))}
