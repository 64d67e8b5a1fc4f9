"""Channel-last (TFLite) vs channel-first (ONNX Conv, pooling, Resize, DepthToSpace) handling.

Every ONNX tensor that stands for a TFLite tensor keeps the TFLite (NHWC) layout, so graph inputs,
outputs and crop points mean what they mean in the ``.tflite`` file. Layout-sensitive ONNX ops are
wrapped as ``Transpose(0,3,1,2) -> op -> Transpose(0,2,3,1)``, weights are permuted once at conversion
time, and afterwards :func:`collapse_transposes` removes every Transpose that undoes the one feeding it,
so a chain of convolutions stays channel-first in between (:mod:`.transpose_sinking` first moves
Transposes below the ops that do not care about layout, so that more of them meet), and
:func:`trivial_transposes_as_reshapes` turns those that move only axes of size 1 into Reshapes. This
module also holds TFLite's padding arithmetic (SAME is asymmetric, with the extra pixel at the end) as
explicit ONNX ``pads``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)
CHANNEL_FIRST_SUFFIX = "/nchw"  # ``T/nchw``: TFLite tensor T's value, channel-first (graph.py's naming scheme)


def same_padding(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TFLite SAME padding ``(before, after)``: output ``ceil(size/stride)``, odd pixel at the end."""
    effective = (kernel - 1) * dilation + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + effective - size, 0)
    return total // 2, total - total // 2


def onnx_pads(padding: str, in_hw: Sequence[int], kernel_hw: Sequence[int], strides: Sequence[int],
              dilations: Sequence[int] = (1, 1)) -> list[int]:
    """ONNX ``pads`` ``[top, left, bottom, right]`` for TFLite SAME or VALID padding."""
    if padding == "VALID":
        return [0, 0, 0, 0]
    (top, bottom), (left, right) = (same_padding(s, k, st, d)
                                    for s, k, st, d in zip(in_hw, kernel_hw, strides, dilations))
    return [top, left, bottom, right]


def conv_output_size(padding: str, size: int, kernel: int, stride: int, dilation: int = 1) -> int:
    """Spatial output size of a TFLite convolution or pooling window."""
    if padding == "SAME":
        return -(-size // stride)
    return -(-(size - (kernel - 1) * dilation) // stride)


def ohwi_to_oihw(weights: np.ndarray) -> np.ndarray:
    """CONV_2D filter ``[out, kh, kw, in]`` -> ONNX Conv ``[out, in, kh, kw]``."""
    return np.ascontiguousarray(weights.transpose(0, 3, 1, 2))


def depthwise_to_oihw(weights: np.ndarray) -> np.ndarray:
    """DEPTHWISE_CONV_2D filter ``[1, kh, kw, C*M]`` -> grouped Conv ``[C*M, 1, kh, kw]``."""
    return np.ascontiguousarray(weights.transpose(3, 0, 1, 2))


def ohwi_to_iohw(weights: np.ndarray) -> np.ndarray:
    """TRANSPOSE_CONV filter ``[out, kh, kw, in]`` -> ONNX ConvTranspose ``[in, out, kh, kw]``."""
    return np.ascontiguousarray(weights.transpose(3, 0, 1, 2))


def perm_of(node: onnx.NodeProto) -> tuple[int, ...]:
    for attr in node.attribute:
        if attr.name == "perm":
            return tuple(attr.ints)
    return ()


def _undoes(first: onnx.NodeProto, second: onnx.NodeProto) -> bool:
    """Whether Transpose ``second`` restores the layout that Transpose ``first`` changed."""
    p, q = perm_of(first), perm_of(second)
    return len(p) == len(q) > 0 and all(p[q[i]] == i for i in range(len(p)))


def collapse_transposes(nodes: list[onnx.NodeProto], keep: set[str]) -> list[onnx.NodeProto]:
    """Drop each Transpose that undoes the Transpose producing its input, then dead nodes.

    A dropped Transpose's consumers read the first Transpose's input instead. ``keep`` (the graph
    outputs) is never renamed away. Nodes must be in topological order.
    """
    producer: dict[str, onnx.NodeProto] = {}
    alias: dict[str, str] = {}
    result = []
    for node in nodes:
        node.input[:] = [alias.get(name, name) for name in node.input]
        source = producer.get(node.input[0]) if node.op_type == "Transpose" else None
        if source is not None and source.op_type == "Transpose" and node.output[0] not in keep \
                and _undoes(source, node):
            alias[node.output[0]] = source.input[0]
            continue
        result.append(node)
        producer.update({out: node for out in node.output})
    return remove_dead_nodes(result, keep)


def trivial_transposes_as_reshapes(nodes: list[onnx.NodeProto], shapes: Mapping[str, Sequence[int]],
                                   add_ints: Callable[[str, Sequence[int]], str]) -> list[onnx.NodeProto]:
    """Each Transpose that moves only axes of size 1 (``[1, 1, 1, C]`` to ``[1, C, 1, 1]``: the values keep
    their order in memory) as a Reshape to its output shape, which every family treats as free.

    ``shapes`` holds the static shapes of the TFLite tensors (a Transpose's input or output is one);
    ``add_ints`` makes the shape constant. Other nodes are returned as they are.
    """
    result = []
    for node in nodes:
        shape = _input_shape(node, shapes) if node.op_type == "Transpose" else None
        if shape is not None:
            perm = perm_of(node)
            kept = [axis for axis in perm if shape[axis] != 1]
            if kept == sorted(kept):
                node = helper.make_node("Reshape", [node.input[0], add_ints(f"{node.name}/shape",
                                                                            [shape[a] for a in perm])],
                                        list(node.output), name=node.name)
        result.append(node)
    return result


def _input_shape(node: onnx.NodeProto, shapes: Mapping[str, Sequence[int]]) -> tuple[int, ...] | None:
    """The static input shape of a Transpose, from its input's or its output's TFLite shape."""
    perm = perm_of(node)
    if node.input[0] in shapes:
        shape = tuple(shapes[node.input[0]])
    elif node.output[0] in shapes and perm:
        out = tuple(shapes[node.output[0]])
        shape = tuple(out[perm.index(axis)] for axis in range(len(perm))) if len(out) == len(perm) else ()
    else:
        return None
    return shape if perm and len(shape) == len(perm) and all(d > 0 for d in shape) else None


def remove_dead_nodes(nodes: list[onnx.NodeProto], keep: set[str]) -> list[onnx.NodeProto]:
    """Nodes none of whose outputs are used (or graph outputs), removed back to front."""
    used = set(keep)
    alive = []
    for node in reversed(nodes):
        if any(out in used for out in node.output):
            alive.append(node)
            used.update(node.input)
    return alive[::-1]


def transpose_node(name: str, source: str, output: str, perm: Sequence[int]) -> onnx.NodeProto:
    return helper.make_node("Transpose", [source], [output], name=name, perm=list(perm))
