"""Decide what a QDQ model quantizes: which nodes run as integer operators, which activation tensors get
a QuantizeLinear/DequantizeLinear pair, which of them share one quantization, and which constants and
weights become integers. No numbers yet: the plan is applied after calibration (``graph.py``).

Data tensors are the float tensors computed from the model's inputs, of any type (an embedding looked up
by token ids, bytes cast to float), but not through Shape or Size: shape arithmetic (Shape -> Cast -> Mul
...) is therefore never quantized. A node is quantized when its
operator is in ``rules.DATA_INPUTS``, it is not listed to stay float, and one of its data positions
reads a data tensor. A tensor gets QDQ when a quantized node reads it at a data position or a quantized
node produces it, except the output of a layer fused with its activation or its bias Add.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx

from accelbuild.quantize.qdq import rules
from accelbuild.quantize.weights import WeightedLayer, weighted_layers
from accelbuild.util import onnx_graph as g

FLOAT = onnx.TensorProto.FLOAT


@dataclass
class Group:
    """Tensors that share one scale and zero point; ``sources`` are the ones whose values are measured
    (outputs of pass-through operators and of shared Concats repeat values already measured)."""

    id: int
    members: list[str]
    sources: list[str]
    constants: list[str] = field(default_factory=list)  # initializers quantized with this group's params
    layers: set[str] = field(default_factory=set)       # node names whose per-layer bits apply
    bounded: bool = False                               # only bounded activations: observed range, no clip
    fixed: str | None = None                            # the bounded op producing every source (TFLite params)


@dataclass(frozen=True)
class WeightPlan:
    layer: WeightedLayer
    activation: str            # the quantized input whose scale times the weight scale is the bias scale
    bias: str | None           # float bias initializer turned into int32, if any
    bias_node: str = ""        # the node reading the bias: the layer itself, or a MatMul's Add
    bias_index: int = 2
    can_add_bias: bool = False  # no bias yet, but the layer takes one (bias correction may add it)


@dataclass(frozen=True)
class ConstantPlan:
    node: str
    index: int                 # input position
    tensor: str                # initializer name
    group: int | None          # a shared Concat's group, else quantized on its own


@dataclass
class Plan:
    quantized_nodes: list[str]
    groups: dict[int, Group]
    group_of: dict[str, int]   # every QDQ tensor -> its group
    fused: dict[str, str]      # accumulator tensors without QDQ -> the bias Add or activation applied to them
    weights: list[WeightPlan]
    constants: list[ConstantPlan]
    graph_inputs: set[str]
    layer_norms: list[list[str]] = field(default_factory=list)  # decomposed LayerNorms, left float

    def sources(self) -> list[str]:
        """The tensors whose values calibration measures."""
        return sorted({s for group in self.groups.values() for s in group.sources})


def make_plan(model: onnx.ModelProto, float_nodes: Collection[str] = (),
              share_concat_scales: bool = False, conventions: str = "onnx") -> Plan:
    """The plan for a shape-inferred model (see the module docstring)."""
    graph = model.graph
    order = g.topological_order(graph)
    types = _elem_types(model)
    consumers = g.consumers(graph)
    outputs = g.graph_output_names(graph)
    inputs = {v.name for v in g.real_inputs(graph) if types.get(v.name) == FLOAT}
    data = _data_tensors(order, types, {v.name for v in g.real_inputs(graph)})
    norms = rules.layer_norms(graph)
    floating = set(float_nodes) | {name for norm in norms for name in norm}
    floating |= _reading_non_finite_constants(graph, order)
    quantized = [n for n in order if n.name not in floating
                 and any(n.input[i] in data for i in rules.data_positions(n))]
    quantized_names = {n.name for n in quantized}
    layers = {layer.name: layer for layer in weighted_layers(model)}
    fused, biases = _fused_outputs(graph, quantized, quantized_names, consumers, outputs, layers)

    qdq: list[str] = []
    for node in quantized:
        qdq += [node.input[i] for i in rules.data_positions(node) if node.input[i] in data]
        qdq += [o for o in node.output if o in data]
    qdq = [t for t in dict.fromkeys(qdq) if t not in fused]
    groups, group_of = _groups(qdq, *_shared(graph, quantized, qdq, share_concat_scales, conventions))
    _assign_layers(graph, groups, group_of, fused)
    skip = {(node, index) for node, index, _ in biases.values()}
    constants = _constants(graph, quantized, data, group_of, share_concat_scales, groups, skip)
    _mark_bounded(graph, groups)
    weights = _weights(model, layers, quantized_names, group_of, biases)
    return Plan([n.name for n in quantized], groups, group_of, fused, weights, constants, inputs & set(qdq), norms)


def _reading_non_finite_constants(graph: onnx.GraphProto, order: list[onnx.NodeProto]) -> set[str]:
    """Nodes with a constant operand holding infinities or NaN (a -inf attention mask, say): no integer grid
    holds them, so these nodes stay float and the target places or refuses them by name."""
    found = set()
    for node in order:
        for index in rules.data_positions(node):
            value = g.constant(graph, node.input[index]) if index < len(node.input) and node.input[index] else None
            if value is not None and value.dtype.kind == "f" and not np.all(np.isfinite(value)):
                found.add(node.name)
    return found


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    graph = model.graph
    types = {t.name: t.data_type for t in graph.initializer}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.tensor_type.elem_type:
            types.setdefault(value.name, value.type.tensor_type.elem_type)
    return types


SHAPE_OPS = frozenset({"Shape", "Size"})  # their outputs describe a tensor, not its values


def _data_tensors(order: list[onnx.NodeProto], types: dict[str, int], inputs: set[str]) -> set[str]:
    """The float tensors whose values come from the model's inputs (see the module docstring)."""
    derived = set(inputs)
    for node in order:
        if node.op_type not in SHAPE_OPS and any(i in derived for i in node.input):
            derived.update(o for o in node.output if o)
    return {t for t in derived if types.get(t) == FLOAT}


