"""Write the quantized model: integer weight initializers behind per-axis DequantizeLinear.

The float graph is otherwise unchanged, so onnxruntime runs ``quantized.onnx`` directly as an
independent check of the arithmetic. Biases stay float.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from accelbuild.errors import StageError
from accelbuild.passes.opset import TARGET_OPSET, convert_opset, default_opset
from accelbuild.quantize.precision import storage_dtype
from accelbuild.quantize.weights import WeightedLayer, dequantize, quantize, sqnr_db, weight_bytes
from accelbuild.util import onnx_graph as g


@dataclass(frozen=True)
class QuantizedLayer:
    layer: WeightedLayer
    bits: int
    codes: np.ndarray
    scales: np.ndarray
    sqnr_db: float

    def record(self) -> dict[str, object]:
        return {
            "name": self.layer.name,
            "op": self.layer.op,
            "bits": self.bits,
            "weights": self.layer.count,
            "weight_bytes": weight_bytes(self.layer.count, self.bits),
            "channels": int(self.scales.size),
            "axis": self.layer.axis,
            "sqnr_db": round(self.sqnr_db, 3),
        }


def quantize_layers(model: onnx.ModelProto, layers: list[WeightedLayer],
                    bits: dict[str, int]) -> list[QuantizedLayer]:
    result = []
    for layer in layers:
        weight = g.constant(model.graph, layer.weight)
        assert weight is not None
        codes, scales = quantize(weight, bits[layer.name], layer.axis)
        approx = dequantize(codes, scales, layer.axis)
        result.append(QuantizedLayer(layer, bits[layer.name], codes, scales, sqnr_db(weight, approx)))
    return result


def quantized_model(model: onnx.ModelProto, quantized: list[QuantizedLayer]) -> onnx.ModelProto:
    """A copy of ``model`` whose weighted layers read DequantizeLinear(integer weights, scales)."""
    result = onnx.ModelProto()
    result.CopyFrom(model)
    if default_opset(result) < TARGET_OPSET:
        convert_opset(result)
        if default_opset(result) < TARGET_OPSET:
            raise StageError(f"quantized weights need opset {TARGET_OPSET}; the model could not be converted")
    graph = result.graph
    nodes = {n.name: n for n in graph.node}
    dequantizers = []
    for q in quantized:
        layer = q.layer
        codes_name, scale_name = f"{layer.name}.weight_q{q.bits}", f"{layer.name}.weight_scale"
        graph.initializer.append(numpy_helper.from_array(q.codes.astype(storage_dtype(q.bits)), codes_name))
        graph.initializer.append(numpy_helper.from_array(q.scales, scale_name))
        output = f"{layer.name}.weight_dequantized"
        dequantizers.append(helper.make_node("DequantizeLinear", [codes_name, scale_name], [output],
                                             name=f"{layer.name}/dequantize_weight", axis=layer.axis))
        nodes[layer.name].input[layer.input_index] = output
    ordered = dequantizers + list(graph.node)
    del graph.node[:]
    graph.node.extend(ordered)
    g.prune(graph)  # the float weights are no longer read
    return result
