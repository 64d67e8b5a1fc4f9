"""Which operators run as integer operators, which of their inputs carry data, and the rules integer
engines follow around them (TIDL, SiMa, Horizon, TFLite/Vela-class engines alike).

- ``DATA_INPUTS``: the operators quantized, and the input positions that carry activations (None: all
  of them); other inputs (shapes, axes, scales of a Resize, Clip bounds) stay as they are. Operators
  not listed stay float: no QuantizeLinear/DequantizeLinear around their own outputs.
- ``PASS_THROUGH``: operators whose output values are a selection of the input's values; the output
  keeps the input's scale and zero point (the integer engine moves codes, it does not requantize).
- Fused activations: a layer of ``FUSING`` (weighted layers, elementwise arithmetic, average pooling,
  Concat: TFLite's operators with a fused activation) whose only reader is Relu or a Clip with constant
  bounds: the engine applies the activation before requantizing, so the pair has one output
  quantization (the activation's) and no QDQ between them.
- ``CONSTANT_OPERANDS``: elementwise operators whose constant float operands are quantized per tensor
  (the engine stores them as integers); weights of weighted layers are quantized per channel.
- ``BOUNDED``: outputs of bounded activations (Sigmoid, HardSigmoid, Softmax, Tanh) take their observed
  range (min..max) whatever the calibration method: they have no outliers, and clipping the largest
  probabilities would change decisions taken on them.
- A MatMul of a 2-D input and constant weights whose only reader adds a constant vector (one value
  per output channel): the Add is the layer's bias, added to the accumulator as int32 (as for Conv and
  Gemm). Inputs of higher rank keep a QDQ between MatMul and Add: onnxruntime (1.32) rewrites that
  pattern into Reshape/Gemm with a QuantizeLinear it then rejects (microsoft/onnxruntime#25526).
- Decomposed LayerNormalization (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, and the optional
  Mul and Add of the affine part) is one operator of the engine, computed at its internal precision:
  its nodes stay float, its input and output are quantized by their neighbours.
- Concat: when asked (the profile's choice), every input and the output share one scale and zero
  point, so the engine concatenates codes without requantizing.
- TFLite conventions (``QdqConfig(conventions="tflite")``, for int8 TFLite and Arm Vela): activations on
  the signed grid only (int8 with a zero point; int16 symmetric, zero point 0); the outputs of Logistic,
  Softmax and Tanh take TFLite's fixed parameters (``TFLITE_FIXED``); average pooling and resizing (any
  mode) keep their input's quantization, as TFLite's integer kernels compute on codes without
  requantizing.
"""

from __future__ import annotations

import numpy as np
import onnx

from accelbuild.util import onnx_graph as g

ALL = None
DATA_INPUTS: dict[str, tuple[int, ...] | None] = {
    # weighted layers: input 0 is the activation (MatMul of two activations quantizes both)
    "Conv": (0,), "ConvTranspose": (0,), "Gemm": (0,), "MatMul": (0, 1),
    # elementwise arithmetic and activations
    "Add": (0, 1), "Sub": (0, 1), "Mul": (0, 1), "Div": (0, 1), "Sum": ALL, "Max": ALL, "Min": ALL,
    "Relu": (0,), "Clip": (0,), "LeakyRelu": (0,), "PRelu": (0, 1), "Sigmoid": (0,), "HardSigmoid": (0,),
    "HardSwish": (0,), "Tanh": (0,), "Softmax": (0,), "Elu": (0,), "Mish": (0,), "Softplus": (0,),
    # pooling, normalisation-free reductions, resampling, padding
    "AveragePool": (0,), "GlobalAveragePool": (0,), "ReduceMean": (0,), "ReduceSum": (0,),
    "Resize": (0,), "Pad": (0,), "Concat": ALL,
    # data movement (see PASS_THROUGH)
    "MaxPool": (0,), "GlobalMaxPool": (0,), "ReduceMax": (0,), "ReduceMin": (0,), "Reshape": (0,),
    "Transpose": (0,), "Flatten": (0,), "Squeeze": (0,), "Unsqueeze": (0,), "Identity": (0,), "Slice": (0,),
    "Split": (0,), "Gather": (0,), "DepthToSpace": (0,), "SpaceToDepth": (0,), "Expand": (0,), "Tile": (0,),
}
PASS_THROUGH = {"Pad", "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin", "Reshape", "Transpose", "Flatten",
                "Squeeze", "Unsqueeze", "Identity", "Slice", "Split", "Gather", "DepthToSpace",
                "SpaceToDepth", "Expand", "Tile"}
WEIGHTED = {"Conv", "ConvTranspose", "Gemm", "MatMul"}
FUSING = WEIGHTED | {"Add", "Sub", "Mul", "Div", "AveragePool", "GlobalAveragePool", "Concat"}
# Bounded activations have no outliers to clip; clipping a probability would change decisions.
BOUNDED = {"Sigmoid", "HardSigmoid", "Softmax", "Tanh"}
CONSTANT_OPERANDS = {"Add", "Sub", "Mul", "Div", "Sum", "Max", "Min", "PRelu", "Concat"}
CONVENTIONS = ("onnx", "tflite")
# TFLite's fixed output quantization of bounded activations: op -> bits -> (scale, zero point)
TFLITE_FIXED: dict[str, dict[int, tuple[float, int]]] = {
    "Sigmoid": {8: (1.0 / 256, -128), 16: (1.0 / 32768, 0)},
    "Softmax": {8: (1.0 / 256, -128), 16: (1.0 / 32768, 0)},
    "Tanh": {8: (1.0 / 128, 0), 16: (1.0 / 32768, 0)},
}
TFLITE_PASS_THROUGH = {"AveragePool", "Resize"}


