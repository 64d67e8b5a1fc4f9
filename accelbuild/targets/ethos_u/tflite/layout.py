"""Which quantized tensors are channel-last (NHWC) in the TFLite model.

ONNX convolutions, pooling and resampling are channel-first; TFLite's are channel-last. A rank-4 tensor
that a channel-first operator reads or writes is stored NHWC, and so is every rank-4 tensor linked to it
through operators that work in either layout (elementwise arithmetic, activations, Concat, Pad, Slice,
Split, Softmax over channels, reductions: their axes are translated). Everything else keeps its ONNX
shape. Transpose, Reshape, Flatten and Squeeze are the borders: where the two sides' layouts make their
work a no-op they vanish, otherwise the writer emits what the ONNX graph asks for (a TRANSPOSE).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from accelbuild.targets.ethos_u.tflite.qgraph import QGraph

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
CHANNEL_FIRST = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "Resize", "DepthToSpace", "SpaceToDepth"}
EITHER = {"Add", "Sub", "Mul", "Div", "HardSigmoid", "Max", "Min", "Relu", "Clip", "LeakyRelu", "PRelu", "Sigmoid", "Tanh", "HardSwish",
          "Softmax", "Concat", "Pad", "Slice", "Split", "ReduceMean", "Identity"}


def nhwc_tensors(qg: QGraph, data_io: Callable[[onnx.NodeProto], tuple[list[str], list[str]]]) -> set[str]:
    """Keys of the quantized rank-4 tensors stored NHWC; ``data_io`` gives a node's quantized data
    input and output keys (after fusion)."""
    parent: dict[str, str] = {}

    def find(t: str) -> str:
        parent.setdefault(t, t)
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    marked: set[str] = set()
    for node in qg.nodes:
        try:
            ins, outs = data_io(node)
        except Exception:  # noqa: BLE001 - an unsupported node is reported by the writer
            continue
        four = [t for t in [*ins, *outs] if len(qg.tensors[t].shape) == 4]
        if node.op_type in CHANNEL_FIRST:
            marked.update(four)
        elif node.op_type in EITHER:
            for t in four[1:]:
                a, b = find(four[0]), find(t)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    roots = {find(t) for t in marked}
    return {t for t in {*parent, *marked} if find(t) in roots}


def permutation(nhwc: bool, rank: int) -> tuple[int, ...]:
    """TFLite tensor = ONNX tensor transposed by this."""
    return TO_NHWC if nhwc and rank == 4 else tuple(range(rank))


def axis(onnx_axis: int, rank: int, nhwc: bool) -> int:
    """The TFLite axis of an ONNX axis."""
    a = onnx_axis % rank
    return permutation(nhwc, rank).index(a)


def same_order(shape: tuple[int, ...]) -> bool:
    """NCHW and NHWC hold the values of ``shape`` (NCHW) in the same memory order."""
    return len(shape) != 4 or shape[1] == 1 or shape[2] * shape[3] == 1


def compose(perm: tuple[int, ...], nhwc_in: bool, nhwc_out: bool) -> tuple[int, ...]:
    """The TFLite permutation of an ONNX Transpose ``perm`` between tensors of the given layouts."""
    rank = len(perm)
    inverse_in = np.argsort(permutation(nhwc_in, rank))
    out = permutation(nhwc_out, rank)
    return tuple(int(inverse_in[perm[o]]) for o in out)
