"""Numeric simulation: run a DFP's graphs the way the chip computes them.

Weights come from the DFP (dequantized per channel), every layer's output is rounded to bfloat16, and
the activation approximations the hardware declares (piecewise-linear sigmoid/tanh) replace the exact
functions. The graph runs in onnxruntime (vectorised, not a per-element loop).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from accelbuild.quantize import measure
from accelbuild.sim.program import ProgramModel

_EXACT = {"Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "Tanh": np.tanh}


def chip_graph(model: ProgramModel, approximations: dict[str, dict[str, Any]]) -> onnx.ModelProto:
    """The program's graph with the declared approximations and bfloat16 activations."""
    graph = onnx.ModelProto()
    graph.CopyFrom(model.graph)
    for op, spec in sorted(approximations.items()):
        if op in _EXACT and spec.get("method") == "piecewise_linear":
            _approximate(graph, op, spec)
    return measure.with_bf16_activations(graph)


def _approximate(model: onnx.ModelProto, op: str, spec: dict[str, Any]) -> None:
    """Replace every ``op`` node by a lookup: clip x to the range, pick its segment, interpolate."""
    low, high = (float(v) for v in spec["range"])
    segments = int(spec["segments"])
    knots = np.linspace(low, high, segments + 1)
    values = _EXACT[op](knots).astype(np.float32)
    slopes = ((values[1:] - values[:-1]) / (knots[1] - knots[0])).astype(np.float32)
    graph = model.graph
    prefix = f"approx.{op.lower()}"
    constants = {
        f"{prefix}.low": np.float32(low), f"{prefix}.high": np.float32(high),
        f"{prefix}.inv_step": np.float32(segments / (high - low)), f"{prefix}.last": np.int64(segments - 1),
        f"{prefix}.zero": np.int64(0), f"{prefix}.values": values[:-1], f"{prefix}.slopes": slopes,
        f"{prefix}.step": np.float32((high - low) / segments),
    }
    for name, value in constants.items():
        if name not in {t.name for t in graph.initializer}:
            graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    rewritten = []
    for node in graph.node:
        if node.op_type != op:
            rewritten.append(node)
            continue
        rewritten.extend(_lookup_nodes(node.name, node.input[0], node.output[0], prefix))
    del graph.node[:]
    graph.node.extend(rewritten)


def _lookup_nodes(name: str, x: str, y: str, p: str) -> list[onnx.NodeProto]:
    t = f"{name}/pwl"
    make = helper.make_node
    return [
        make("Clip", [x, f"{p}.low", f"{p}.high"], [f"{t}.x"], name=f"{t}.clip"),
        make("Sub", [f"{t}.x", f"{p}.low"], [f"{t}.offset"], name=f"{t}.sub"),
        make("Mul", [f"{t}.offset", f"{p}.inv_step"], [f"{t}.position"], name=f"{t}.scale"),
        make("Floor", [f"{t}.position"], [f"{t}.floor"], name=f"{t}.floor"),
        make("Cast", [f"{t}.floor"], [f"{t}.index_raw"], name=f"{t}.cast", to=TensorProto.INT64),
        make("Clip", [f"{t}.index_raw", f"{p}.zero", f"{p}.last"], [f"{t}.index"], name=f"{t}.index"),
        make("Gather", [f"{p}.values", f"{t}.index"], [f"{t}.value"], name=f"{t}.value"),
        make("Gather", [f"{p}.slopes", f"{t}.index"], [f"{t}.slope"], name=f"{t}.slope"),
        make("Cast", [f"{t}.index"], [f"{t}.index_f"], name=f"{t}.index_f", to=TensorProto.FLOAT),
        make("Mul", [f"{t}.index_f", f"{p}.step"], [f"{t}.knot_offset"], name=f"{t}.knot"),
        make("Sub", [f"{t}.offset", f"{t}.knot_offset"], [f"{t}.delta"], name=f"{t}.delta"),
        make("Mul", [f"{t}.slope", f"{t}.delta"], [f"{t}.rise"], name=f"{t}.rise"),
        make("Add", [f"{t}.value", f"{t}.rise"], [y], name=name),
    ]


def run(model: ProgramModel, approximations: dict[str, dict[str, Any]],
        samples: list[dict[str, np.ndarray]]) -> list[list[np.ndarray]]:
    """Outputs of the chip's arithmetic on each sample."""
    return measure.run_all(measure.session(chip_graph(model, approximations)), samples)
