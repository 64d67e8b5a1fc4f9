"""Numeric simulation: run a DFP's graphs the way the chip computes them.

Weights come from the DFP (dequantized per channel), every layer's output is rounded to bfloat16, and
the activation approximations the hardware declares (piecewise-linear sigmoid/tanh) replace the exact
functions. The graph runs in onnxruntime (vectorised, not a per-element loop).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from accelbuild.quantize import measure
from accelbuild.targets.mx3.sim.program import ProgramModel
from accelbuild.util import onnx_graph as g

_EXACT = {"Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "Tanh": np.tanh}


def chip_graph(model: ProgramModel, approximations: dict[str, dict[str, Any]]) -> onnx.ModelProto:
    """The program's graph with the declared approximations and bfloat16 activations."""
    if model.graph is None:
        raise ValueError(f"{model.name}: the program was read for timing only, without its graph")
    graph = onnx.ModelProto()
    graph.CopyFrom(model.graph)
    _dequantize_weights(graph)
    graph = measure.with_bf16_activations(graph)  # first: an approximated op rounds its result only
    for op, spec in sorted(approximations.items()):
        if op in _EXACT and spec.get("method") == "piecewise_linear":
            _approximate(graph, op, spec)
    return graph


def _dequantize_weights(model: onnx.ModelProto) -> None:
    """Replace each weight DequantizeLinear by its float result, computed once (the same float32
    products onnxruntime would compute on every run)."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    kept = []
    for node in graph.node:
        if node.op_type != "DequantizeLinear" or node.input[0] not in inits or node.input[1] not in inits:
            kept.append(node)
            continue
        codes = numpy_helper.to_array(inits[node.input[0]]).astype(np.float32)
        scales = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        shape = [1] * codes.ndim
        shape[axis] = -1
        graph.initializer.append(numpy_helper.from_array((codes * scales.reshape(shape)).astype(np.float32),
                                                         node.output[0]))
    del graph.node[:]
    graph.node.extend(kept)
    used = {name for node in graph.node for name in g.node_reads(node)}  # If/Loop branches read weights too
    for tensor in [t for t in graph.initializer if t.name not in used]:
        graph.initializer.remove(tensor)


def _approximate(model: onnx.ModelProto, op: str, spec: dict[str, Any]) -> None:
    """Replace every ``op`` node by its piecewise-linear approximation on ``segments`` equal segments
    of ``range`` (inputs clipped to it): y = f(k_i) + (x - k_i) / step * (f(k_i + step) - f(k_i)).

    The knot values come from the exact op evaluated at the knots, so only fast elementwise kernels
    run (a table lookup with Gather is several times slower in onnxruntime).
    """
    graph = model.graph
    if not any(node.op_type == op for node in graph.node):
        return
    low, high = (float(v) for v in spec["range"])
    step = (high - low) / int(spec["segments"])
    prefix = f"approx.{op.lower()}"
    constants = {f"{prefix}.low": low, f"{prefix}.high": high, f"{prefix}.step": step,
                 f"{prefix}.inv_step": 1.0 / step, f"{prefix}.last": float(int(spec["segments"]) - 1)}
    existing = {t.name for t in graph.initializer}
    for name, value in constants.items():
        if name not in existing:
            graph.initializer.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
    rewritten = []
    for node in graph.node:
        if node.op_type != op:
            rewritten.append(node)
            continue
        rewritten.extend(_segment_nodes(node.name, op, node.input[0], node.output[0], prefix))
    del graph.node[:]
    graph.node.extend(rewritten)


def _segment_nodes(name: str, op: str, x: str, y: str, p: str) -> list[onnx.NodeProto]:
    t = f"{name}/pwl"
    make = helper.make_node
    return [
        make("Clip", [x, f"{p}.low", f"{p}.high"], [f"{t}.x"], name=f"{t}.clip"),
        make("Sub", [f"{t}.x", f"{p}.low"], [f"{t}.offset"], name=f"{t}.offset"),
        make("Mul", [f"{t}.offset", f"{p}.inv_step"], [f"{t}.position"], name=f"{t}.position"),
        make("Floor", [f"{t}.position"], [f"{t}.floor"], name=f"{t}.floor"),
        make("Min", [f"{t}.floor", f"{p}.last"], [f"{t}.segment"], name=f"{t}.segment"),  # x == high
        make("Mul", [f"{t}.segment", f"{p}.step"], [f"{t}.knot_offset"], name=f"{t}.knot_offset"),
        make("Add", [f"{t}.knot_offset", f"{p}.low"], [f"{t}.knot"], name=f"{t}.knot"),
        make("Add", [f"{t}.knot", f"{p}.step"], [f"{t}.next_knot"], name=f"{t}.next_knot"),
        make(op, [f"{t}.knot"], [f"{t}.left"], name=f"{t}.left"),
        make(op, [f"{t}.next_knot"], [f"{t}.right"], name=f"{t}.right"),
        make("Sub", [f"{t}.right", f"{t}.left"], [f"{t}.rise"], name=f"{t}.rise"),
        make("Sub", [f"{t}.position", f"{t}.segment"], [f"{t}.fraction"], name=f"{t}.fraction"),
        make("Mul", [f"{t}.fraction", f"{t}.rise"], [f"{t}.delta"], name=f"{t}.delta"),
        make("Add", [f"{t}.left", f"{t}.delta"], [y], name=name),
    ]


def run(model: ProgramModel, approximations: dict[str, dict[str, Any]],
        samples: list[dict[str, np.ndarray]]) -> list[list[np.ndarray]]:
    """Outputs of the chip's arithmetic on each sample."""
    return measure.run_all(measure.session(chip_graph(model, approximations)), samples)