def _fused_outputs(graph: onnx.GraphProto, quantized: list[onnx.NodeProto], names: set[str],
                   consumers: dict[str, list[onnx.NodeProto]], outputs: set[str],
                   layers: dict[str, WeightedLayer]) -> tuple[dict[str, str], dict[str, tuple[str, int, str]]]:
    """Tensors that get no QDQ: a MatMul's output read only by its bias Add, and the output of a fusing
    layer (or of a MatMul's bias Add) read only by a fusible activation. Also returns the MatMul biases:
    layer name -> (Add node, input position, initializer)."""
    fused: dict[str, str] = {}
    biases: dict[str, tuple[str, int, str]] = {}

    def sole_reader(tensor: str) -> onnx.NodeProto | None:
        readers = consumers.get(tensor, [])
        ok = len(readers) == 1 and readers[0].name in names and tensor not in outputs
        return readers[0] if ok else None

    for node in quantized:
        if node.op_type not in rules.FUSING or not node.output:
            continue
        tensor = node.output[0]
        layer = layers.get(node.name)
        reader = sole_reader(tensor)
        if node.op_type == "MatMul" and layer is not None and reader is not None and len(layer.shape) == 2 \
                and g.rank(graph, node.input[0]) == 2:
            index = rules.bias_add(graph, reader, tensor, layer.shape[layer.axis])
            if index is not None:
                fused[tensor] = reader.name
                biases[node.name] = (reader.name, index, reader.input[index])
                tensor, reader = reader.output[0], sole_reader(reader.output[0])
        if reader is not None and rules.fusible_activation(graph, reader) and reader.input[0] == tensor:
            fused[tensor] = reader.name
    return fused, biases


def _linked_tensors(graph: onnx.GraphProto, node: onnx.NodeProto, share_concat: bool,
                    conventions: str = "onnx") -> list[str]:
    """Tensors of ``node`` that must share one quantization: input first, then outputs."""
    if rules.passes_scale_through(graph, node, conventions):
        return [node.input[0], *[o for o in node.output if o]]
    if share_concat and node.op_type == "Concat":
        return [*[i for i in node.input if i], node.output[0]]
    return []


def _shared(graph: onnx.GraphProto, quantized: list[onnx.NodeProto], qdq: list[str],
            share_concat: bool, conventions: str = "onnx") -> tuple[dict[str, str], set[str]]:
    """Union-find parents of the QDQ tensors that share quantization, and the derived tensors (outputs
    whose values their inputs already hold)."""
    parent = {t: t for t in qdq}
    derived: set[str] = set()
    for node in quantized:
        linked = [t for t in _linked_tensors(graph, node, share_concat, conventions) if t in parent]
        for t in linked[1:]:
            _union(parent, linked[0], t)
        if len(linked) > 1:
            derived.update(o for o in node.output if o in parent)
    return parent, derived


def _union(parent: dict[str, str], a: str, b: str) -> None:
    ra, rb = _find(parent, a), _find(parent, b)
    if ra != rb:
        parent[max(ra, rb)] = min(ra, rb)  # deterministic roots


def _find(parent: dict[str, str], t: str) -> str:
    while parent[t] != t:
        parent[t] = parent[parent[t]]
        t = parent[t]
    return t


