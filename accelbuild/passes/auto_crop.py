"""Predict crop points: where pre-processing ends and where post-processing begins.

Back end: starting from the model outputs, absorb nodes that are post-processing ops (reshape/concat/
split heads, sigmoid/softmax scores, box decoding arithmetic, NMS/TopK, tiny "integral" convolutions
such as YOLOv8's DFL, the expectation over softmax bins) as long as everything they feed is already
post-processing. A channel Concat that only joins accelerator outputs goes back to the AI section (one
output per head instead of two).
Front end: from each input, follow a single chain of layout transposes, casts and normalisation by
constants. Each decision is kept as a reason for the record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx

from accelbuild.util import onnx_graph as g

POST_OPS = {
    "Reshape", "Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "Squeeze",
    "Unsqueeze", "Flatten", "Sigmoid", "Softmax", "LogSoftmax", "Exp", "Log", "Sqrt", "Add", "Sub", "Mul",
    "Div", "Neg", "Abs", "Max", "Min", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean", "ArgMax",
    "ArgMin", "TopK", "NonMaxSuppression", "NonZero", "Cast", "Expand", "Tile", "Range", "Shape", "Where",
    "Equal", "Greater", "Less", "And", "Or", "Not", "Identity", "Floor", "Ceil", "Round", "Pow", "Clip",
}
WEIGHTED_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul"}
TINY_WEIGHTS = 256
PRE_OPS = {"Transpose", "Cast", "Identity"}
NORMALISE_OPS = {"Div", "Mul", "Sub", "Add"}


class _Links:
    """Who makes and who reads each tensor of the graph ``predict`` reads (never changes): found once, not
    for every node asked about. (A plain class: a dataclass costs its module's import a generated method.)"""

    __slots__ = ("producers", "consumers")

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.producers = g.producers(graph)
        self.consumers = g.consumers(graph)


@dataclass
class CropPrediction:
    inputs: list[str]
    outputs: list[str]
    reasons: list[str] = field(default_factory=list)


def predict(model: onnx.ModelProto) -> CropPrediction:
    graph = model.graph
    model_inputs = [v.name for v in g.real_inputs(graph)]
    links = _Links(graph)
    post = _post_nodes(graph, links)
    outputs, reasons = _boundary_outputs(graph, post), []
    if not _leaves_accelerated_work(graph, post, links):
        outputs = [v.name for v in graph.output]
        reasons = ["no post-processing found before the outputs (every path ends in network layers)"]
    elif post:
        kinds = sorted({n.op_type for n in graph.node if n.name in post})
        reasons.insert(0, f"post-processing of {len(post)} node(s) ({', '.join(kinds)}) after {', '.join(outputs)}")
    inputs, pre_reasons = _pre_chain_ends(graph, model_inputs)
    return CropPrediction(inputs, outputs, pre_reasons + reasons)


def _is_post_op(graph: onnx.GraphProto, node: onnx.NodeProto, links: _Links) -> bool:
    if _is_swish_part(node, links):
        return False  # x * sigmoid(x) is a network activation, not score post-processing
    if node.op_type in POST_OPS:
        return True
    if node.op_type in WEIGHTED_OPS and len(node.input) > 1:
        weight = g.constant(graph, node.input[1])
        # an "integral": the expectation over a softmax's bins with one output channel and few weights
        # (YOLOv8's DFL), not a small network layer such as DBNet's last upsampling
        return (weight is not None and weight.size <= TINY_WEIGHTS and _output_channels(node, weight) == 1
                and _reads_softmax(links, node.input[0]))
    return False


def _reads_softmax(links: _Links, tensor: str) -> bool:
    producers = links.producers
    node = producers.get(tensor)
    while node is not None and node.op_type in ("Transpose", "Reshape", "Identity"):
        node = producers.get(node.input[0])
    return node is not None and node.op_type == "Softmax"


def _output_channels(node: onnx.NodeProto, weight: np.ndarray) -> int:
    if node.op_type == "Conv":
        return int(weight.shape[0])
    if node.op_type == "ConvTranspose":
        return int(weight.shape[1]) * int(g.attribute(node, "group", 1))
    if node.op_type == "Gemm" and int(g.attribute(node, "transB", 0)):
        return int(weight.shape[0])
    return int(weight.shape[-1])


def _is_swish_part(node: onnx.NodeProto, links: _Links) -> bool:
    """The Mul of x * sigmoid(x), or the Sigmoid that feeds only such a Mul."""
    producers = links.producers
    if node.op_type == "Mul" and len(node.input) == 2:
        for a, b in (node.input, reversed(node.input)):
            sig = producers.get(b)
            if sig is not None and sig.op_type == "Sigmoid" and sig.input[0] == a:
                return True
    if node.op_type == "Sigmoid":
        readers = links.consumers.get(node.output[0], [])
        return bool(readers) and all(r.op_type == "Mul" and node.input[0] in r.input for r in readers)
    return False


def _post_nodes(graph: onnx.GraphProto, links: _Links) -> set[str]:
    outputs = g.graph_output_names(graph)
    consumers = links.consumers
    post: set[str] = set()
    for node in reversed(g.topological_order(graph)):
        if not _is_post_op(graph, node, links):
            continue
        readers = [c for out in node.output for c in consumers.get(out, [])]
        feeds_outputs = any(out in outputs for out in node.output)
        if (readers or feeds_outputs) and all(r.name in post for r in readers):
            post.add(node.name)
    _return_channel_concats(graph, post, links)
    return post


def _return_channel_concats(graph: onnx.GraphProto, post: set[str], links: _Links) -> None:
    """A Concat on the channel axis whose inputs all come from the AI side stays on the chip."""
    producers = links.producers
    for node in graph.node:
        if node.name not in post or node.op_type != "Concat" or int(g.attribute(node, "axis", 0)) != 1:
            continue
        sources = [producers.get(i) for i in node.input]
        if all(s is not None and s.name not in post and not _is_post_op(graph, s, links) for s in sources):
            post.discard(node.name)


def _boundary_outputs(graph: onnx.GraphProto, post: set[str]) -> list[str]:
    """Tensors made outside the post section and read inside it (or model outputs made outside)."""
    producers = g.producers(graph)
    constants = set(g.initializers(graph))
    found: list[str] = []
    for node in graph.node:
        if node.name not in post:
            continue
        for tensor in node.input:
            producer = producers.get(tensor)
            if tensor and tensor not in constants and producer is not None and producer.name not in post:
                if tensor not in found:
                    found.append(tensor)
    for value in graph.output:
        producer = producers.get(value.name)
        if producer is not None and producer.name not in post and value.name not in found:
            found.append(value.name)
    return found


def _leaves_accelerated_work(graph: onnx.GraphProto, post: set[str], links: _Links) -> bool:
    """The AI section must keep at least one real network layer."""
    return any(n.op_type in WEIGHTED_OPS and n.name not in post and not _is_post_op(graph, n, links)
               for n in graph.node)


def _pre_chain_ends(graph: onnx.GraphProto, model_inputs: list[str]) -> tuple[list[str], list[str]]:
    consumers = g.consumers(graph)
    ends, reasons = [], []
    for name in model_inputs:
        tensor, chain = name, []
        while True:
            readers = consumers.get(tensor, [])
            if len(readers) != 1 or len(readers[0].output) != 1 or not _is_pre_op(graph, readers[0], tensor):
                break
            chain.append(readers[0].op_type)
            tensor = readers[0].output[0]
        ends.append(tensor)
        if chain:
            reasons.append(f"pre-processing {' -> '.join(chain)} on input {name!r} ends at {tensor!r}")
    return ends, reasons


def _is_pre_op(graph: onnx.GraphProto, node: onnx.NodeProto, tensor: str) -> bool:
    if node.op_type in PRE_OPS:
        return True
    if node.op_type in NORMALISE_OPS and len(node.input) == 2:
        other = node.input[1] if node.input[0] == tensor else node.input[0]
        value = g.constant(graph, other)
        return value is not None and np.asarray(value).size <= 4
    return False


_INTEGER_TYPES = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
                  onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64,
                  onnx.TensorProto.BOOL}


