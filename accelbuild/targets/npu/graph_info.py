"""What the npu modules need to know about an ONNX model (float or QDQ), computed once in linear time.

``GraphInfo.of(model)`` infers shapes and indexes the graph: producers, consumers, constants, and which
layer each QuantizeLinear / DequantizeLinear node belongs to (a weight's or bias's DequantizeLinear goes
with the layer reading it; an activation's Q/DQ pair with the layer producing the tensor; a graph
input's with its first reader), so that partitioning and scheduling see layers, not Q/DQ nodes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import TensorProto

from accelbuild.util import onnx_graph as g
from accelbuild.util.shape_inference import infer_shapes

QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
MATRIX_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
_BITS_OF_TYPE: dict[int, int] = {TensorProto.INT8: 8, TensorProto.UINT8: 8, TensorProto.INT16: 16, TensorProto.UINT16: 16,
                 TensorProto.INT4: 4, TensorProto.UINT4: 4}


@dataclass
class GraphInfo:
    """An indexed view of one model; build it with ``GraphInfo.of``. Do not mutate the model afterwards."""

    model: onnx.ModelProto
    nodes: list[onnx.NodeProto]                      # topological order
    shapes: dict[str, tuple[int, ...]]               # static shapes (symbolic dims read as 1)
    elem_types: dict[str, int]
    constants: set[str]                              # initializers and Constant outputs
    producer: dict[str, onnx.NodeProto]
    consumers: dict[str, list[onnx.NodeProto]]
    owner: dict[str, str]                            # node name -> the layer it belongs to (itself for layers)
    graph_inputs: list[str]
    graph_outputs: list[str]
    _index: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, model: onnx.ModelProto, infer: bool = True) -> GraphInfo:
        names = [node.name for node in model.graph.node]
        if not all(names) or len(set(names)) != len(names):  # ownership and records go by node name
            from accelbuild.passes.cleanup import name_nodes

            named = onnx.ModelProto()
            named.CopyFrom(model)
            name_nodes(named)
            model = named
        if infer:
            model = infer_shapes(model)
        graph = model.graph
        constants = {t.name for t in graph.initializer}
        for node in graph.node:
            if node.op_type == "Constant":
                constants.update(node.output)
        shapes: dict[str, tuple[int, ...]] = {}
        types: dict[str, int] = {}
        for value in [*graph.input, *graph.value_info, *graph.output]:
            tensor = value.type.tensor_type
            if tensor.elem_type:
                types[value.name] = tensor.elem_type
            if tensor.HasField("shape"):
                shapes[value.name] = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
                                           for d in tensor.shape.dim)
        for init in graph.initializer:
            shapes[init.name] = tuple(init.dims)
            types[init.name] = init.data_type
        nodes = _topological(graph)
        producer = {out: node for node in nodes for out in node.output if out}
        consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in nodes:
            for name in dict.fromkeys(g.node_reads(node)):  # what If/Loop branches read from outside counts
                consumers.setdefault(name, []).append(node)
        inputs = [v.name for v in graph.input if v.name not in constants]
        info = cls(model, nodes, shapes, types, constants, producer, consumers, {}, inputs,
                   [v.name for v in graph.output])
        info._index = {node.name: i for i, node in enumerate(nodes)}
        info.owner = _owners(info)
        return info

    # ------------------------------------------------------------------ layers
    def layers(self) -> list[onnx.NodeProto]:
        """The model's layers (every node but Q/DQ and Constant), in topological order."""
        return [n for n in self.nodes if n.op_type not in QDQ_OPS and n.op_type != "Constant"]

    def order(self, name: str) -> int:
        return self._index[name]

    def node(self, name: str) -> onnx.NodeProto:
        return self.nodes[self._index[name]]

    def shape(self, tensor: str) -> tuple[int, ...] | None:
        return self.shapes.get(tensor)

    def elements(self, tensor: str) -> int:
        shape = self.shapes.get(tensor)
        return math.prod(shape) if shape is not None else 0

    def is_constant(self, tensor: str) -> bool:
        """A constant, or a DequantizeLinear of one (a quantized weight)."""
        if tensor in self.constants:
            return True
        node = self.producer.get(tensor)
        return node is not None and node.op_type == "DequantizeLinear" and node.input[0] in self.constants

    def data_inputs(self, node: onnx.NodeProto) -> list[str]:
        """Inputs that are activations (not constants, not empty)."""
        return [name for name in node.input if name and not self.is_constant(name)]

    def weight_elements(self, node: onnx.NodeProto) -> int:
        """Elements of the constant inputs of a matrix layer (weights and bias)."""
        if node.op_type not in MATRIX_OPS:
            return 0
        return sum(self.elements(name) for name in node.input[1:] if name and self.is_constant(name))

    def macs(self, node: onnx.NodeProto) -> int:
        """Multiply-accumulates of one frame of a matrix layer (0 for other layers)."""
        op = node.op_type
        out = self.shapes.get(node.output[0])
        if op not in MATRIX_OPS or out is None:
            return 0
        weight = self.shapes.get(node.input[1]) if len(node.input) > 1 else None
        if op == "Conv" and weight is not None:
            return math.prod(out) * math.prod(weight[1:])
        if op == "ConvTranspose" and weight is not None:
            inp = self.shapes.get(node.input[0])
            return (math.prod(inp) if inp else 0) * math.prod(weight[1:])
        inp = self.shapes.get(node.input[0])
        if inp is None:
            return 0
        k = inp[-1]
        if op == "Gemm" and attribute(node, "transA", 0):
            k = inp[0]
        return math.prod(out) * k

    def weight_bits(self, node: onnx.NodeProto) -> int | None:
        """Bits of the layer's quantized weight (``None`` in a float model or for a float layer)."""
        if len(node.input) < 2 or not node.input[1]:
            return None
        dq = self.producer.get(node.input[1])
        if dq is None or dq.op_type != "DequantizeLinear":
            return None
        return _BITS_OF_TYPE.get(self.elem_types.get(dq.input[0], 0))

    def activation_bits(self, node: onnx.NodeProto) -> int | None:
        """Bits of the QuantizeLinear right after the layer's output (``None``: not quantized)."""
        for q in self.consumers.get(node.output[0], []):
            if q.op_type == "QuantizeLinear":
                zero_point = q.input[2] if len(q.input) > 2 else ""
                bits = _BITS_OF_TYPE.get(self.elem_types.get(zero_point, 0))
                return bits or 8
        return None

    def owned(self, layer: str) -> list[onnx.NodeProto]:
        """The nodes that belong to ``layer`` (itself, its Q/DQ and Constant nodes), in order."""
        cached = self.__dict__.get("_owned")
        if cached is None:
            cached = {}
            for node in self.nodes:
                owner = self.owner.get(node.name)
                if owner is not None:
                    cached.setdefault(owner, []).append(node)
            self.__dict__["_owned"] = cached
        return cached.get(layer, [])

    def output_layers(self) -> set[str]:
        """Layers that produce (directly or through their Q/DQ) a model output."""
        cached = self.__dict__.get("_output_layers")
        if cached is None:
            outputs = set(self.graph_outputs)
            cached = {self.owner[n.name] for n in self.nodes
                      if n.name in self.owner and any(out in outputs for out in n.output)}
            self.__dict__["_output_layers"] = cached
        return cached

    def layer_edges(self, names: Iterable[str] | None = None) -> dict[str, list[str]]:
        """Layer -> the layers reading its output (through Q/DQ nodes), sorted by order, no duplicates;
        only the sources in ``names`` when given."""
        cached = self.__dict__.get("_edges")
        if cached is None:
            cached = self.__dict__["_edges"] = self._all_edges()
        if names is None:
            return cached
        return {src: cached[src] for src in names if src in cached}

    def _all_edges(self) -> dict[str, list[str]]:
        edges: dict[str, set[str]] = {}
        for node in self.nodes:
            dst = self.owner.get(node.name)
            if dst is None:
                continue
            for name in g.node_reads(node):  # an If branch reading a layer's output depends on it too
                src_node = self.producer.get(name)
                if src_node is None:
                    continue
                src = self.owner.get(src_node.name)
                if src is not None and src != dst:
                    edges.setdefault(src, set()).add(dst)
        return {src: sorted(dsts, key=self.order) for src, dsts in edges.items()}


