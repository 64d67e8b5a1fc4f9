"""Tiny float ONNX models, one per operator the int8 TFLite writer supports (tests of family ethos-u)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
SHAPE = (1, 4, 8, 8)


class Net:
    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, value: np.ndarray | list, dtype: type = np.float32) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op: str, inputs: list[str], name: str, **attrs: object) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv(self, x: str, cin: int, cout: int, k: int = 1, name: str = "conv", group: int = 1, **attrs: object) -> str:
        w = self.const(f"{name}.w", self.rng.normal(0, 0.5, (cout, cin // group, k, k)))
        b = self.const(f"{name}.b", self.rng.normal(0, 0.1, cout))
        return self.op("Conv", [x, w, b], name, group=group, kernel_shape=[k, k], **attrs)

    def model(self, output: str, shape: list[int], input_shape: tuple[int, ...] = SHAPE) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                   list(input_shape))],
                                  [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _stem(n: Net) -> str:
    return n.conv("x", 4, 8, 1, "stem")


def conv_relu() -> onnx.ModelProto:
    n = Net()
    y = n.op("Relu", [n.conv("x", 4, 8, 3, pads=[1, 1, 1, 1])], "relu")
    return n.model(y, [1, 8, 8, 8])


def conv_stride2_same() -> onnx.ModelProto:
    n = Net()
    return n.model(n.conv("x", 4, 8, 3, strides=[2, 2], pads=[0, 0, 1, 1]), [1, 8, 4, 4])


def conv_explicit_pad() -> onnx.ModelProto:
    n = Net()
    return n.model(n.conv("x", 4, 8, 3, pads=[2, 0, 0, 2]), [1, 8, 8, 8])


def depthwise_relu6() -> onnx.ModelProto:
    n = Net()
    y = n.conv(_stem(n), 8, 8, 3, "dw", group=8, pads=[1, 1, 1, 1])
    y = n.op("Clip", [y, n.const("lo", 0.0), n.const("hi", 6.0)], "relu6")
    return n.model(y, [1, 8, 8, 8])


def depthwise_multiplier() -> onnx.ModelProto:
    n = Net()
    return n.model(n.conv("x", 4, 8, 3, "dw", group=4, pads=[1, 1, 1, 1]), [1, 8, 8, 8])


def gemm_relu() -> onnx.ModelProto:
    n = Net()
    y = n.op("Flatten", [_stem(n)], "flat", axis=1)
    w = n.const("fc.w", n.rng.normal(0, 0.1, (10, 512)))
    y = n.op("Gemm", [y, w, n.const("fc.b", n.rng.normal(0, 0.1, 10))], "fc", transB=1)
    return n.model(n.op("Relu", [y], "relu"), [1, 10])


def matmul_bias() -> onnx.ModelProto:
    n = Net()
    y = n.op("GlobalAveragePool", [_stem(n)], "gap")
    y = n.op("Flatten", [y], "flat", axis=1)
    y = n.op("MatMul", [y, n.const("mm.w", n.rng.normal(0, 0.5, (8, 6)))], "mm")
    return n.model(n.op("Add", [y, n.const("mm.b", n.rng.normal(0, 0.1, 6))], "bias"), [1, 6])


def add_sub_mul() -> onnx.ModelProto:
    n = Net()
    a = _stem(n)
    b = n.conv("x", 4, 8, 1, "other")
    y = n.op("Add", [a, b], "add")
    y = n.op("Sub", [y, n.const("sub.c", n.rng.normal(0, 0.5, (8, 1, 1)))], "sub")
    return n.model(n.op("Mul", [y, n.const("mul.c", n.rng.uniform(0.5, 1.5, (8, 1, 1)))], "mul"), [1, 8, 8, 8])


def pools() -> onnx.ModelProto:
    n = Net()
    y = n.op("MaxPool", [_stem(n)], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])
    y = n.op("AveragePool", [y], "avgpool", kernel_shape=[2, 2], strides=[2, 2])
    return n.model(y, [1, 8, 2, 2])


def global_pool_mean() -> onnx.ModelProto:
    n = Net()
    y = n.op("ReduceMean", [_stem(n)], "mean", axes=[2, 3], keepdims=1)
    return n.model(n.op("GlobalAveragePool", [n.op("Relu", [y], "relu")], "gap"), [1, 8, 1, 1])


def spatial_mean_head() -> onnx.ModelProto:
    """A classifier head as the TFLite import writes Keras' GlobalAveragePooling2D: a mean over H and W
    without keepdims (channel-last in TFLite, [N, C] either way), then a fully connected layer."""
    n = Net()
    y = n.op("ReduceMean", [_stem(n)], "mean", axes=[2, 3], keepdims=0)
    w = n.const("fc.w", n.rng.normal(0, 0.3, (10, 8)))
    return n.model(n.op("Gemm", [y, w, n.const("fc.b", n.rng.normal(0, 0.1, 10))], "fc", transB=1), [1, 10])


def activations() -> onnx.ModelProto:
    n = Net()
    y = n.op("LeakyRelu", [_stem(n)], "leaky", alpha=0.1)
    y = n.op("HardSwish", [n.conv(y, 8, 8, 1, "c2")], "hswish")
    y = n.op("PRelu", [n.conv(y, 8, 8, 1, "c3"), n.const("slope", n.rng.uniform(0.05, 0.3, (8, 1, 1)))], "prelu")
    return n.model(y, [1, 8, 8, 8])


def bounded() -> onnx.ModelProto:
    n = Net()
    y = n.op("Sigmoid", [_stem(n)], "sigmoid")
    y = n.op("Tanh", [n.conv(y, 8, 8, 1, "c2")], "tanh")
    y = n.op("Flatten", [n.op("GlobalAveragePool", [n.conv(y, 8, 8, 1, "c3")], "gap")], "flat", axis=1)
    return n.model(n.op("Softmax", [y], "softmax", axis=-1), [1, 8])


def concat_channels() -> onnx.ModelProto:
    n = Net()
    y = n.op("Concat", [_stem(n), n.conv("x", 4, 4, 3, "other", pads=[1, 1, 1, 1])], "concat", axis=1)
    return n.model(y, [1, 12, 8, 8])


def reshapes() -> onnx.ModelProto:
    n = Net()
    y = n.op("Reshape", [_stem(n), n.const("shape", [1, 8, 64], np.int64)], "reshape")
    y = n.op("Transpose", [y], "transpose", perm=[0, 2, 1])
    y = n.op("Unsqueeze", [y, n.const("axes", [1], np.int64)], "unsqueeze")
    y = n.op("Squeeze", [y, n.const("axes2", [1], np.int64)], "squeeze")
    return n.model(n.op("Flatten", [y], "flat", axis=1), [1, 512])


def reshape_into_conv() -> onnx.ModelProto:
    n = Net()
    y = n.op("Reshape", [_stem(n), n.const("shape", [1, 16, 4, 8], np.int64)], "reshape")
    return n.model(n.conv(y, 16, 4, 1, "after"), [1, 4, 4, 8])


def resize_nearest() -> onnx.ModelProto:
    n = Net()
    y = n.op("Resize", [_stem(n), "", n.const("scales", [1, 1, 2, 2])], "up", mode="nearest",
             coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    return n.model(y, [1, 8, 16, 16])


def resize_bilinear() -> onnx.ModelProto:
    n = Net()
    y = n.op("Resize", [_stem(n), "", n.const("scales", [1, 1, 2, 2])], "up", mode="linear",
             coordinate_transformation_mode="half_pixel")
    return n.model(y, [1, 8, 16, 16])


def pad_slice_split() -> onnx.ModelProto:
    n = Net()
    y = n.op("Pad", [_stem(n), n.const("pads", [0, 0, 1, 2, 0, 0, 1, 0], np.int64)], "pad")
    y = n.op("Slice", [y, n.const("starts", [1, 0], np.int64), n.const("ends", [7, 9], np.int64),
                       n.const("sl_axes", [1, 2], np.int64)], "slice")
    n.nodes.append(helper.make_node("Split", [y, n.const("split", [2, 4], np.int64)], ["a", "b"], name="split",
                                    axis=1))
    y = n.op("Concat", [n.conv("a", 2, 4, 1, "ca"), n.conv("b", 4, 4, 1, "cb")], "concat", axis=1)
    return n.model(y, [1, 8, 9, 10])


def hard_sigmoid_div() -> onnx.ModelProto:
    """PaddleOCR's hard-swish and SE gate: x * HardSigmoid(...), x * clip(x + 3, 0, 6) / 6."""
    n = Net()
    x = _stem(n)
    gate = n.op("HardSigmoid", [n.conv(n.op("GlobalAveragePool", [x], "gap"), 8, 8, 1, "se")], "hsig",
                alpha=0.2, beta=0.5)
    y = n.op("Mul", [x, gate], "se_mul")
    clip = n.op("Clip", [n.op("Add", [y, n.const("three", 3.0)], "add3"), n.const("lo", 0.0), n.const("hi", 6.0)],
                "clip")
    y = n.op("Div", [n.op("Mul", [y, clip], "hswish_mul"), n.const("six", 6.0)], "div6")
    return n.model(y, [1, 8, 8, 8])


