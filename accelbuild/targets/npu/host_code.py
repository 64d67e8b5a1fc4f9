"""``offload.host_compiler: tvm``: the package's Arm host subgraphs compiled by Apache TVM (docs/npu_package.md).

For each host subgraph on the Arm cores, the assemble stage:

1. builds it for the board (``HostCompileParams.board``, the profile's Arm core): ``<model>_<id>.so``, an
   AArch64 shared object, when the cross linker is installed, else ``<model>_<id>.tar``, its object files;
2. builds the same module for this kind of machine (``HostCompileParams.build``) and runs that in TVM's VM
   on the values the subgraph reads when the model runs on its accuracy inputs (real images with
   ``models[].data``), against onnxruntime on the same values: every output together within cosine
   ``TOLERANCE_COSINE``, the max abs error recorded;
3. keeps a subgraph TVM cannot import or build, or whose check fails, as its float ``.onnx``, with the
   reason, and a warning. (``offload.fail_on_fallback`` fails the map stage on any host layer, so a build
   with it has no host subgraph to compile.)

``host_code.json`` records all of it; ``host_build.tar.gz`` holds the builds for this machine (the
benchmark stage runs and times them).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from accelbuild.errors import StageError
from accelbuild.quantize import measure
from accelbuild.targets import tvm_compiler
from accelbuild.targets.npu import numerics, partition
from accelbuild.targets.npu.spec import HostCompileParams

log = logging.getLogger(__name__)

TOLERANCE_COSINE = 0.9999  # the same float arithmetic in another order (fused multiply-adds, vector sums)
AGAINST = "onnxruntime (1 thread, Q/DQ pairs not fused), as every accuracy figure"


@dataclass
class HostCode:
    """What ``compile_host_subgraphs`` gives: per compiled subgraph its board program (member name and
    bytes) and its build for this machine; ``record`` is host_code.json."""

    board: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    build: dict[str, bytes] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)


def board_suffix(params: HostCompileParams) -> str:
    return ".so" if params.linker else ".tar"


def compile_host_subgraphs(entries: Sequence[Mapping[str, Any]], models: Mapping[str, onnx.ModelProto],
                           feeds: Mapping[str, list[measure.Feeds]], params: HostCompileParams) -> HostCode:
    """Compile and check the Arm host subgraphs among ``entries`` (partition.json's, in sequence order;
    ``models`` by subgraph name; ``feeds``: each model's accuracy inputs)."""
    tvm_compiler.require_version(params.tvm)
    inputs = _subgraph_inputs(entries, models, feeds)
    code = HostCode(record=_header(params))
    linker = params.linker.split()[0] if params.linker else None
    rows = code.record["subgraphs"]
    for entry in entries:
        if entry["unit"] != "arm":
            continue
        name, model = entry["name"], models[entry["name"]]
        member = f"{name}{board_suffix(params)}"
        try:
            board = _build(model, params.board, member, linker)
            build = _build(model, params.build, f"{name}.so", None)
            check = _check(model, build, inputs[name])
        except StageError as exc:
            _fall_back(rows, entry, str(exc))
            continue
        if check["cosine"] < TOLERANCE_COSINE:
            _fall_back(rows, entry, f"TVM's build differs from onnxruntime: cosine {check['cosine']:.6f}, below "
                                    f"{TOLERANCE_COSINE} (max abs err {check['max_abs_err']:.3g})")
            continue
        code.board[name] = (member, board)
        code.build[name] = build
        rows.append({"name": name, "model": entry["model"], "compiled": True, "file": member, "bytes": len(board),
                     "source": entry["file"], "check": {**check, "samples": len(inputs[name])}})
        log.info("%s: TVM %s, %d bytes; against onnxruntime on %d sample(s): cosine %.6f, max abs err %.3g", name,
                 member, len(board), len(inputs[name]), check["cosine"], check["max_abs_err"])
    return code


def config_fields(params: HostCompileParams, model: onnx.ModelProto) -> dict[str, Any]:
    """What a compiled subgraph's config adds: the compiler, the target, how to run it and the shapes of its
    inputs and outputs (float32, static)."""
    values = [*model.graph.input, *model.graph.output]
    return {"compiler": f"tvm {params.tvm}", "target": params.board,
            "abi": "Relax VM executable: tvm.relax.VirtualMachine(tvm.runtime.load_module(file), tvm.cpu())['main'], "
                   "float32 inputs and outputs in the config's order",
            "shapes": {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in values}}


def _header(params: HostCompileParams) -> dict[str, Any]:
    return {"compiler": f"tvm {params.tvm}", "board_target": params.board,
            "format": "AArch64 shared object" if params.linker else "tar of AArch64 object files (no cross linker)",
            "linker": params.linker, "build_target": params.build,
            "tolerance": {"cosine": TOLERANCE_COSINE, "against": AGAINST}, "subgraphs": []}


def _fall_back(rows: list[dict[str, Any]], entry: Mapping[str, Any], reason: str) -> None:
    log.warning("%s: stays float ONNX on the host: %s", entry["name"], reason)
    rows.append({"name": entry["name"], "model": entry["model"], "compiled": False, "file": entry["file"],
                 "reason": reason})


def _build(model: onnx.ModelProto, target: dict[str, Any], file: str, linker: str | None) -> bytes:
    with tempfile.TemporaryDirectory(prefix="accelbuild-tvm-") as tmp:
        out = Path(tmp) / file
        tvm_compiler.compile_model(model, target, out, linker=linker)
        return out.read_bytes()


def _check(model: onnx.ModelProto, build: bytes, samples: list[measure.Feeds]) -> dict[str, Any]:
    """The build for this machine in TVM's VM against onnxruntime, on the subgraph's real inputs."""
    try:
        compiled = tvm_compiler.load(build, model)
        got = measure.run_all(compiled, samples)
    except Exception as exc:  # TVM's runtime errors
        raise StageError(f"TVM's build fails to run ({tvm_compiler.first_line(exc)})") from None
    return measure.compare(measure.run_all(measure.session(model), samples), got)


def _subgraph_inputs(entries: Sequence[Mapping[str, Any]], models: Mapping[str, onnx.ModelProto],
                     feeds: Mapping[str, list[measure.Feeds]]) -> dict[str, list[measure.Feeds]]:
    """Per subgraph, the values it reads on each sample when its model's subgraphs run in sequence in
    onnxruntime (NPU subgraphs as their QDQ arithmetic)."""
    recorders = {e["name"]: numerics.Recorded(measure.session(models[e["name"]]), keep_feeds=True)
                 for e in entries if e["model"] in feeds}
    for model_name, samples in feeds.items():
        names = [e["name"] for e in entries if e["model"] == model_name]
        partition.run_sequence(names, samples, [], recorders.__getitem__)
    return {name: recorder.feeds for name, recorder in recorders.items()}

