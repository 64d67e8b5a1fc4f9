"""Split a model between the NPU and the host: ``assign_units``, then ``partition`` into standalone subgraphs.

    units = assign_units(float_model, hw, offload)      # {layer: "npu" | "arm" | "dsp"}
    part = partition(qdq_model, hw, offload)             # or partition(qdq_model, hw, offload, units=units)
    part.record("det", files={0: "det_sg0.onnx", ...})  # partition.json's content

Rules, in order: a layer the NPU supports (``support.is_supported``) goes to the NPU unless its op type is in
``deny_ops`` or its name in ``deny_layers``; the rest go to ``offload.host``. Layers are then ordered so
that each unit's layers stay together where the graph allows (fewest runs), and an NPU run whose crossings
cost more than running it on the host saves (the cost model's estimates: ``schedule.npu_seconds``,
``schedule.host_seconds``, ``hw.crossing``) moves to the host. Each run is a subgraph; a run of consecutive
layers in a topological order is convex, so each is a standalone ONNX model and running them in sequence
computes the whole model. Q/DQ nodes go with the layer they belong to (``graph_info``).
"""

from __future__ import annotations

import heapq
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np
import onnx
from onnx import helper

from accelbuild.errors import StageError, UserError
from accelbuild.targets.npu.graph_info import GraphInfo
from accelbuild.targets.npu.hardware import HostKind, NpuHardware
from accelbuild.targets.npu.schedule import host_seconds, npu_seconds
from accelbuild.targets.npu.support import is_supported
from accelbuild.util import onnx_graph as g

log = logging.getLogger(__name__)
T = TypeVar("T")  # a subgraph as run_sequence takes it: a model, or a step that makes its session

Unit = Literal["npu", "arm", "dsp"]
_FLOAT_BYTES = 4  # what crosses to the host is converted to float there


@dataclass(frozen=True)
class Offload:
    """``target.offload``: where what the NPU cannot run goes (docs/npu.md)."""

    host: Literal["arm", "dsp"] = "arm"
    deny_ops: frozenset[str] = frozenset()
    deny_layers: frozenset[str] = frozenset()
    max_subgraphs: int = 16
    fail_on_fallback: bool = False

    def __post_init__(self) -> None:
        if self.host not in ("arm", "dsp"):
            raise ValueError(f"offload.host must be arm or dsp, not {self.host!r}")
        if self.max_subgraphs < 1:
            raise ValueError(f"offload.max_subgraphs must be at least 1, not {self.max_subgraphs}")
        object.__setattr__(self, "deny_ops", frozenset(self.deny_ops))
        object.__setattr__(self, "deny_layers", frozenset(self.deny_layers))


class NoDspError(UserError):
    """``offload.host: dsp`` on a platform whose profile has no DSP (exit 2)."""

    def __init__(self, platform: str) -> None:
        super().__init__(f"offload.host: dsp, but platform {platform} has no DSP that runs layers "
                         "(use host: arm, or a profile with host.dsp)")


class FallbackError(StageError):
    """``fail_on_fallback`` and some layers were left to the host (exit 1); lists them with the reasons."""

    def __init__(self, reasons: Mapping[str, str]) -> None:
        self.reasons = dict(reasons)
        lines = "".join(f"\n  {name}: {reason}" for name, reason in self.reasons.items())
        super().__init__(f"offload.fail_on_fallback: {len(self.reasons)} layer(s) would run on the host:{lines}")


class TooManySubgraphsError(StageError):
    """More NPU subgraphs than allowed (exit 1); names the host layers that split the NPU part and their
    operators (``ops``: layer name -> op type)."""

    def __init__(self, count: int, limit: int, splitters: list[list[str]], ops: Mapping[str, str] | None = None) -> None:
        self.count, self.limit, self.splitters = count, limit, splitters
        ops = ops or {}
        tally = Counter(ops[name] for run in splitters for name in run if name in ops)
        by_op = f" ({', '.join(f'{op} x{n}' for op, n in tally.most_common())})" if tally else ""
        shown = "".join(f"\n  {', '.join(_named(name, ops) for name in run[:4])}{' ...' if len(run) > 4 else ''}"
                        for run in splitters[:20])
        super().__init__(f"the model splits into {count} NPU subgraphs, more than max_subgraphs {limit}; "
                         f"the host layers between them{by_op} (deny or crop them, or raise the limit):{shown}")