def data_positions(node: onnx.NodeProto) -> list[int]:
    """Input positions of ``node`` that carry activations (empty for an operator that stays float)."""
    if node.op_type not in DATA_INPUTS:
        return []
    wanted = DATA_INPUTS[node.op_type]
    positions = range(len(node.input)) if wanted is ALL else [i for i in wanted if i < len(node.input)]
    return [i for i in positions if node.input[i]]


def passes_scale_through(graph: onnx.GraphProto, node: onnx.NodeProto, conventions: str = "onnx") -> bool:
    """The output keeps the input's quantization: data movement, max-pooling, nearest resampling (under
    TFLite conventions also average pooling and every resampling)."""
    if conventions == "tflite" and node.op_type in TFLITE_PASS_THROUGH:
        return True
    if node.op_type == "Resize":
        return g.attribute(node, "mode", b"nearest") in (b"nearest", "nearest")
    if node.op_type == "Pad":  # copies of the input, or zeros (exact on every grid); not other constants
        mode = g.attribute(node, "mode", b"constant")
        value = node.input[2] if len(node.input) > 2 and node.input[2] else ""
        return mode not in (b"constant", "constant") or not value or _is_zero(graph, value)
    return node.op_type in PASS_THROUGH


def fusible_activation(graph: onnx.GraphProto, node: onnx.NodeProto) -> bool:
    """Relu, or Clip whose bounds are constants (ReLU6 and friends)."""
    if node.op_type == "Relu":
        return True
    if node.op_type != "Clip":
        return False
    bounds = [name for name in node.input[1:] if name]
    return all(g.constant(graph, name) is not None for name in bounds)


def _is_zero(graph: onnx.GraphProto, name: str) -> bool:
    value = g.constant(graph, name)
    return value is not None and value.size == 1 and float(value.reshape(-1)[0]) == 0.0


def bias_add(graph: onnx.GraphProto, add: onnx.NodeProto, tensor: str, channels: int) -> int | None:
    """The input position of ``add`` holding a constant float vector of ``channels`` values (one per
    output channel of the layer producing ``tensor``), if ``add`` adds a bias to ``tensor``."""
    if add.op_type != "Add" or len(add.input) != 2 or tensor not in add.input:
        return None
    index = 1 - list(add.input).index(tensor)
    value = g.constant(graph, add.input[index])
    if value is None or value.dtype != np.float32 or value.size != channels or value.shape[-1:] != (channels,):
        return None
    return index


def layer_norms(graph: onnx.GraphProto) -> list[list[str]]:
    """Node names of every decomposed LayerNormalization, each in graph order."""
    readers = g.consumers(graph)
    found = [_layer_norm_at(graph, readers, node) for node in graph.node if node.op_type == "ReduceMean"]
    return [[n.name for n in chain] for chain in found if chain]


def _layer_norm_at(graph: onnx.GraphProto, readers: dict[str, list[onnx.NodeProto]],
                   mean: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """ReduceMean(x) -> Sub(x, mean) -> Pow(., 2) | Mul(., .) -> ReduceMean -> Add(eps) -> Sqrt ->
    Div(centred, root) [-> Mul(gamma) [-> Add(beta)]], starting at ``mean``."""
    x = mean.input[0]
    sub = _reader(readers, mean.output[0], "Sub", [x, mean.output[0]])
    if sub is None:
        return None
    centred = sub.output[0]
    square = _reader(readers, centred, "Mul", [centred, centred]) or next(
        (n for n in readers.get(centred, []) if n.op_type == "Pow" and _is_two(graph, n.input[1])), None)
    variance = square and _sole(readers, square.output[0], "ReduceMean")
    eps = variance and _sole(readers, variance.output[0], "Add")
    root = eps and _sole(readers, eps.output[0], "Sqrt")
    div = root and _reader(readers, root.output[0], "Div", [centred, root.output[0]])
    if square is None or variance is None or eps is None or root is None or div is None:
        return None
    chain = [mean, sub, square, variance, eps, root, div]
    scale = _sole(readers, div.output[0], "Mul")
    if scale is not None and any(g.constant(graph, i) is not None for i in scale.input):
        chain.append(scale)
        shift = _sole(readers, scale.output[0], "Add")
        if shift is not None and any(g.constant(graph, i) is not None for i in shift.input):
            chain.append(shift)
    return chain


def _reader(readers: dict[str, list[onnx.NodeProto]], tensor: str, op: str,
            inputs: list[str]) -> onnx.NodeProto | None:
    """The node of type ``op`` reading ``tensor`` with exactly these inputs."""
    return next((n for n in readers.get(tensor, []) if n.op_type == op and list(n.input) == inputs), None)


def _sole(readers: dict[str, list[onnx.NodeProto]], tensor: str, op: str) -> onnx.NodeProto | None:
    found = readers.get(tensor, [])
    return found[0] if len(found) == 1 and found[0].op_type == op else None


def _is_two(graph: onnx.GraphProto, name: str) -> bool:
    value = g.constant(graph, name)
    return value is not None and value.size == 1 and float(value.reshape(-1)[0]) == 2.0