CASES: dict[str, Callable[[], onnx.ModelProto]] = {f.__name__: f for f in (
    hard_sigmoid_div,
    conv_relu, conv_stride2_same, conv_explicit_pad, depthwise_relu6, depthwise_multiplier, gemm_relu, matmul_bias,
    add_sub_mul, pools, global_pool_mean, spatial_mean_head, activations, bounded, concat_channels, reshapes, reshape_into_conv,
    resize_nearest, resize_bilinear, pad_slice_split)}


def feeds(count: int = 6, seed: int = 1, shape: tuple[int, ...] = SHAPE) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(0, 1, shape).astype(np.float32)} for _ in range(count)]


def bounded_into_concat() -> onnx.ModelProto:
    """A detector head's shape: a Sigmoid score and a box conv concatenated (the Concat shares one scale)."""
    n = Net()
    stem = _stem(n)
    y = n.op("Concat", [n.op("Sigmoid", [n.conv(stem, 8, 2, 1, "score")], "sigmoid"), n.conv(stem, 8, 4, 1, "box")],
             "concat", axis=1)
    return n.model(y, [1, 6, 8, 8])


def softmax_into_transpose() -> onnx.ModelProto:
    """Class probabilities moved to channel-last after the Softmax (a classifier head exported from NHWC)."""
    n = Net()
    y = n.op("Softmax", [_stem(n)], "softmax", axis=1)
    return n.model(n.op("Transpose", [y], "to_nhwc", perm=[0, 2, 3, 1]), [1, 8, 8, 8])