def _named(name: str, ops: Mapping[str, str]) -> str:
    return f"{name} ({ops[name]})" if name in ops else name


@dataclass
class Subgraph:
    """One run of layers on one unit, as a standalone ONNX model."""

    id: int
    unit: Unit
    nodes: list[str]      # its layers (Q/DQ nodes not listed), in order
    inputs: list[str]
    outputs: list[str]
    model: onnx.ModelProto = field(repr=False)

    def record(self, model_name: str, file: str | None) -> dict[str, Any]:
        return {"id": self.id, "unit": self.unit, "model": model_name, "nodes": list(self.nodes),
                "inputs": list(self.inputs), "outputs": list(self.outputs), "file": file}


@dataclass
class Partition:
    subgraphs: list[Subgraph]
    units: dict[str, Unit]            # every layer's unit
    reasons: dict[str, str]           # host layers: why (unsupported reason, denied, or merged)
    op_types: dict[str, str]          # layer -> op type

    @property
    def npu_subgraphs(self) -> list[Subgraph]:
        return [s for s in self.subgraphs if s.unit == "npu"]

    @property
    def host_layers(self) -> list[str]:
        return [name for name, unit in self.units.items() if unit != "npu"]

    @property
    def npu_layers(self) -> list[str]:
        return [name for name, unit in self.units.items() if unit == "npu"]

    def host_ops(self) -> dict[str, int]:
        return dict(sorted(Counter(self.op_types[name] for name in self.host_layers).items()))

    def record(self, model_name: str, files: Mapping[int, str] | None = None) -> dict[str, Any]:
        """partition.json's content: ``{"subgraphs": [{"id", "unit", "model", "nodes", "inputs", "outputs",
        "file"}], "npu_layers", "host_layers", "host_ops"}``; the layer figures are counts, ``file`` is what
        the caller names each subgraph's file (``None`` when not given)."""
        files = files or {}
        return {"subgraphs": [s.record(model_name, files.get(s.id)) for s in self.subgraphs],
                "npu_layers": len(self.npu_layers), "host_layers": len(self.host_layers),
                "host_ops": self.host_ops()}


def assign_units(model: onnx.ModelProto | GraphInfo, hw: NpuHardware, offload: Offload = Offload(), *,
                 default_bits: int = 8) -> dict[str, Unit]:
    """Every layer's unit (``"npu"``, or ``offload.host``), after moving unprofitable NPU islands to the host."""
    info = model if isinstance(model, GraphInfo) else GraphInfo.of(model)
    units, _ = _assign(info, hw, offload, default_bits)
    return units


def partition(model: onnx.ModelProto, hw: NpuHardware, offload: Offload = Offload(), *,
              units: Mapping[str, str] | None = None, default_bits: int = 8) -> Partition:
    """Subgraphs of ``model`` (float or QDQ). ``units`` (e.g. ``assign_units`` of the float model the QDQ
    model was made from) fixes each layer's unit; without it they are assigned here.

    Raises ``NoDspError``, ``FallbackError`` (fail_on_fallback), ``TooManySubgraphsError``.
    """
    info = GraphInfo.of(model)
    if units is None:
        assigned, reasons = _assign(info, hw, offload, default_bits)
    else:
        assigned, reasons = _given(info, units, offload)
    if offload.fail_on_fallback and reasons:
        raise FallbackError(reasons)
    runs = _runs(info, assigned)
    limit = min(offload.max_subgraphs, hw.max_subgraphs)
    npu_runs = [run for run in runs if assigned[run[0]] == "npu"]
    if len(npu_runs) > limit:
        splitters = [run for i, run in enumerate(runs) if assigned[run[0]] != "npu" and 0 < i < len(runs) - 1]
        raise TooManySubgraphsError(len(npu_runs), limit, splitters, {n.name: n.op_type for n in info.layers()})
    subgraphs = [_subgraph(info, i, assigned[run[0]], run) for i, run in enumerate(runs)]
    log.debug("partition: %d subgraphs (%d on the NPU), %d host layers", len(subgraphs), len(npu_runs), len(reasons))
    return Partition(subgraphs, {n.name: assigned[n.name] for n in info.layers()}, reasons,
                     {n.name: n.op_type for n in info.layers()})


