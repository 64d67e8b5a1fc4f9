"""Tiny TFLite flatbuffers for tests and examples, written with ``accelbuild.util.tflite_builder``.

The canned models below (a MobileNet-like CNN, int8/uint8-quantized CNNs, float16 and sparse weights,
a detection-style head) use ``np.random.default_rng(seed)``, so equal arguments give equal bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from accelbuild.util.tflite_builder import (  # noqa: F401  (re-exported for tests)
    NUMPY_DTYPES,
    OPTIONS_TABLE,
    SCHEMA_VERSION,
    Quant,
    SparseDim,
    SparseSpec,
    TFLiteBuilder,
)

# --------------------------------------------------------------------------- sparse encoding


def sparsify(dense: np.ndarray, block: int = 1, index_dtype: type = np.int32) -> tuple[np.ndarray, SparseSpec]:
    """Values and sparsity of ``dense``: outer dims DENSE, last dim SPARSE_CSR (optionally in blocks
    of ``block`` along the last dim, each block a DENSE inner level), row-major traversal."""
    shape = dense.shape
    rank = len(shape)
    rows = dense.reshape(-1, shape[-1] // block, block)
    nonzero = np.any(rows != 0, axis=2)
    segments: np.ndarray = np.concatenate([[0], np.cumsum(nonzero.sum(axis=1))]).astype(index_dtype)
    indices: np.ndarray = np.concatenate([np.flatnonzero(r) for r in nonzero]).astype(index_dtype)
    values = rows[nonzero].reshape(-1)
    dims = [SparseDim(dense_size=d) for d in shape[:-1]]
    dims.append(SparseDim(dense_size=shape[-1] // block, segments=segments, indices=indices))
    order, block_map = list(range(rank)), []
    if block > 1:
        dims.append(SparseDim(dense_size=block))
        order, block_map = list(range(rank + 1)), [rank - 1]
    return values, SparseSpec(order, block_map, dims)


# --------------------------------------------------------------------------- layer helpers


def conv_out(size: int, kernel: int, stride: int, padding: str) -> int:
    return -(-size // stride) if padding == "SAME" else -(-(size - kernel + 1) // stride)


def _he(b: TFLiteBuilder, shape: Sequence[int], fan_in: int) -> np.ndarray:
    return b.rng.normal(0.0, math.sqrt(2.0 / fan_in), size=tuple(shape)).astype(np.float32)


def _bias(b: TFLiteBuilder, n: int) -> np.ndarray:
    return b.rng.uniform(-0.1, 0.1, size=n).astype(np.float32)


def conv(b: TFLiteBuilder, name: str, x: int, cout: int, k: int, stride: int = 1, act: str = "NONE",
         padding: str = "SAME", depthwise: bool = False) -> int:
    """A float CONV_2D / DEPTHWISE_CONV_2D with weights ``<name>/weights`` and ``<name>/bias``."""
    n, h, w, cin = b.shape(x)
    if depthwise:
        cout = cin
        weights = b.const(f"{name}/weights", _he(b, (1, k, k, cin), k * k))
    else:
        weights = b.const(f"{name}/weights", _he(b, (cout, k, k, cin), k * k * cin))
    y = b.add_tensor(name, (n, conv_out(h, k, stride, padding), conv_out(w, k, stride, padding), cout))
    options = {"padding": padding, "stride_h": stride, "stride_w": stride, "fused_activation_function": act}
    if depthwise:
        options["depth_multiplier"] = 1
    b.add_op("DEPTHWISE_CONV_2D" if depthwise else "CONV_2D", [x, weights, b.const(f"{name}/bias", _bias(b, cout))],
             [y], options)
    return y


def dense(b: TFLiteBuilder, name: str, x: int, units: int, act: str = "NONE", weights: int | None = None) -> int:
    """A float FULLY_CONNECTED on a 2-D input."""
    rows, width = b.shape(x)
    if weights is None:
        weights = b.const(f"{name}/weights", _he(b, (units, width), width))
    y = b.add_tensor(name, (rows, units))
    b.add_op("FULLY_CONNECTED", [x, weights, b.const(f"{name}/bias", _bias(b, units))], [y],
             {"fused_activation_function": act})
    return y


def unary(b: TFLiteBuilder, builtin: str, name: str, x: int, options: dict | None = None) -> int:
    y = b.add_tensor(name, b.shape(x))
    b.add_op(builtin, [x], [y], options)
    return y


def reshape(b: TFLiteBuilder, name: str, x: int, shape: Sequence[int]) -> int:
    y = b.add_tensor(name, shape)
    b.add_op("RESHAPE", [x, b.const(f"{name}/shape", np.asarray(shape, np.int32), "int32")], [y],
             {"new_shape": list(shape)})
    return y


# --------------------------------------------------------------------------- canned float models


def mobilenet_like(seed: int = 0) -> bytes:
    """``input`` [1, 16, 16, 3] -> conv/relu6, depthwise/relu6, 1x1 conv, hard-swish, pools, FC, softmax
    -> ``probs`` [1, 10]."""
    b = TFLiteBuilder(seed)
    x = b.add_tensor("input", (1, 16, 16, 3), shape_signature=(-1, 16, 16, 3))
    y = conv(b, "stem/conv", x, 8, 3, stride=2, act="RELU6")
    y = conv(b, "block/dw", y, 8, 3, act="RELU6", depthwise=True)
    y = conv(b, "block/pw", y, 16, 1)
    y = unary(b, "HARD_SWISH", "block/hswish", y)
    pooled = b.add_tensor("pool", (1, 4, 4, 16))
    b.add_op("MAX_POOL_2D", [y], [pooled], {"padding": "VALID", "stride_h": 2, "stride_w": 2,
                                            "filter_height": 2, "filter_width": 2})
    gap = b.add_tensor("gap", (1, 1, 1, 16))
    b.add_op("AVERAGE_POOL_2D", [pooled], [gap], {"padding": "VALID", "stride_h": 1, "stride_w": 1,
                                                  "filter_height": 4, "filter_width": 4})
    logits = dense(b, "logits", reshape(b, "flatten", gap, (1, 16)), 10)
    probs = unary(b, "SOFTMAX", "probs", logits, {"beta": 1.0})
    return b.finish([x], [probs])


def blaze_blocks(seed: int = 0, keep_dims: bool = True) -> bytes:
    """MediaPipe's BlazeFace blocks, channel-last ops between convolutions: ``input`` [1, 32, 32, 3] ->
    stem conv (stride 2, RELU), then depthwise + 1x1 conv beside a channel PAD of the shortcut, ADD/RELU,
    PRELU (alpha per channel), CONCATENATION on the channels with a LOGISTIC branch, MUL by a per-channel
    constant, MEAN over H, W (``keep_dims``) -> ``features``."""
    b = TFLiteBuilder(seed)
    image = b.add_tensor("input", (1, 32, 32, 3))
    x = conv(b, "stem", image, 8, 5, stride=2, act="RELU")
    y = conv(b, "block/pw", conv(b, "block/dw", x, 8, 5, depthwise=True), 16, 1)
    shortcut = b.add_tensor("block/pad", (1, 16, 16, 16))
    b.add_op("PAD", [x, b.const("block/paddings", np.array([[0, 0], [0, 0], [0, 0], [0, 8]], np.int32), "int32")],
             [shortcut])
    added = b.add_tensor("block/add", (1, 16, 16, 16))
    b.add_op("ADD", [y, shortcut], [added], {"fused_activation_function": "RELU"})
    prelu = b.add_tensor("block/prelu", (1, 16, 16, 16))
    b.add_op("PRELU", [added, b.const("block/alpha", b.rng.uniform(0.0, 0.3, (1, 1, 16)).astype(np.float32))],
             [prelu])
    gate = unary(b, "LOGISTIC", "gate", conv(b, "gate/conv", prelu, 8, 3))
    joined = b.add_tensor("joined", (1, 16, 16, 24))
    b.add_op("CONCATENATION", [prelu, gate], [joined], {"axis": 3, "fused_activation_function": "NONE"})
    scaled = b.add_tensor("scaled", (1, 16, 16, 24))
    b.add_op("MUL", [joined, b.const("scale", b.rng.uniform(0.5, 1.5, 24).astype(np.float32))], [scaled])
    out = b.add_tensor("features", (1, 1, 1, 24) if keep_dims else (1, 24))
    b.add_op("MEAN", [scaled, b.const("axes", np.array([1, 2], np.int32), "int32")], [out], {"keep_dims": keep_dims})
    return b.finish([image], [out])


def channel_slices(seed: int = 0) -> bytes:
    """Channel slicing between convolutions (MediaPipe's hand re-crop model): ``input`` [1, 16, 16, 3] ->
    conv to 16 channels -> STRIDED_SLICE of channels 0-7 added to a conv of it, and SPLIT of the 16 into
    two halves added together -> CONCATENATION -> conv -> ``output`` [1, 16, 16, 4]."""
    b = TFLiteBuilder(seed)
    image = b.add_tensor("input", (1, 16, 16, 3))
    x = conv(b, "stem", image, 16, 3, act="RELU")
    first = b.add_tensor("first", (1, 16, 16, 8))
    b.add_op("STRIDED_SLICE", [x, *(b.const(f"first/{k}", np.array(v, np.int32), "int32") for k, v in
                                    (("begin", [0, 0, 0, 0]), ("end", [1, 16, 16, 8]), ("strides", [1, 1, 1, 1])))],
             [first], {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0})
    residual = b.add_tensor("residual", (1, 16, 16, 8))
    b.add_op("ADD", [first, conv(b, "branch", first, 8, 3)], [residual])
    low, high = b.add_tensor("low", (1, 16, 16, 8)), b.add_tensor("high", (1, 16, 16, 8))
    b.add_op("SPLIT", [b.const("split/axis", np.array([3], np.int32), "int32"), x], [low, high], {"num_splits": 2})
    halves = b.add_tensor("halves", (1, 16, 16, 8))
    b.add_op("ADD", [low, high], [halves])
    joined = b.add_tensor("joined", (1, 16, 16, 16))
    b.add_op("CONCATENATION", [residual, halves], [joined], {"axis": 3, "fused_activation_function": "NONE"})
    return b.finish([image], [conv(b, "output", joined, 4, 1)])


def detection_head(seed: int = 0, anchors: int = 2, classes: int = 3) -> bytes:
    """``features`` [1, 8, 8, 16] -> box and class convs, reshape, logistic, concat -> ``detections``."""
    b = TFLiteBuilder(seed)
    x = b.add_tensor("features", (1, 8, 8, 16))
    cells = 8 * 8 * anchors
    boxes = reshape(b, "boxes", conv(b, "box/conv", x, 4 * anchors, 1), (1, cells, 4))
    scores = unary(b, "LOGISTIC", "scores", conv(b, "cls/conv", x, classes * anchors, 1))
    scores = reshape(b, "scores/flat", scores, (1, cells, classes))
    out = b.add_tensor("detections", (1, cells, 4 + classes))
    b.add_op("CONCATENATION", [boxes, scores], [out], {"axis": 2})
    return b.finish([x], [out])


def fp16_weights(seed: int = 0) -> bytes:
    """Conv and FC weights and biases stored as float16, each behind a DEQUANTIZE."""
    b = TFLiteBuilder(seed)
    x = b.add_tensor("input", (1, 8, 8, 3))

    def half(name: str, value: np.ndarray) -> int:
        stored = b.const(f"{name}/fp16", value.astype(np.float16), "float16")
        out = b.add_tensor(name, value.shape)
        b.add_op("DEQUANTIZE", [stored], [out])
        return out

    w, bias = half("conv/weights", _he(b, (8, 3, 3, 3), 27)), half("conv/bias", _bias(b, 8))
    y = b.add_tensor("conv", (1, 8, 8, 8))
    b.add_op("CONV_2D", [x, w, bias], [y], {"padding": "SAME", "stride_h": 1, "stride_w": 1,
                                             "fused_activation_function": "RELU"})
    pooled = b.add_tensor("mean", (1, 8))
    b.add_op("MEAN", [y, b.const("mean/axes", np.array([1, 2], np.int32), "int32")], [pooled], {"keep_dims": False})
    out = b.add_tensor("logits", (1, 4))
    b.add_op("FULLY_CONNECTED", [pooled, half("fc/weights", _he(b, (4, 8), 8)), half("fc/bias", _bias(b, 4))],
             [out], {"fused_activation_function": "NONE"})
    return b.finish([x], [out])


def _pruned(b: TFLiteBuilder, shape: Sequence[int], fan_in: int, keep: float, block: int = 1) -> np.ndarray:
    w = _he(b, shape, fan_in)
    mask = b.rng.random((*shape[:-1], shape[-1] // block)) < keep
    return w * np.repeat(mask, block, axis=-1)


def sparse_weights(seed: int = 0) -> bytes:
    """Conv weights (CSR on the input channels), FC weights (CSR, uint8 indices) and FC weights in
    1x4 blocks (uint16 indices), each sparse constant behind a DENSIFY."""
    b = TFLiteBuilder(seed)
    x = b.add_tensor("input", (1, 6, 6, 4))

    def sparse(name: str, dense_value: np.ndarray, block: int = 1, index_dtype: type = np.int32) -> int:
        values, spec = sparsify(dense_value, block, index_dtype)
        stored = b.add_tensor(f"{name}/sparse", dense_value.shape, data=values, sparsity=spec)
        out = b.add_tensor(name, dense_value.shape)
        b.add_op("DENSIFY", [stored], [out])
        return out

    w = sparse("conv/weights", _pruned(b, (8, 3, 3, 4), 36, 0.5))
    y = b.add_tensor("conv", (1, 6, 6, 8))
    b.add_op("CONV_2D", [x, w, b.const("conv/bias", _bias(b, 8))], [y],
             {"padding": "SAME", "stride_h": 1, "stride_w": 1, "fused_activation_function": "RELU"})
    pooled = b.add_tensor("mean", (1, 8))
    b.add_op("MEAN", [y, b.const("mean/axes", np.array([1, 2], np.int32), "int32")], [pooled], {"keep_dims": False})
    y = dense(b, "fc1", pooled, 16, "RELU", sparse("fc1/weights", _pruned(b, (16, 8), 8, 0.4), 1, np.uint8))
    y = dense(b, "fc2", y, 6, "NONE", sparse("fc2/weights", _pruned(b, (6, 16), 16, 0.5, 4), 4, np.uint16))
    return b.finish([x], [y])


# --------------------------------------------------------------------------- canned quantized models


@dataclass(frozen=True)
class _QType:
    name: str
    low: int
    high: int


_QTYPES = {"int8": _QType("int8", -128, 127), "uint8": _QType("uint8", 0, 255)}


def _act_quant(q: _QType, low: float, high: float) -> Quant:
    """Affine parameters covering ``[low, high]`` (which must include 0)."""
    scale = (high - low) / (q.high - q.low)
    return Quant([scale], [int(round(q.low - low / scale))])


def _weight_quant(q: _QType, w: np.ndarray, axis: int | None) -> tuple[np.ndarray, Quant]:
    """Symmetric int8 per channel along ``axis``, or uint8 per tensor with zero point 128."""
    if axis is not None and q.name == "int8":
        other = tuple(i for i in range(w.ndim) if i != axis)
        scale = np.maximum(np.abs(w).max(axis=other), 1e-6) / 127.0
        shape = [1] * w.ndim
        shape[axis] = -1
        return np.round(w / scale.reshape(shape)).astype(np.int8), Quant(scale.tolist(), [0] * scale.size, axis)
    scale = max(float(np.abs(w).max()), 1e-6) / 127.0
    zero = 0 if q.name == "int8" else 128
    return (np.round(w / scale) + zero).astype(NUMPY_DTYPES[q.name]), Quant([scale], [zero])


def _conv_same(x: np.ndarray, w: np.ndarray, depthwise: bool) -> np.ndarray:
    """NumPy reference of a stride-1 SAME CONV_2D (OHWI) / DEPTHWISE_CONV_2D (1HWC), for calibration."""
    pad = w.shape[1] // 2
    windows = np.lib.stride_tricks.sliding_window_view(
        np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))), w.shape[1:3], axis=(1, 2))
    if depthwise:
        return np.einsum("nhwcij,ijc->nhwc", windows, w[0])
    return np.einsum("nhwcij,oijc->nhwo", windows, w)


class _QuantNet:
    """Quantized layers calibrated on a float forward pass (ranges widened by a margin)."""

    MARGIN = 1.25

    def __init__(self, b: TFLiteBuilder, q: _QType) -> None:
        self.b, self.q = b, q
        self.value: dict[int, np.ndarray] = {}  # float activations of the calibration batch
        self.quant: dict[int, Quant] = {}

    def tensor(self, name: str, value: np.ndarray, exact_range: tuple[float, float] | None = None) -> int:
        low, high = exact_range or (min(float(value.min()), 0.0) * self.MARGIN,
                                    max(float(value.max()), 0.0) * self.MARGIN)
        quant = _act_quant(self.q, low, high)
        index = self.b.add_tensor(name, (1, *value.shape[1:]), self.q.name, quant=quant)
        self.value[index], self.quant[index] = value, quant
        return index

    def weights(self, name: str, w: np.ndarray, bias: np.ndarray, x: int,
                axis: int | None) -> tuple[int, int, np.ndarray]:
        """Quantized weights and bias tensors, and the dequantized weights the layer really uses."""
        qw, wq = _weight_quant(self.q, w, axis)
        scale = np.asarray(wq.scale) * self.quant[x].scale[0]
        shape = [1] * w.ndim
        if axis is not None and len(wq.scale) > 1:
            shape[axis] = -1
        real = (qw.astype(np.float32) - np.asarray(wq.zero_point).reshape(shape)) * np.asarray(wq.scale).reshape(shape)
        bq = Quant(scale.tolist(), [0] * scale.size, 0)
        wi = self.b.add_tensor(f"{name}/weights", w.shape, self.q.name, qw, wq)
        bi = self.b.add_tensor(f"{name}/bias", bias.shape, "int32", np.round(bias / scale).astype(np.int32), bq)
        return wi, bi, real.astype(np.float32)

    def layer(self, builtin: str, name: str, x: int, w: np.ndarray, bias: np.ndarray, axis: int | None,
              options: dict, relu: bool) -> int:
        wi, bi, real = self.weights(name, w, bias, x, axis)
        if builtin == "FULLY_CONNECTED":
            value = self.value[x] @ real.T + bias
        else:
            value = _conv_same(self.value[x], real, builtin == "DEPTHWISE_CONV_2D") + bias
        y = self.tensor(name, np.maximum(value, 0.0) if relu else value)
        self.b.add_op(builtin, [x, wi, bi], [y], {**options, "fused_activation_function": "RELU" if relu else "NONE"})
        return y


def quantized_cnn(dtype: str = "int8", float_io: bool = False, seed: int = 0) -> bytes:
    """A quantized CNN: conv/relu, depthwise/relu, residual ADD, MEAN, FC -> ``logits`` [1, 5].

    int8 uses per-channel weights, uint8 per-tensor weights (zero point 128); activation ranges come
    from a float forward pass over inputs in [-1, 1.5] (so the input zero point is not 0). The graph
    input and output are quantized tensors, or with ``float_io`` float32 tensors behind
    QUANTIZE/DEQUANTIZE.
    """
    b, q = TFLiteBuilder(seed), _QTYPES[dtype]
    net = _QuantNet(b, q)
    calibration = b.rng.uniform(-1.0, 1.5, size=(16, 8, 8, 3)).astype(np.float32)
    x = net.tensor("input/q" if float_io else "input", calibration, (-1.0, 1.5))
    first = x
    if float_io:
        first = b.add_tensor("input", (1, 8, 8, 3))
        b.add_op("QUANTIZE", [first], [x])
    same = {"padding": "SAME", "stride_h": 1, "stride_w": 1}
    c1 = net.layer("CONV_2D", "conv1", x, _he(b, (8, 3, 3, 3), 27), _bias(b, 8), 0, same, True)
    dw = net.layer("DEPTHWISE_CONV_2D", "dw", c1, _he(b, (1, 3, 3, 8), 9), _bias(b, 8), 3,
                   {**same, "depth_multiplier": 1}, True)
    total = net.tensor("add", net.value[c1] + net.value[dw])
    b.add_op("ADD", [c1, dw], [total], {"fused_activation_function": "NONE"})
    pooled = net.tensor("mean", net.value[total].mean(axis=(1, 2)))
    b.add_op("MEAN", [total, b.const("mean/axes", np.array([1, 2], np.int32), "int32")], [pooled],
             {"keep_dims": False})
    logits = net.layer("FULLY_CONNECTED", "logits/q" if float_io else "logits", pooled, _he(b, (5, 8), 8),
                       _bias(b, 5), None, {}, False)
    if not float_io:
        return b.finish([x], [logits])
    out = b.add_tensor("logits", (1, 5))
    b.add_op("DEQUANTIZE", [logits], [out])
    return b.finish([first], [out])


CANNED: dict[str, Callable[[], bytes]] = {
    "mobilenet_like": mobilenet_like,
    "detection_head": detection_head,
    "fp16_weights": fp16_weights,
    "sparse_weights": sparse_weights,
    "int8_cnn": lambda: quantized_cnn("int8"),
    "uint8_cnn": lambda: quantized_cnn("uint8"),
    "int8_float_io": lambda: quantized_cnn("int8", float_io=True),
}


# --------------------------------------------------------------------------- custom operators


MEDIAPIPE_PADDING = {"SAME": 1, "VALID": 2}  # the C API's TfLitePadding


def transpose_conv_params(padding: str, stride_h: int, stride_w: int) -> bytes:
    """Custom options of MediaPipe's ``Convolution2DTransposeBias``: a raw ``TfLiteTransposeConvParams``
    (int32 padding, stride_width, stride_height), not a flexbuffer."""
    return np.asarray([MEDIAPIPE_PADDING[padding], stride_w, stride_h], "<i4").tobytes()
