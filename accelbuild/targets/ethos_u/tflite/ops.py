"""ONNX operator -> converter writing its int8 TFLite operators (the writer's supported operators)."""

from __future__ import annotations

from collections.abc import Callable

import onnx

from accelbuild.targets.ethos_u.tflite import ops_layers as layers
from accelbuild.targets.ethos_u.tflite import ops_tensors as tensors
from accelbuild.targets.ethos_u.tflite.writer import Writer

Converter = Callable[[Writer, onnx.NodeProto], None]

CONVERTERS: dict[str, Converter] = {
    "Conv": layers.conv,
    "ConvTranspose": layers.conv_transpose,
    "Gemm": layers.fully_connected,
    "MatMul": layers.fully_connected,
    "MaxPool": layers.pool,
    "AveragePool": layers.pool,
    "GlobalAveragePool": layers.mean,
    "ReduceMean": layers.mean,
    "Resize": layers.resize,
    "Add": tensors.binary,
    "Sub": tensors.binary,
    "Mul": tensors.binary,
    "Div": tensors.divide,
    "HardSigmoid": tensors.hard_sigmoid,
    "Relu": tensors.unary,
    "Sigmoid": tensors.unary,
    "Tanh": tensors.unary,
    "HardSwish": tensors.hard_swish,
    "Clip": tensors.clip,
    "LeakyRelu": tensors.leaky_relu,
    "PRelu": tensors.prelu,
    "Softmax": tensors.softmax,
    "Concat": tensors.concat,
    "Reshape": tensors.reshape,
    "Flatten": tensors.reshape,
    "Squeeze": tensors.reshape,
    "Unsqueeze": tensors.reshape,
    "Transpose": tensors.transpose,
    "DepthToSpace": tensors.depth_to_space,
    "Identity": tensors.identity,
    "QuantizeLinear": tensors.quantize_linear,
    "Gather": tensors.gather,
    "Pad": tensors.pad,
    "Slice": tensors.slice_,
    "Split": tensors.split,
}