CASES.update({f.__name__: f for f in (bounded_into_concat, softmax_into_transpose)})


def one_sided_clip() -> onnx.ModelProto:
    """openWakeWord's embedding: Max(LeakyRelu(x), -0.4), which import writes as Clip(x, -0.4)."""
    from accelbuild.passes.opset import convert_opset
    from accelbuild.passes.stable_forms import clip_from_bound

    n = Net()
    y = n.op("LeakyRelu", [_stem(n)], "leaky", alpha=0.2)
    model = n.model(n.op("Max", [y, n.const("floor_value", -0.4)], "floor"), [1, 8, 8, 8])
    convert_opset(model)
    assert clip_from_bound(model)
    return model


CASES.update({"one_sided_clip": one_sided_clip})


def hard_swish() -> onnx.ModelProto:
    """A MobileNetV3 / PP-OCR block: conv, hard-swish, conv (int8: HARD_SWISH; int16: ADD, MUL, MUL)."""
    n = Net()
    y = n.op("HardSwish", [_stem(n)], "hswish")
    return n.model(n.conv(y, 8, 8, 1, "c2"), [1, 8, 8, 8])


CASES.update({"hard_swish": hard_swish})


def depth_to_space() -> onnx.ModelProto:
    """MediaPipe's full-range face and pose detectors: a conv to 4 x C channels, then DepthToSpace by 2 (DCR)."""
    n = Net()
    y = n.op("DepthToSpace", [n.conv(_stem(n), 8, 16, 1, "d2sp_conv")], "d2sp", blocksize=2, mode="DCR")
    return n.model(y, [1, 4, 16, 16])


