"""A DFP read back into what the simulators need: per model, the runnable graph with its weights
restored from the packed weights section, and the layer placement and hardware facts of the program."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
from onnx import numpy_helper

from accelbuild.errors import InputFileError
from accelbuild.quantize.precision import storage_dtype
from accelbuild.targets.mx3.dfp import Dfp, read_dfp
from accelbuild.targets.mx3.dfp.weights import read_tensor


@dataclass
class ProgramModel:
    name: str
    graph: onnx.ModelProto | None   # quantized graph, integer weights restored (None: read for timing only)
    layers: list[dict[str, Any]]    # placement rows (chip, first_core, cores, cycles, ...)
    input_bytes: int                # host-link bytes per frame (packet format applied)
    output_bytes: int


@dataclass
class Program:
    dfp: Dfp
    models: list[ProgramModel]
    hardware: dict[str, Any]
    boundaries: list[int]
    predicted: dict[str, Any]
    simcfg: dict[str, Any] | None
    share_input: bool = False  # one input stream feeds every model


def load_program(path: Path, shown: str | None = None) -> Program:
    return program_of(read_dfp(path, shown), shown or str(path))


def program_of(dfp: Dfp, shown: str, graphs: bool = True) -> Program:
    """The program of ``dfp``; without ``graphs``, what the timing simulation needs only (no model graphs:
    the closed loop times 32 splits)."""
    try:
        program = json.loads(dfp.sections["program"])
        blobs = dfp.sections.get("graphs", b"")
        weights = dfp.sections["weights"]
        models = [_model(entry, blobs, weights, program, dfp, graphs) for entry in program["models"]]
        simcfg = json.loads(dfp.sections["simcfg"]) if "simcfg" in dfp.sections else None
        int(program["hardware"]["host_link"]["frames_in_flight"])  # the timing model's buffers are in the program
        return Program(dfp, models, program["hardware"], program["boundaries"], program["predicted"], simcfg,
                       bool(program["packets"].get("share_input", False)))
    except (KeyError, ValueError, TypeError, IndexError) as exc:
        raise InputFileError(shown, f"the DFP's program cannot be simulated: {exc.__class__.__name__}: {exc}") from None


def _model(entry: dict[str, Any], graphs: bytes, weights: bytes, program: dict[str, Any], dfp: Dfp,
           with_graph: bool = True) -> ProgramModel:
    ref = entry["graph"]
    start, length = int(ref["offset"]), int(ref["length"])
    if start < 0 or start + length > len(graphs):
        raise ValueError(f"graph of model {entry['name']!r} lies outside the graphs section")
    graph = None
    if with_graph:
        graph = onnx.ModelProto()
        graph.ParseFromString(graphs[start:start + length])
        for name, weight_ref in entry["weights"].items():
            codes = read_tensor(weights, weight_ref)
            graph.graph.initializer.append(numpy_helper.from_array(codes.astype(storage_dtype(int(weight_ref["bits"]))),
                                                                   name))
            for value in list(graph.graph.input):
                if value.name == name:
                    graph.graph.input.remove(value)
    header = next(m for m in dfp.header.models if m.name == entry["name"])
    formats = program["packets"]
    return ProgramModel(entry["name"], graph, entry["layers"],
                        sum(_packet_bytes(p.shape, formats["input_format"]) for p in header.inputs),
                        sum(_packet_bytes(p.shape, formats["output_format"]) for p in header.outputs))


def _packet_bytes(shape: tuple[int, ...], fmt: str) -> int:
    from accelbuild.targets.mx3.packets import bytes_per_frame

    return bytes_per_frame(list(shape), fmt)
