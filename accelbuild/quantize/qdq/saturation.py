"""Activation ranges that end where every reader of the tensor stops changing (``QdqConfig.saturation_ranges``).

A tensor read only by saturating activations needs no codes where all of them are flat:

- exact: HardSwish is 0 below -3; HardSigmoid is constant outside its ramp; Clip outside its bounds; Relu
  below 0. Narrowing the range there changes no result.
- within the output's rounding: Sigmoid and Tanh approach their limits, SiLU (``x * Sigmoid(x)``, the Mul
  reading both) approaches 0 from below. The range stops where the activation is within half a
  quantization step of its limit, on its own output's grid, so a clipped input changes the quantized output
  by at most that output's own rounding.

A tensor with any other reader, or that is a graph output, keeps its calibrated range. Real networks need
this: on photographs, YOLOv8n's convolutions before SiLU reach -23 to -105 while SiLU is flat below about -6,
so most of their 8-bit grids went to values that all come out as 0; cut, the model's output SQNR rises from
32.3 to 33.8 dB (bench/ptq.py's third fold).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import onnx

from accelbuild.quantize.calibration import QuantParams
from accelbuild.quantize.qdq.plan import Plan
from accelbuild.util import onnx_graph as g

INF = math.inf
SILU_MINIMUM_AT = -1.2784645  # x * sigmoid(x) falls to its minimum, -0.2784645, here and rises towards 0 below
SILU_MINIMUM = 0.2784645

Requantize = Callable[[float, float, int], QuantParams]  # (low, high, bits) -> params on the group's grid


def narrow(graph: onnx.GraphProto, plan: Plan, groups: Mapping[int, QuantParams], requantize: Requantize,
           skip: set[int]) -> tuple[dict[int, QuantParams], dict[int, tuple[float, float]]]:
    """``groups`` with every range cut to where its readers are not flat, and the limits applied per group."""
    consumers = g.consumers(graph)
    producers = g.producers(graph)
    outputs = g.graph_output_names(graph)
    narrowed, applied = dict(groups), {}
    for gid, group in plan.groups.items():
        params = groups[gid]
        if gid in skip or any(m in outputs for m in group.members):
            continue
        low, high = _group_limits(group.members, consumers, producers, plan, groups, graph)
        new_low = max(params.low, low) if low <= 0 else params.low
        new_high = min(params.high, high) if high >= 0 else params.high
        if (new_low, new_high) != (params.low, params.high):
            narrowed[gid] = requantize(new_low, new_high, params.bits)
            applied[gid] = (low, high)
    return narrowed, applied


def _group_limits(members: list[str], consumers: Mapping[str, list[onnx.NodeProto]],
                  producers: Mapping[str, onnx.NodeProto], plan: Plan, groups: Mapping[int, QuantParams],
                  graph: onnx.GraphProto) -> tuple[float, float]:
    """The widest interval outside which every reader of every member is flat ((-inf, inf): none is)."""
    member_set = set(members)
    low, high = INF, -INF
    for member in members:
        for reader in consumers.get(member, []):
            if reader.output and reader.output[0] in member_set:
                continue  # a pass-through within the group (Reshape, MaxPool): its readers count instead
            reader_low, reader_high = _flat_outside(reader, member, producers, plan, groups, graph)
            low, high = min(low, reader_low), max(high, reader_high)
    return low, high


def _flat_outside(node: onnx.NodeProto, tensor: str, producers: Mapping[str, onnx.NodeProto], plan: Plan,
                  groups: Mapping[int, QuantParams], graph: onnx.GraphProto) -> tuple[float, float]:
    op = node.op_type
    if op == "HardSwish":
        return -3.0, INF
    if op == "Relu":
        return 0.0, INF
    if op == "HardSigmoid":
        alpha = float(g.attribute(node, "alpha", 0.2))
        beta = float(g.attribute(node, "beta", 0.5))
        return ((-beta / alpha, (1 - beta) / alpha) if alpha > 0 else (-INF, INF))
    if op == "Clip":
        return _clip_bounds(graph, node)
    half_step = _half_output_step(node, plan, groups)
    if half_step is None:
        return -INF, INF
    if op == "Sigmoid" and half_step < 0.5:
        edge = math.log(half_step / (1 - half_step))
        return edge, -edge
    if op == "Tanh" and half_step < 1.0:
        edge = math.atanh(1 - half_step)
        return -edge, edge
    if op == "Mul" and _is_silu(node, tensor, producers):
        return _silu_floor(half_step), INF
    return -INF, INF


def _half_output_step(node: onnx.NodeProto, plan: Plan, groups: Mapping[int, QuantParams]) -> float | None:
    gid = plan.group_of.get(node.output[0]) if node.output else None
    return None if gid is None else groups[gid].scale / 2


def _is_silu(node: onnx.NodeProto, tensor: str, producers: Mapping[str, onnx.NodeProto]) -> bool:
    """``node`` is ``Mul(tensor, Sigmoid(tensor))`` (either order)."""
    if len(node.input) != 2 or tensor not in node.input:
        return False
    other = node.input[1] if node.input[0] == tensor else node.input[0]
    gate = producers.get(other)
    return gate is not None and gate.op_type == "Sigmoid" and gate.input[0] == tensor


def _silu_floor(half_step: float) -> float:
    """The x below which |x * sigmoid(x)| < half_step (bisection on the monotone tail left of the minimum)."""
    if half_step >= SILU_MINIMUM:
        return SILU_MINIMUM_AT
    lo, hi = -100.0, SILU_MINIMUM_AT  # |silu(-100)| ~ 4e-42
    if -lo / (1 + math.exp(-lo)) >= half_step:
        return -INF
    for _ in range(60):
        mid = (lo + hi) / 2
        if -mid / (1 + math.exp(-mid)) < half_step:
            lo = mid
        else:
            hi = mid
    return lo


def _clip_bounds(graph: onnx.GraphProto, node: onnx.NodeProto) -> tuple[float, float]:
    bounds = []
    for index, default in ((1, -INF), (2, INF)):
        name = node.input[index] if len(node.input) > index else ""
        value = g.constant(graph, name) if name else None
        if name and (value is None or value.size != 1):
            return -INF, INF  # a computed bound: not flat anywhere we know of
        bounds.append(default if value is None else float(value.reshape(-1)[0]))
    return bounds[0], bounds[1]