def _groups(qdq: list[str], parent: dict[str, str], derived: set[str]) -> tuple[dict[int, Group], dict[str, int]]:
    ids: dict[str, int] = {}
    groups: dict[int, Group] = {}
    group_of = {}
    for t in qdq:  # topological order: group ids follow the graph
        root = _find(parent, t)
        if root not in ids:
            ids[root] = len(ids)
            groups[ids[root]] = Group(ids[root], [], [])
        group = groups[ids[root]]
        group.members.append(t)
        group_of[t] = group.id
        if t not in derived:
            group.sources.append(t)
    for group in groups.values():
        if not group.sources:  # only possible in a cycle of pass-throughs, which ONNX forbids
            group.sources = list(group.members[:1])
    return groups, group_of


def _assign_layers(graph: onnx.GraphProto, groups: dict[int, Group], group_of: dict[str, int],
                   fused: dict[str, str]) -> None:
    """Per-layer bits name the node producing a tensor (a graph input: the input's own name); a fused
    activation's output also answers to the weighted layer before it."""
    producers = g.producers(graph)
    layer_of: dict[str, str] = {}  # bias Add or activation -> the weighted layer it is fused into
    for tensor, reader in fused.items():  # in graph order: a chain MatMul -> Add -> Relu resolves
        source = producers[tensor].name
        layer_of[reader] = layer_of.get(source, source)
    for t, gid in group_of.items():
        producer = producers.get(t)
        if producer is None:
            groups[gid].layers.add(t)
            continue
        groups[gid].layers.add(producer.name)
        if producer.name in layer_of:
            groups[gid].layers.add(layer_of[producer.name])


def _mark_bounded(graph: onnx.GraphProto, groups: dict[int, Group]) -> None:
    """Groups whose measured tensors are all outputs of bounded activations."""
    producers = g.producers(graph)
    for group in groups.values():
        group.bounded = not group.constants and all(
            t in producers and producers[t].op_type in rules.BOUNDED for t in group.sources)
        ops = {producers[t].op_type for t in group.sources if t in producers}
        if group.bounded and len(ops) == 1 and next(iter(ops)) in rules.TFLITE_FIXED:
            group.fixed = next(iter(ops))


def _constants(graph: onnx.GraphProto, quantized: list[onnx.NodeProto], data: set[str],
               group_of: dict[str, int], share_concat: bool, groups: dict[int, Group],
               skip: set[tuple[str, int]]) -> list[ConstantPlan]:
    inits = g.initializers(graph)
    found = []
    for node in quantized:
        if node.op_type not in rules.CONSTANT_OPERANDS:
            continue
        for i in rules.data_positions(node):
            if (node.name, i) in skip:
                continue
            tensor = inits.get(node.input[i])
            if tensor is None or tensor.data_type != FLOAT or node.input[i] in data:
                continue
            shared = share_concat and node.op_type == "Concat" and node.output[0] in group_of
            gid = group_of[node.output[0]] if shared else None
            if gid is not None:
                groups[gid].constants.append(tensor.name)
            found.append(ConstantPlan(node.name, i, tensor.name, gid))
    return found


def _weights(model: onnx.ModelProto, layers: dict[str, WeightedLayer], quantized: set[str],
             group_of: Mapping[str, int], biases: dict[str, tuple[str, int, str]]) -> list[WeightPlan]:
    graph = model.graph
    nodes = {n.name: n for n in graph.node}
    plans = []
    for layer in layers.values():
        node = nodes[layer.name]
        if layer.name not in quantized or node.input[0] not in group_of:
            continue
        if layer.name in biases:
            add, index, tensor = biases[layer.name]
            plans.append(WeightPlan(layer, node.input[0], tensor, add, index))
        else:
            bias = _bias(graph, node, layer)
            free = len(node.input) < 3 or not node.input[2]
            can_add = bias is None and free and (node.op_type == "Conv" or node.op_type == "Gemm" and float(
                g.attribute(node, "alpha", 1.0)) == 1.0)
            plans.append(WeightPlan(layer, node.input[0], bias, layer.name, 2, can_add))
    return plans


def _bias(graph: onnx.GraphProto, node: onnx.NodeProto, layer: WeightedLayer) -> str | None:
    """The bias initializer when it adds one value per output channel to the accumulator."""
    if node.op_type not in ("Conv", "ConvTranspose", "Gemm") or len(node.input) < 3 or not node.input[2]:
        return None
    tensor = g.initializers(graph).get(node.input[2])
    if tensor is None or tensor.data_type != FLOAT or list(tensor.dims) != [layer.shape[layer.axis]]:
        return None
    if node.op_type == "ConvTranspose" and int(g.attribute(node, "group", 1)) != 1:
        return None  # per-channel weight scales cover M/group channels, the bias all M
    if node.op_type == "Gemm" and (float(g.attribute(node, "alpha", 1.0)) != 1.0
                                   or float(g.attribute(node, "beta", 1.0)) != 1.0):
        return None
    return tensor.name
