"""Assemble stage of family npu: ``partition.json``, ``schedule.json`` and every model's ``quantized.onnx``
in; the package ``<name>.tar.gz`` (format: ``accelbuild.targets.npu.package``) and ``layer_stats.yaml`` out.
With ``offload.host_compiler: tvm`` also every model's accuracy inputs in, and ``host_code.json`` and
``host_build.tar.gz`` out (``host_code.py``)."""

from __future__ import annotations

import json
import logging
from typing import Any

import onnx
import yaml

from accelbuild import accuracy
from accelbuild.errors import StageError
from accelbuild.frontends.onnx_model import serialize
from accelbuild.stages.context import StageContext
from accelbuild.targets.npu import host_code, package
from accelbuild.targets.npu.hardware import npu_hardware
from accelbuild.targets.npu.partition import Offload, partition
from accelbuild.targets.npu.spec import NpuAssembleParams
from accelbuild.util.files import write_bytes_atomic, write_json_atomic

log = logging.getLogger(__name__)


def layer_stats(schedules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """layer_stats.yaml: per layer of every NPU subgraph, its unit and start/end cycle (static schedule,
    stalls not included), as SiMa's stats YAML gives them."""
    return [{"subgraph": s["name"], "layers": [{"name": layer["name"], "unit": layer["unit"],
                                                 "start_cycle": layer["start_cycle"], "end_cycle": layer["end_cycle"]}
                                                for layer in s["layers"]]}
            for s in schedules]


def run(ctx: StageContext) -> None:
    p: NpuAssembleParams = ctx.params
    partition_record = json.loads(ctx.inputs["partition.json"].read_text())
    schedules = {s["name"]: s for s in json.loads(ctx.inputs["schedule.json"].read_text())["subgraphs"]}
    subgraph_models = _subgraph_models(ctx, partition_record)
    stats = yaml.safe_dump(layer_stats(list(schedules.values())), sort_keys=False).encode("utf-8")
    compiled = _host_code(ctx, partition_record["subgraphs"], subgraph_models)
    members: list[tuple[str, bytes]] = []
    for sequence, entry in enumerate(partition_record["subgraphs"]):
        model = subgraph_models[entry["name"]]
        config: dict[str, Any] = {"name": entry["name"], "sequence": sequence, "processor": entry["unit"],
                                  "model": entry["model"], "file": entry["file"], "inputs": entry["inputs"],
                                  "outputs": entry["outputs"], "host": partition_record["host"], "config_params": {}}
        if compiled is not None and entry["name"] in compiled.board:
            assert p.host is not None
            file, program = compiled.board[entry["name"]]
            config.update(file=file, source=entry["file"], **host_code.config_fields(p.host, model))
            members.append((file, program))
        if entry["unit"] == "npu":
            s = schedules[entry["name"]]
            config["config_params"] = {"desired_batch_size": s["desired_batch_size"],
                                       "actual_batch_size": s["actual_batch_size"], "cycles": s["cycles"],
                                       "platform": partition_record["platform"]}
            header = {"name": entry["name"], "platform": partition_record["platform"], "inputs": entry["inputs"],
                      "outputs": entry["outputs"], "schedule": s}
            data = package.program_bytes(package.Program(header, serialize(model)))
        else:
            data = serialize(model)
        members.append((entry["file"], data))
        members.append((f"{entry['name']}.json", json.dumps(config, indent=2, sort_keys=True).encode("utf-8")))
    members.append(("layer_stats.yaml", stats))
    members.append((package.PROFILE, json.dumps(p.profile, indent=1, sort_keys=True).encode("utf-8")))
    blob = package.package_bytes(members)
    if compiled is not None:
        write_json_atomic(ctx.outputs["host_code.json"], compiled.record)
        write_bytes_atomic(ctx.outputs["host_build.tar.gz"],
                           package.package_bytes([(f"{name}.so", data) for name, data in compiled.build.items()]))
    write_bytes_atomic(ctx.outputs["package"], blob)
    write_bytes_atomic(ctx.outputs["layer_stats.yaml"], stats)
    log.info("%s: %s: %d subgraph(s), %s bytes", p.pipeline, p.package, len(partition_record["subgraphs"]),
             f"{len(blob):,}")


def _host_code(ctx: StageContext, entries: list[dict[str, Any]],
               models: dict[str, onnx.ModelProto]) -> host_code.HostCode | None:
    """The host subgraphs compiled by TVM and checked on each model's accuracy inputs (None: not asked)."""
    p: NpuAssembleParams = ctx.params
    if p.host is None:
        return None
    feeds = {}
    for index, name in enumerate(p.models):
        if any(e["model"] == name and e["unit"] == "arm" for e in entries):
            feeds[name] = accuracy.ai_inputs(name, ctx.inputs, ctx.inputs[f"{name}/ai.onnx"],
                                             ctx.inputs[f"{name}/pre.onnx"], p.host.accuracy, p.host.data[index])
    return host_code.compile_host_subgraphs(entries, models, feeds, p.host)


def _subgraph_models(ctx: StageContext, record: dict[str, Any]) -> dict[str, onnx.ModelProto]:
    """Each subgraph of partition.json as a standalone model, cut again from its quantized model with the
    recorded units (the partitioner is deterministic; a different cut means partition.json is stale)."""
    p: NpuAssembleParams = ctx.params
    hw = npu_hardware(p.profile)
    found: dict[str, onnx.ModelProto] = {}
    for name in p.models:
        entries = [e for e in record["subgraphs"] if e["model"] == name]
        units = {layer: e["unit"] for e in entries for layer in e["nodes"]}
        model = onnx.load(str(ctx.inputs[f"{name}/quantized.onnx"]))
        part = partition(model, hw, Offload(host=record["host"], max_subgraphs=len(entries) or 1), units=units)
        for entry, sub in zip(entries, part.subgraphs, strict=True):
            if sub.nodes != entry["nodes"] or sub.unit != entry["unit"]:
                raise StageError(f"{name}: partition.json does not match {name}/quantized.onnx (subgraph "
                                 f"{entry['id']}); rebuild the map stage")
            found[entry["name"]] = sub.model
    return found
