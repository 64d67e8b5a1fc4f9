"""Read a QDQ ONNX model (as ``accelbuild.quantize.qdq`` writes it) as an integer graph.

Every ``QuantizeLinear -> DequantizeLinear`` pair on an activation becomes one quantized tensor: the
float tensor entering the QuantizeLinear (a layer's ``t/float`` output, or a graph input) is its key, and
the pair's outputs are aliases of it. A ``DequantizeLinear`` of an initializer is an integer constant
(weights per channel, int32 biases, per-tensor constant operands). What is left are the compute nodes,
in graph order; an output of a compute node that no QuantizeLinear reads is an accumulator fused into
its reader (a bias Add, Relu or Clip), as ``rules.FUSING`` describes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from accelbuild.data.random import observed_shapes
from accelbuild.util import onnx_graph as g
from accelbuild.util.shape_inference import infer_shapes


@dataclass(frozen=True)
class QTensor:
    key: str                   # the float tensor entering the QuantizeLinear
    name: str                  # the name users know it by (the DequantizeLinear's output)
    shape: tuple[int, ...]     # ONNX shape
    scale: float
    zero_point: int
    bits: int                  # 8 or 16
    signed: bool = True

    @property
    def dtype(self) -> str:
        return f"int{self.bits}"


@dataclass(frozen=True)
class QConst:
    codes: np.ndarray          # int8 / int16 / int32
    scales: np.ndarray         # float32, one or one per channel
    zero_points: np.ndarray
    axis: int


@dataclass
class QGraph:
    model: onnx.ModelProto     # shape-inferred
    tensors: dict[str, QTensor]                       # by key
    alias: dict[str, str]                             # any ONNX name of a quantized tensor -> key
    consts: dict[str, QConst]                         # DequantizeLinear output -> integer constant
    nodes: list[onnx.NodeProto]                       # compute nodes, graph order
    readers: dict[str, list[onnx.NodeProto]] = field(default_factory=dict)  # among compute nodes
    inputs: list[str] = field(default_factory=list)   # keys
    outputs: list[str] = field(default_factory=list)  # keys
    unquantized_io: list[str] = field(default_factory=list)

    def key(self, name: str) -> str | None:
        return self.alias.get(name)

    def constant(self, name: str) -> np.ndarray | None:
        """A plain initializer (shapes, axes, bounds)."""
        return g.constant(self.model.graph, name)

    def shape(self, name: str) -> tuple[int, ...]:
        shape = g.static_shape(self.model, name)
        if shape is None:
            raise ValueError(f"tensor {name!r} has no static shape")
        return tuple(int(d) for d in shape)


def read_qdq(model: onnx.ModelProto) -> QGraph:
    model = _with_static_shapes(infer_shapes(_constants_as_initializers(model)))
    graph = model.graph
    producers = g.producers(graph)
    inits = g.initializers(graph)
    tensors: dict[str, QTensor] = {}
    alias: dict[str, str] = {}
    consts: dict[str, QConst] = {}
    nodes = []
    for node in graph.node:
        if node.op_type == "QuantizeLinear" and node.input[0] not in inits:
            scale, zero = _params(graph, node)
            key = node.input[0]
            if key in alias:  # a second pair on the same float tensor: not something qdq writes
                nodes.append(node)
                continue
            alias[key] = alias[node.output[0]] = key
            tensors[key] = QTensor(key, key, (), float(scale.reshape(-1)[0]), int(zero.reshape(-1)[0]),
                                   8 * zero.dtype.itemsize, zero.dtype.kind == "i")
        elif node.op_type == "DequantizeLinear" and node.input[0] in inits:
            scale, zero = _params(graph, node)
            codes = numpy_helper.to_array(inits[node.input[0]])
            consts[node.output[0]] = QConst(codes, scale.astype(np.float32), zero.astype(np.int64),
                                            int(g.attribute(node, "axis", 1)))
        elif node.op_type == "DequantizeLinear" and node.input[0] in alias and \
                producers.get(node.input[0]) is not None and producers[node.input[0]].op_type == "QuantizeLinear":
            key = alias[node.input[0]]
            alias[node.output[0]] = key
            if tensors[key].name == key:  # the first DequantizeLinear names it
                tensors[key] = _renamed(tensors[key], node.output[0])
        else:
            nodes.append(node)
    qg = QGraph(model, tensors, alias, consts, nodes)
    for key, t in list(tensors.items()):
        qg.tensors[key] = QTensor(key, t.name, qg.shape(key), t.scale, t.zero_point, t.bits, t.signed)
    for node in nodes:
        for name in node.input:
            qg.readers.setdefault(name, []).append(node)
    for value in g.real_inputs(graph):
        (qg.inputs if value.name in alias else qg.unquantized_io).append(alias.get(value.name, value.name))
    for value in graph.output:
        (qg.outputs if value.name in alias else qg.unquantized_io).append(alias.get(value.name, value.name))
    return qg


def _with_static_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every main-graph tensor's shape static: where onnx's inference leaves a dimension
    symbolic or a tensor unshaped (an LSTM's sequence length, a Shape of a branch inlined at import), the shape
    one onnxruntime run on a seeded random sample produces. The inputs' shapes are fixed by the pipeline, so
    that run's shapes are the ones the device sees; a model onnxruntime cannot run keeps what inference gave."""
    known = {v.name for v in (*model.graph.value_info, *model.graph.input, *model.graph.output)
             if g.static_shape(model, v.name) is not None}
    known |= {t.name for t in model.graph.initializer}
    missing = [name for node in model.graph.node for name in node.output if name and name not in known]
    if not missing:
        return model
    observed = observed_shapes(model, missing)
    kept = [v for v in model.graph.value_info if v.name not in observed]
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept)
    for name, (elem_type, shape) in observed.items():
        model.graph.value_info.append(onnx.helper.make_tensor_value_info(name, elem_type, shape))
    return model


def _constants_as_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose Constant nodes (axes, shapes after an opset upgrade) are initializers."""
    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    constants = [n for n in graph.node if n.op_type == "Constant" and len(n.attribute) == 1
                 and n.attribute[0].name == "value"]
    for node in constants:
        tensor = onnx.TensorProto()
        tensor.CopyFrom(node.attribute[0].t)
        tensor.name = node.output[0]
        graph.initializer.append(tensor)
    g.remove_nodes(graph, constants)
    return result


def _renamed(t: QTensor, name: str) -> QTensor:
    return QTensor(t.key, name, t.shape, t.scale, t.zero_point, t.bits, t.signed)


def _params(graph: onnx.GraphProto, node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray]:
    scale = g.constant(graph, node.input[1])
    zero = g.constant(graph, node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if scale is None:
        raise ValueError(f"{node.name}: scale is not a constant")
    if zero is None:
        zero = np.zeros(scale.shape, dtype=np.uint8)
    return np.asarray(scale), np.asarray(zero)