def attribute(node: onnx.NodeProto, name: str, default: Any) -> Any:
    """The value of ``node``'s attribute ``name`` (its type is the attribute's: ``Any``), or ``default``."""
    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


def _topological(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Kahn's algorithm, lowest original index first (an ordered graph keeps its order); O(n log n)."""
    producer_index: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        for out in node.output:
            producer_index[out] = i
    indegree = [0] * len(graph.node)
    readers: list[list[int]] = [[] for _ in graph.node]
    for i, node in enumerate(graph.node):
        for src in {producer_index[name] for name in g.node_reads(node) if name in producer_index}:
            indegree[i] += 1
            readers[src].append(i)
    ready = [i for i, d in enumerate(indegree) if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in readers[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(graph.node):
        raise ValueError("graph has a cycle")
    if order == sorted(order):
        return list(graph.node)
    return [graph.node[i] for i in order]


def _owners(info: GraphInfo) -> dict[str, str]:
    """Node name -> the layer it belongs to (layers own themselves; Constants go with their reader)."""
    owner: dict[str, str] = {}
    pending: list[onnx.NodeProto] = []
    for node in info.nodes:
        if node.op_type not in QDQ_OPS and node.op_type != "Constant":
            owner[node.name] = node.name
        else:
            pending.append(node)
    # backwards: a Q/DQ reading a layer's output (possibly through other Q/DQ) belongs to that layer
    for node in pending:
        src = info.producer.get(node.input[0]) if node.input else None
        if src is not None and src.name in owner:
            owner[node.name] = owner[src.name]
    # forwards, in reverse order: weights, biases, graph-input Q/DQ and Constants go with their first reader
    for node in reversed(pending):
        if node.name in owner:
            continue
        readers = [r for out in node.output for r in info.consumers.get(out, [])]
        readers.sort(key=lambda r: info._index[r.name])
        for reader in readers:
            if reader.name in owner:
                owner[node.name] = owner[reader.name]
                break
    return owner
