"""Write the QDQ model from a plan and its numbers.

Each QDQ tensor ``t`` keeps its name for its readers: the producer now writes ``t/float``, a
QuantizeLinear makes ``t/quantized`` and a DequantizeLinear writes ``t`` again (a graph input instead
feeds ``t/quantized`` and its readers read ``t/dequantized``). Weighted layers read
``DequantizeLinear(integer weights, per-channel scales)`` and, where planned, an int32 bias the same
way; quantized constant operands are per-tensor integers behind a DequantizeLinear. Graph inputs and
outputs keep their names, types and shapes, so the model is used exactly as the float one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from accelbuild.quantize.calibration import QuantParams
from accelbuild.quantize.qdq.integers import IntegerWeights
from accelbuild.quantize.qdq.plan import Plan
from accelbuild.util import onnx_graph as g


@dataclass(frozen=True)
class Numbers:
    """What calibration and weight quantization decided, by group, layer and constant."""

    groups: dict[int, QuantParams]
    weights: dict[str, IntegerWeights]        # by layer (node) name
    constants: dict[tuple[str, int], tuple[np.ndarray, QuantParams]]  # (node, input) -> (codes, params)


def write_qdq(model: onnx.ModelProto, plan: Plan, numbers: Numbers) -> onnx.ModelProto:
    """A QDQ copy of ``model`` (which must already be at an opset with int16 QuantizeLinear, >= 21)."""
    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    names = _Names(graph)
    before: dict[str, list[onnx.NodeProto]] = {}   # node name -> nodes to place right before it
    after: dict[str, list[onnx.NodeProto]] = {}    # node name -> nodes to place right after it
    head: list[onnx.NodeProto] = []
    producers = g.producers(graph)

    for tensor, gid in plan.group_of.items():
        params = numbers.groups[gid]
        scale, zero = _params_initializers(graph, names, tensor, params)
        quantized = names.fresh(f"{tensor}/quantized")
        if tensor in plan.graph_inputs:
            dequantized = names.fresh(f"{tensor}/dequantized")
            g.replace_uses(graph, tensor, dequantized)
            head += _pair(names, tensor, quantized, dequantized, scale, zero, tensor)
            continue
        producer = producers[tensor]
        raw = names.fresh(f"{tensor}/float")
        producer.output[list(producer.output).index(tensor)] = raw
        after.setdefault(producer.name, []).extend(_pair(names, raw, quantized, tensor, scale, zero, tensor))

    nodes = {n.name: n for n in graph.node}
    for weight_plan in plan.weights:
        layer, ints = weight_plan.layer, numbers.weights[weight_plan.layer.name]
        node = nodes[layer.name]
        node.input[layer.input_index] = _dequantized_initializer(
            graph, names, before, layer.name, f"{layer.name}/weight", ints.codes, ints.scales, layer.axis)
        if ints.bias_codes is not None and ints.bias_scales is not None:  # set together
            reader = nodes[weight_plan.bias_node]
            while len(reader.input) <= weight_plan.bias_index:  # a bias added by bias correction
                reader.input.append("")
            reader.input[weight_plan.bias_index] = _dequantized_initializer(
                graph, names, before, reader.name, f"{layer.name}/bias", ints.bias_codes, ints.bias_scales,
                ints.bias_codes.ndim - 1)
    for const in plan.constants:
        codes, params = numbers.constants[(const.node, const.index)]
        base = f"{const.node}/input{const.index}"
        scale, zero = _params_initializers(graph, names, base, params)
        q_name = names.fresh(f"{base}/quantized")
        graph.initializer.append(numpy_helper.from_array(codes, q_name))
        dq_name = names.fresh(f"{base}/dequantized")
        before.setdefault(const.node, []).append(
            helper.make_node("DequantizeLinear", [q_name, scale, zero], [dq_name], name=names.fresh(f"{base}/dq")))
        nodes[const.node].input[const.index] = dq_name

    ordered = list(head)
    for node in graph.node:  # already in topological order (see qdq.prepare)
        ordered += before.get(node.name, []) + [node] + after.get(node.name, [])
    del graph.node[:]
    graph.node.extend(ordered)
    g.prune(graph)  # float weights, biases and constants no longer read
    del graph.value_info[:]
    return result


def _pair(names: _Names, source: str, quantized: str, target: str, scale: str, zero: str,
          tensor: str) -> list[onnx.NodeProto]:
    return [helper.make_node("QuantizeLinear", [source, scale, zero], [quantized],
                             name=names.fresh(f"{tensor}/quantize")),
            helper.make_node("DequantizeLinear", [quantized, scale, zero], [target],
                             name=names.fresh(f"{tensor}/dequantize"))]


def _params_initializers(graph: onnx.GraphProto, names: _Names, base: str, params: QuantParams) -> tuple[str, str]:
    scale, zero = names.fresh(f"{base}/scale"), names.fresh(f"{base}/zero_point")
    graph.initializer.append(numpy_helper.from_array(np.array(params.scale, dtype=np.float32), scale))
    graph.initializer.append(numpy_helper.from_array(np.array(params.zero_point, dtype=params.dtype), zero))
    return scale, zero


def _dequantized_initializer(graph: onnx.GraphProto, names: _Names, before: dict[str, list[onnx.NodeProto]],
                             node: str, base: str, codes: np.ndarray, scales: np.ndarray, axis: int) -> str:
    q_name, s_name = names.fresh(f"{base}_quantized"), names.fresh(f"{base}_scale")
    z_name = names.fresh(f"{base}_zero_point")  # explicit: some onnxruntime fusions assume uint8 when absent
    graph.initializer.append(numpy_helper.from_array(codes, q_name))
    graph.initializer.append(numpy_helper.from_array(scales.astype(np.float32), s_name))
    graph.initializer.append(numpy_helper.from_array(np.zeros(scales.shape, dtype=codes.dtype), z_name))
    output = names.fresh(f"{base}_dequantized")
    before.setdefault(node, []).append(helper.make_node(
        "DequantizeLinear", [q_name, s_name, z_name], [output], name=names.fresh(f"{base}/dequantize"), axis=axis))
    return output


class _Names:
    """Fresh tensor and node names that do not clash with the graph's own."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.taken = {t.name for t in graph.initializer} | {v.name for v in [*graph.input, *graph.output]}
        self.taken |= {name for n in graph.node for name in [n.name, *n.input, *n.output]}

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name