# ----------------------------------------------------------------------------------------- assignment
def _host_unit(hw: NpuHardware, offload: Offload) -> HostKind:
    if offload.host == "dsp" and not hw.has_dsp:
        raise NoDspError(hw.name)
    return offload.host


def _given(info: GraphInfo, units: Mapping[str, str], offload: Offload) -> tuple[dict[str, Unit], dict[str, str]]:
    assigned: dict[str, Unit] = {}
    reasons: dict[str, str] = {}
    for node in info.layers():
        unit = units.get(node.name, "npu")
        if unit not in ("npu", "arm", "dsp"):
            raise ValueError(f"layer {node.name}: unit must be npu, arm or dsp, not {unit!r}")
        assigned[node.name] = unit  # type: ignore[assignment]
        if unit != "npu":
            reasons[node.name] = "assigned to the host"
    return assigned, reasons


def _assign(info: GraphInfo, hw: NpuHardware, offload: Offload,
            default_bits: int) -> tuple[dict[str, Unit], dict[str, str]]:
    host = _host_unit(hw, offload)
    units: dict[str, Unit] = {}
    reasons: dict[str, str] = {}
    for node in info.layers():
        if node.name in offload.deny_layers:
            reasons[node.name] = "offload.deny_layers names it"
        elif node.op_type in offload.deny_ops:
            reasons[node.name] = f"offload.deny_ops names {node.op_type}"
        else:
            ok, reason = is_supported(node, info, hw)
            if not ok:
                reasons[node.name] = reason
        units[node.name] = host if node.name in reasons else "npu"
    for _ in range(4):  # moving an island can make a neighbouring one unprofitable; a few rounds settle it
        moved = _merge_islands(info, hw, units, host, default_bits)
        if not moved:
            break
        for name in moved:
            reasons[name] = "merged into the host: its crossings cost more than the NPU saves"
    return units, dict(sorted(reasons.items(), key=lambda item: info.order(item[0])))


def _merge_islands(info: GraphInfo, hw: NpuHardware, units: dict[str, Unit], host: HostKind,
                   default_bits: int) -> list[str]:
    processor = hw.host(host)
    moved: list[str] = []
    for run in _runs(info, units):
        if units[run[0]] != "npu":
            continue
        crossing = sum(hw.crossing.seconds([n * _FLOAT_BYTES for n in side]) for side in _boundary_elements(info, run))
        on_npu = npu_seconds(info, run, hw, default_bits=default_bits) + crossing
        on_host = host_seconds(info, run, processor)
        if on_host < on_npu:
            log.debug("partition: NPU island %s.. (%d layers) to the host: %.1f us there, %.1f us with crossings",
                      run[0], len(run), on_host * 1e6, on_npu * 1e6)
            for name in run:
                units[name] = host
            moved.extend(run)
    return moved


def _boundary_elements(info: GraphInfo, run: list[str]) -> tuple[list[int], list[int]]:
    """Elements of each tensor crossing into the run, and of each crossing out of it (model inputs and outputs
    included): its two hand-overs."""
    inside = set(run)
    _, inputs, outputs = _closure(info, inside)
    return [info.elements(t) for t in inputs], [info.elements(t) for t in outputs]


# ------------------------------------------------------------------------------------------- runs
def _runs(info: GraphInfo, units: Mapping[str, str]) -> list[list[str]]:
    """Layers in a topological order that keeps each unit's layers together, cut where the unit changes.

    Kahn's algorithm with one ready queue per unit: keep taking the current unit's ready layers (lowest
    position first) and switch only when it has none, so the order has as few unit changes as it can greedily.
    """
    layers = info.layers()
    position = {node.name: i for i, node in enumerate(layers)}
    edges = info.layer_edges()
    indegree = dict.fromkeys(position, 0)
    for dsts in edges.values():
        for dst in dsts:
            indegree[dst] += 1
    ready: dict[str, list[int]] = {}
    for name, degree in indegree.items():
        if degree == 0:
            heapq.heappush(ready.setdefault(units[name], []), position[name])
    runs: list[list[str]] = []
    current: str | None = None
    while any(ready.values()):
        if current is None or not ready.get(current):
            current = min((queue[0], unit) for unit, queue in ready.items() if queue)[1]
            runs.append([])
        name = layers[heapq.heappop(ready[current])].name
        runs[-1].append(name)
        for dst in edges.get(name, []):
            indegree[dst] -= 1
            if indegree[dst] == 0:
                heapq.heappush(ready.setdefault(units[dst], []), position[dst])
    return runs