CASES.update({"depth_to_space": depth_to_space})


def conv_transpose_valid() -> onnx.ModelProto:
    """DBNet's upsampling head: ConvTranspose kernel 2, stride 2, no pads (VALID), then BN folded and ReLU."""
    n = Net()
    w = n.const("up.w", n.rng.normal(0, 0.5, (8, 4, 2, 2)))
    b = n.const("up.b", n.rng.normal(0, 0.1, 4))
    y = n.op("ConvTranspose", [_stem(n), w, b], "up", kernel_shape=[2, 2], strides=[2, 2])
    return n.model(n.op("Relu", [y], "up_relu"), [1, 4, 16, 16])


def conv_transpose_same() -> onnx.ModelProto:
    """MediaPipe's selfie segmentation head: kernel 4, stride 2, pads 1 (TFLite SAME)."""
    n = Net()
    w = n.const("up.w", n.rng.normal(0, 0.5, (8, 2, 4, 4)))
    y = n.op("ConvTranspose", [_stem(n), w], "segment", kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1])
    return n.model(y, [1, 2, 16, 16])


CASES.update({f.__name__: f for f in (conv_transpose_valid, conv_transpose_same)})


def matmul_two_activations() -> onnx.ModelProto:
    """A Gram matrix of a conv's features (attention's Q.K^T shape): MatMul of two quantized tensors."""
    n = Net()
    a = n.op("Reshape", [_stem(n), n.const("shape", [1, 8, 64], np.int64)], "tokens")
    b = n.op("Transpose", [a], "tokens_t", perm=[0, 2, 1])
    return n.model(n.op("MatMul", [a, b], "gram"), [1, 8, 8])


def pad_reflect() -> onnx.ModelProto:
    n = Net()
    y = n.op("Pad", [_stem(n), n.const("pads", [0, 0, 1, 2, 0, 0, 2, 1], np.int64)], "reflect", mode="reflect")
    return n.model(n.conv(y, 8, 4, 3, "head"), [1, 4, 9, 9])


def gather_tokens() -> onnx.ModelProto:
    """A Gather of int8 codes in ONNX layout (picking tokens, a negative index among them)."""
    n = Net()
    y = n.op("Reshape", [_stem(n), n.const("shape", [1, 8, 64], np.int64)], "tokens")
    y = n.op("Gather", [y, n.const("idx", [0, 5, 63, -2], np.int64)], "picked", axis=2)
    return n.model(n.op("Relu", [y], "relu"), [1, 8, 4])


def gemm_alpha_beta_trans_a() -> onnx.ModelProto:
    """Gemm with transA, alpha and beta: an int8 TRANSPOSE of A, alpha in the weights' scales, beta * C in the
    int32 bias."""
    n = Net()
    y = n.op("GlobalAveragePool", [_stem(n)], "gap")
    y = n.op("Reshape", [y, n.const("shape", [8, 1], np.int64)], "column")
    w = n.const("fc.w", n.rng.normal(0, 0.5, (6, 8)))
    return n.model(n.op("Gemm", [y, w, n.const("fc.b", n.rng.normal(0, 0.1, 6))], "fc", transA=1, transB=1,
                        alpha=0.5, beta=2.0), [1, 6])


def pad_value() -> onnx.ModelProto:
    """Pad with a non-zero constant: its output has a quantization of its own (PADV2 after a requantize)."""
    n = Net()
    y = n.op("Pad", [_stem(n), n.const("pads", [0, 0, 1, 0, 0, 0, 0, 1], np.int64), n.const("v", 0.5)], "padded")
    return n.model(n.conv(y, 8, 4, 1, "head"), [1, 4, 9, 9])


CASES.update({"pad_value": pad_value})
CASES.update({"matmul_two_activations": matmul_two_activations, "pad_reflect": pad_reflect,
              "gather_tokens": gather_tokens, "gemm_alpha_beta_trans_a": gemm_alpha_beta_trans_a})