def integer_front(model: onnx.ModelProto) -> CropPrediction | None:
    """The ai section's inputs when integer graph inputs (bytes, token ids, a sample rate) are cut off.

    The pre section is every node that reads only integer tensors derived from integer inputs (and
    constants): Reshape/Expand/Equal of the ids, and the node that turns them into numbers (Cast, OneHot,
    a Gather from an embedding table). An accelerator quantizes real values; integer indices belong on the
    host. None when the model has no integer input or nothing to cut.
    """
    graph = model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.value_info, *graph.output]}
    constants = set(g.initializers(graph)) | {out for n in graph.node if n.op_type == "Constant" for out in n.output}
    real_inputs = [v.name for v in g.real_inputs(graph)]
    integer = {name for name in real_inputs if types.get(name) in _INTEGER_TYPES}
    if not integer:
        return None
    order = g.topological_order(graph)
    pre: list[onnx.NodeProto] = []
    for node in order:
        reads = [name for name in g.node_reads(node) if name not in constants]
        if node.op_type == "Constant" or not reads or not all(name in integer for name in reads):
            continue
        pre.append(node)
        integer.update(out for out in node.output if types.get(out) in _INTEGER_TYPES)
    produced = {out for node in pre for out in node.output if out}
    if not pre or produced & g.graph_output_names(graph):
        return None
    inside = {id(node) for node in pre}
    read_after = [name for node in order if id(node) not in inside for name in g.node_reads(node)]
    boundary = list(dict.fromkeys(name for name in read_after if name in produced))
    if not boundary:
        return None
    read = set(read_after)
    untouched = [name for name in real_inputs if name not in integer and name in read]
    ops = ", ".join(sorted({node.op_type for node in pre}))
    sources = ", ".join(repr(name) for name in real_inputs if name in integer)
    reason = (f"integer input {sources}: {len(pre)} node(s) ({ops}) run on the host in the pre section; "
              f"the ai section starts at {', '.join(repr(b) for b in boundary)}")
    return CropPrediction(untouched + boundary, [v.name for v in graph.output], [reason])