# --------------------------------------------------------------------------------------- subgraphs
def _closure(info: GraphInfo, layers: set[str]) -> tuple[list[onnx.NodeProto], list[str], list[str]]:
    """The run's nodes (its layers and the Q/DQ and Constant nodes they own), its inputs and outputs."""
    nodes = sorted((n for layer in layers for n in info.owned(layer)), key=lambda n: info.order(n.name))
    produced = {out for n in nodes for out in n.output if out}
    inputs: list[str] = []
    seen: set[str] = set()
    for node in nodes:
        for name in g.node_reads(node):  # an If branch's outer values are inputs of the subgraph too
            if name and name not in produced and name not in info.constants and name not in seen:
                seen.add(name)
                inputs.append(name)
    graph_outputs = set(info.graph_outputs)
    outputs = []
    for node in nodes:
        for out in node.output:
            if out and (out in graph_outputs or any(info.owner.get(r.name) not in layers
                                                     for r in info.consumers.get(out, []))):
                outputs.append(out)
    return nodes, inputs, outputs


def _subgraph(info: GraphInfo, index: int, unit: Unit, run: list[str]) -> Subgraph:
    nodes, inputs, outputs = _closure(info, set(run))
    graph = info.model.graph
    used = {name for node in nodes for name in g.node_reads(node)}
    initializers = [t for t in graph.initializer if t.name in used]
    values = {v.name: v for v in [*graph.input, *graph.value_info, *graph.output]}

    def value(name: str) -> onnx.ValueInfoProto:
        if name in values:
            return values[name]
        return helper.make_tensor_value_info(name, info.elem_types.get(name, onnx.TensorProto.FLOAT),
                                             list(info.shapes[name]) if name in info.shapes else None)

    sub = helper.make_graph(nodes, f"{graph.name or 'model'}_sg{index}", [value(n) for n in inputs],
                            [value(n) for n in outputs], initializers)
    model = helper.make_model(sub, opset_imports=list(info.model.opset_import), ir_version=info.model.ir_version,
                              producer_name="accelbuild")
    return Subgraph(index, unit, list(run), inputs, outputs, model)


# ----------------------------------------------------------------------------------------- checking
def run_sequence(models: Sequence[T], feeds: Iterable[Mapping[str, np.ndarray]],
                 outputs: Sequence[str], session: Callable[[T], Any]) -> list[list[np.ndarray]]:
    """Each sample through the subgraph ``models`` in order (each reads the inputs and what earlier ones
    produced), in sessions made by ``session`` of each; ``outputs`` per sample."""
    sessions = [session(model) for model in models]
    results = []
    for feed in feeds:
        values: dict[str, np.ndarray] = dict(feed)
        for sess in sessions:
            names = [o.name for o in sess.get_outputs()]
            values.update(zip(names, sess.run(names, {i.name: values[i.name] for i in sess.get_inputs()})))
        results.append([values[name] for name in outputs])
    return results


def composition_error(original: onnx.ModelProto, part: Partition, feeds: Iterable[Mapping[str, np.ndarray]]) -> float:
    """Max absolute difference between the whole model and its subgraphs run in sequence (onnxruntime,
    graph optimisations off in both, so the two compute the same arithmetic)."""
    import onnxruntime as ort

    def session(model: onnx.ModelProto) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    feeds = [dict(feed) for feed in feeds]
    names = [o.name for o in original.graph.output]
    expected = run_sequence([original], feeds, names, session)
    got = run_sequence([s.model for s in part.subgraphs], feeds, names, session)
    worst = 0.0
    for want_sample, got_sample in zip(expected, got):
        for want, have in zip(want_sample, got_sample):
            if have.shape != want.shape:
                return float("inf")
            if want.size:
                worst = max(worst, float(np.max(np.abs(have.astype(np.float64) - want.astype(np.float64)))))
    return worst
