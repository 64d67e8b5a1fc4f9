"""Planted graphs for the npu family's tests and benchmarks: chains and residual nets of chosen layers.

``chain(["conv", "sin", "conv"])`` builds a static ``[1, C, S, S]`` chain where each word is one layer
(node and output tensor ``l<i>.<word>``): ``conv`` (3x3, C->C), ``conv1x1``, ``dwconv`` (depthwise 3x3),
``relu``, ``sigmoid``, ``sin`` (an ai.onnx op no NPU profile runs; onnxruntime does), ``celu`` (the same,
and one Apache TVM's ONNX frontend does not import),
``pool5`` (MaxPool 5x5, stride 1), ``pool2`` (MaxPool 2x2 stride 2 followed by a nearest 2x Resize back),
``resize`` (nearest 2x Resize followed by a 2x2 MaxPool back), ``transpose`` (a 0,1,3,2 Transpose),
``custom`` (a node of domain ``com.example``, which nothing runs; its output shape is declared), ``cast`` (a
float -> float Cast) and ``reshape`` (a Reshape to the shape the tensor has), the no-ops converters leave. ``residual_net(blocks)`` builds
conv-relu-conv-add-relu blocks; ``long_chain(n)`` cycles conv/relu/dwconv/sigmoid for n layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from accelbuild.testing.models import PRODUCER_NAME


class _Chain:
    def __init__(self, channels: int, seed: int, size: int = 0) -> None:
        self.c = channels
        self.size = size
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.custom: list[str] = []  # outputs of custom nodes (their shapes are declared: no inference)

    def weight(self, name: str, shape: tuple[int, ...], fan_in: int) -> str:
        value = (self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def const(self, name: str, value: list[float] | list[int], dtype: type = np.float32) -> str:
        if all(t.name != name for t in self.inits):
            self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def node(self, op: str, name: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, domain=domain, **attrs))
        return name

    def layer(self, word: str, name: str, x: str) -> str:
        c = self.c
        if word in ("conv", "conv1x1", "dwconv"):
            k, group = (1, 1) if word == "conv1x1" else (3, c if word == "dwconv" else 1)
            w = self.weight(f"{name}.weight", (c, c // group, k, k), c // group * k * k)
            b = self.const(f"{name}.bias", [0.01] * c)
            return self.node("Conv", name, [x, w, b], kernel_shape=[k, k], pads=[k // 2] * 4, group=group)
        if word in ("relu", "sigmoid", "sin", "celu"):
            return self.node(word.capitalize(), name, [x])
        if word == "pool5":
            return self.node("MaxPool", name, [x], kernel_shape=[5, 5], pads=[2, 2, 2, 2])
        if word == "pool2":
            y = self.node("MaxPool", name, [x], kernel_shape=[2, 2], strides=[2, 2])
            return self.node("Resize", f"{name}.up", [y, "", self.const("scales2", [1, 1, 2, 2])], mode="nearest")
        if word == "resize":
            y = self.node("Resize", name, [x, "", self.const("scales2", [1, 1, 2, 2])], mode="nearest")
            return self.node("MaxPool", f"{name}.down", [y], kernel_shape=[2, 2], strides=[2, 2])
        if word == "transpose":
            return self.node("Transpose", name, [x], perm=[0, 1, 3, 2])
        if word == "cast":
            return self.node("Cast", name, [x], to=TensorProto.FLOAT)
        if word == "reshape":
            return self.node("Reshape", name, [x, self.const("same_shape", [1, c, -1, self.size], np.int64)])
        if word == "custom":
            self.custom.append(name)
            return self.node("Mystery", name, [x], domain="com.example")
        raise ValueError(f"unknown layer word {word!r}")

    def model(self, size: int, output: str) -> onnx.ModelProto:
        shape = [1, self.c, size, size]
        graph = helper.make_graph(self.nodes, "planted", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)], self.inits,
                                  value_info=[helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
                                              for name in self.custom])
        opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.example", 1)] if self.custom else [])
        return helper.make_model(graph, opset_imports=opsets, ir_version=8, producer_name=PRODUCER_NAME)


def chain(words: Sequence[str], channels: int = 32, size: int = 32, seed: int = 0) -> onnx.ModelProto:
    """A chain of the layers ``words`` (see the module docstring)."""
    net = _Chain(channels, seed, size)
    x = "x"
    for i, word in enumerate(words):
        x = net.layer(word, f"l{i}.{word}", x)
    return net.model(size, x)


def long_chain(layers: int, channels: int = 16, size: int = 16, seed: int = 0) -> onnx.ModelProto:
    """``layers`` layers cycling conv, relu, dwconv, sigmoid."""
    cycle = ("conv", "relu", "dwconv", "sigmoid")
    return chain([cycle[i % 4] for i in range(layers)], channels, size, seed)


def residual_net(blocks: int, channels: int = 16, size: int = 16, seed: int = 0) -> onnx.ModelProto:
    """``blocks`` residual blocks (conv, relu, conv, add, relu): 5 layers each."""
    net = _Chain(channels, seed)
    x = "x"
    for b in range(blocks):
        y = net.layer("conv", f"b{b}.conv1", x)
        y = net.layer("relu", f"b{b}.relu1", y)
        y = net.layer("conv", f"b{b}.conv2", y)
        y = net.node("Add", f"b{b}.add", [y, x])
        x = net.layer("relu", f"b{b}.out", y)
    return net.model(size, x)
