"""Weighted layers: CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED, BATCH_MATMUL, and MediaPipe's custom
``Convolution2DTransposeBias``.

Convolutions run channel-first between ``T/nchw_in`` and ``T/nhwc`` Transposes, with filters permuted
once into ONNX order and TFLite's SAME/VALID padding written out as explicit (possibly asymmetric)
``pads``. The main node (Conv, ConvTranspose, Gemm) is named after the TFLite output tensor.
"""

from __future__ import annotations

import struct

import numpy as np

from accelbuild.frontends.tflite import layout
from accelbuild.frontends.tflite.graph import ACTIVATIONS, Graph
from accelbuild.frontends.tflite.ops.base import (
    OK,
    Check,
    Result,
    activation,
    const_inputs,
    fail,
    float_inputs,
    input_count,
    output_shape,
    padding_known,
    positive_options,
    register,
    register_custom,
)
from accelbuild.frontends.tflite.reader import Operator
from accelbuild.frontends.tflite.tensors import numel

PADDING = {0: "SAME", 1: "VALID"}
_CONV_OPTIONS = ("stride_h", "stride_w", "dilation_h_factor", "dilation_w_factor")


def _bias(g: Graph, op: Operator, k: int, channels: int) -> Result:
    if k < len(op.inputs) and op.inputs[k] >= 0 and g.shape(op.inputs[k]) != (channels,):
        return fail(f"bias shape {list(g.shape(op.inputs[k]))} is not [{channels}]")
    return OK


def _bias_input(g: Graph, op: Operator, k: int) -> list[str]:
    return [g.value(op.inputs[k])] if k < len(op.inputs) and op.inputs[k] >= 0 else []


def _conv_geometry(g: Graph, op: Operator) -> Result:
    x, w = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    if len(x) != 4 or len(w) != 4:
        return fail(f"input {list(x)} and filter {list(w)} must both be 4-D")
    if x[3] % w[3] or w[0] % (x[3] // w[3]):
        return fail(f"input channels {x[3]} and filter {list(w)} do not form whole groups")
    return _bias(g, op, 2, w[0])


def _strides(op: Operator) -> tuple[list[int], list[int]]:
    o = op.options
    return [o.get("stride_h", 1), o.get("stride_w", 1)], [o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1)]


def _conv_out(g: Graph, op: Operator) -> tuple[int, ...]:
    x, w = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    padding = PADDING[op.options.get("padding", 0)]
    (sh, sw), (dh, dw) = _strides(op)
    channels = w[3] if op.name == "DEPTHWISE_CONV_2D" else w[0]
    return (x[0], layout.conv_output_size(padding, x[1], w[1], sh, dh),
            layout.conv_output_size(padding, x[2], w[2], sw, dw), channels)


CONV_OUT = output_shape(_conv_out, "output shape follows from padding, strides and dilations")


@register("CONV_2D", "Conv (channel-first; grouped when the filter has fewer input channels)",
          input_count(2, 3), const_inputs(1, 2, what="filter and bias"), float_inputs(1, 2, what="filter and bias"),
          padding_known(), positive_options(*_CONV_OPTIONS),
          Check("4-D input and OHWI filter; input channels a multiple of the filter's; bias [out]",
                _conv_geometry), CONV_OUT)
def conv_2d(g: Graph, op: Operator) -> None:
    """OHWI filter -> OIHW initializer ``W/oihw``; group = input channels / filter input channels."""
    x, w = op.inputs[0], op.inputs[1]
    _, kh, kw, cin = g.shape(w)
    strides, dilations = _strides(op)
    pads = layout.onnx_pads(PADDING[op.options.get("padding", 0)], g.shape(x)[1:3], (kh, kw), strides, dilations)
    inputs = [g.to_nchw(op, g.value(x)), g.derived(w, "oihw", layout.ohwi_to_oihw), *_bias_input(g, op, 2)]
    g.emit(op, "Conv", inputs, act=activation(op), tail=("nhwc", None), kernel_shape=[kh, kw],
           strides=strides, dilations=dilations, pads=pads, group=g.shape(x)[3] // cin)


def _depthwise_geometry(g: Graph, op: Operator) -> Result:
    x, w = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    if len(x) != 4 or len(w) != 4 or w[0] != 1:
        return fail(f"input {list(x)} must be 4-D and the filter {list(w)} [1, kh, kw, C*M]")
    if w[3] % x[3]:
        return fail(f"filter channels {w[3]} are not a multiple of the input channels {x[3]}")
    return _bias(g, op, 2, w[3])


@register("DEPTHWISE_CONV_2D", "Conv with group = input channels (channel-first)",
          input_count(2, 3), const_inputs(1, 2, what="filter and bias"), float_inputs(1, 2, what="filter and bias"),
          padding_known(), positive_options(*_CONV_OPTIONS),
          Check("4-D input, [1, kh, kw, C*M] filter, bias [C*M]", _depthwise_geometry), CONV_OUT)
def depthwise_conv_2d(g: Graph, op: Operator) -> None:
    """``[1, kh, kw, C*M]`` -> ``[C*M, 1, kh, kw]`` with group C (output channel c*M+m reads channel c)."""
    x, w = op.inputs[0], op.inputs[1]
    kernel = list(g.shape(w)[1:3])
    strides, dilations = _strides(op)
    pads = layout.onnx_pads(PADDING[op.options.get("padding", 0)], g.shape(x)[1:3], kernel, strides, dilations)
    inputs = [g.to_nchw(op, g.value(x)), g.derived(w, "oihw", layout.depthwise_to_oihw), *_bias_input(g, op, 2)]
    g.emit(op, "Conv", inputs, act=activation(op), tail=("nhwc", None), kernel_shape=kernel,
           strides=strides, dilations=dilations, pads=pads, group=g.shape(x)[3])


def _transpose_conv_geometry(g: Graph, op: Operator) -> Result:
    shape_value, w, x = g.const(op.inputs[0]), g.shape(op.inputs[1]), g.shape(op.inputs[2])
    out = g.shape(op.outputs[0])
    if len(w) != 4 or len(x) != 4 or x[3] != w[3]:
        return fail(f"input {list(x)} and OHWI filter {list(w)} must be 4-D with matching input channels")
    if shape_value is None or [int(v) for v in shape_value.reshape(-1)] != list(out) or out[3] != w[0] \
            or out[0] != x[0]:
        return fail(f"output_shape input does not match the output tensor {list(out)} and filter")
    padding = PADDING[op.options.get("padding", 0)]
    strides = (op.options.get("stride_h", 1), op.options.get("stride_w", 1))
    if any(layout.conv_output_size(padding, o, k, s) != i for o, k, s, i in zip(out[1:3], w[1:3], strides, x[1:3])):
        return fail(f"output {list(out)} is not what a {padding} convolution maps back onto the input {list(x)}")
    return _bias(g, op, 3, w[0])


@register("TRANSPOSE_CONV", "ConvTranspose (channel-first; explicit pads and output_padding)",
          input_count(3, 4), const_inputs(0, 1, 3, what="output_shape, filter and bias"),
          float_inputs(1, 3, what="filter and bias"), padding_known(),
          positive_options("stride_h", "stride_w"),
          Check("output_shape equals the output tensor's shape and a convolution with the same padding and "
                "strides maps it back onto the input; 4-D input and OHWI filter; bias [out]",
                _transpose_conv_geometry))
def transpose_conv(g: Graph, op: Operator) -> None:
    """TFLite's padding is computed from the *output* size (as for the forward convolution)."""
    strides = [op.options.get("stride_h", 1), op.options.get("stride_w", 1)]
    _emit_conv_transpose(g, op, 2, 1, 3, PADDING[op.options.get("padding", 0)], strides, activation(op))


def _emit_conv_transpose(g: Graph, op: Operator, x: int, w: int, bias: int, padding: str, strides: list[int],
                         act: str) -> None:
    """ConvTranspose of input ``x`` with OHWI filter ``w`` (and bias ``bias``, positions in ``op.inputs``),
    cropped or extended to the output tensor's size with TFLite's ``padding`` placement."""
    kernel = list(g.shape(op.inputs[w])[1:3])
    in_hw, out_hw = g.shape(op.inputs[x])[1:3], g.shape(op.outputs[0])[1:3]
    pads, extra = _transpose_pads(padding, in_hw, out_hw, kernel, strides)
    inputs = [g.to_nchw(op, g.value(op.inputs[x])), g.derived(op.inputs[w], "iohw", layout.ohwi_to_iohw),
              *_bias_input(g, op, bias)]
    g.emit(op, "ConvTranspose", inputs, act=act, tail=("nhwc", None), kernel_shape=kernel,
           strides=strides, pads=pads, output_padding=extra)


def _transpose_pads(padding: str, in_hw: tuple, out_hw: tuple, kernel: list[int],
                    strides: list[int]) -> tuple[list[int], list[int]]:
    """``pads`` and ``output_padding`` making ConvTranspose crop/extend to exactly ``out_hw``."""
    begins, ends, extra = [], [], []
    for size_in, size_out, k, s in zip(in_hw, out_hw, kernel, strides):
        before = layout.onnx_pads(padding, (size_out,) * 2, (k, k), (s, s))[0]
        after = s * (size_in - 1) + k - before - size_out
        begins.append(before)
        ends.append(max(after, 0))
        extra.append(max(-after, 0))
    return begins + ends, extra


# ---------------------------------------------------------------- MediaPipe Convolution2DTransposeBias
#
# MediaPipe's custom TRANSPOSE_CONV with a bias input (mediapipe/util/tflite/operations/
# transpose_conv_bias.cc): inputs 0 = input NHWC, 1 = OHWI filter, 2 = bias [out]; its custom options are
# a raw TfLiteTransposeConvParams struct (int32 padding, stride_width, stride_height; later fields of newer
# TFLite versions are ignored, as the kernel ignores them). The kernel derives the output size itself:
# per spatial axis, with crop P = max(0, k - (in - 1) % s - 1) for SAME (kTfLitePaddingSame) and 0
# otherwise, out = s * (in - 1) + k - P (so in * s when in is a multiple of s and k >= s), and the full
# transposed convolution is cropped by P // 2 at the start and the rest at the end, then the bias added.
# This equals TRANSPOSE_CONV with output_shape = that size and the same padding (its SAME padding,
# computed from the output size, puts the same P // 2 first because ceil(out / s) = in), so the converter
# reuses the TRANSPOSE_CONV path above.

MEDIAPIPE_TRANSPOSE_CONV = "Convolution2DTransposeBias"
_TFLITE_PADDING = {1: "SAME", 2: "VALID"}  # the C API's TfLitePadding (0 is kTfLitePaddingUnknown)
_PARAMS = struct.Struct("<3i")


def _params(op: Operator) -> tuple[str, list[int]]:
    """``(padding, [stride_h, stride_w])`` from the custom options (checked by ``_params_valid``)."""
    padding, stride_w, stride_h = _PARAMS.unpack_from(op.custom_options)
    return _TFLITE_PADDING[padding], [stride_h, stride_w]


def _params_valid(g: Graph, op: Operator) -> Result:
    if len(op.custom_options) < _PARAMS.size:
        return fail(f"custom options hold {len(op.custom_options)} bytes, expected a {_PARAMS.size}-byte "
                    "TfLiteTransposeConvParams")
    padding, stride_w, stride_h = _PARAMS.unpack_from(op.custom_options)
    if padding not in _TFLITE_PADDING:
        return fail(f"padding {padding} is not SAME (1) or VALID (2)")
    if stride_w < 1 or stride_h < 1:
        return fail(f"strides {stride_h}x{stride_w} (height x width) are not >= 1")
    return OK


def _float32_data(g: Graph, op: Operator) -> Result:
    for index in (*op.inputs, *op.outputs):
        if g.tensor(index).dtype != "FLOAT32":
            return fail(f"{g.names[index]!r} is a {g.tensor(index).dtype} tensor, and the MediaPipe kernel runs "
                        "float32 only")
    return OK


def _mediapipe_geometry(g: Graph, op: Operator) -> Result:
    x, w = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    if len(w) != 4 or len(x) != 4 or x[3] != w[3]:
        return fail(f"input {list(x)} and OHWI filter {list(w)} must be 4-D with matching input channels")
    return _bias(g, op, 2, w[0])


def _mediapipe_out(g: Graph, op: Operator) -> tuple[int, ...]:
    """The output shape the MediaPipe kernel's Prepare computes."""
    x, w = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    padding, strides = _params(op)
    hw = []
    for size, k, s in zip(x[1:3], w[1:3], strides):
        crop = max(0, k - (size - 1) % s - 1) if padding == "SAME" else 0
        hw.append(s * (size - 1) + k - crop)
    return (x[0], *hw, w[0])


@register_custom(MEDIAPIPE_TRANSPOSE_CONV,
                 "ConvTranspose with bias (channel-first; explicit pads), as TRANSPOSE_CONV (MediaPipe's "
                 "transposed convolution with bias)",
                 input_count(3),
                 Check("custom options: a TfLiteTransposeConvParams struct (int32 padding SAME = 1 or VALID = 2, "
                       "stride_width, stride_height >= 1)", _params_valid),
                 const_inputs(1, 2, what="filter and bias"),
                 Check("input, filter, bias and output are float32 (float16 or quantized weights behind a "
                       "folded DEQUANTIZE count as float32)", _float32_data),
                 Check("4-D input and OHWI filter with matching input channels; bias [out]", _mediapipe_geometry),
                 output_shape(_mediapipe_out, "output shape is the kernel's: per axis s * (in - 1) + k - P, "
                                              "P = max(0, k - (in - 1) % s - 1) for SAME, 0 for VALID"))
def convolution_2d_transpose_bias(g: Graph, op: Operator) -> None:
    """Input 0, OHWI filter 1, bias 2; padding and strides from the custom options."""
    padding, strides = _params(op)
    _emit_conv_transpose(g, op, 0, 1, 2, padding, strides, "NONE")


def _fc_geometry(g: Graph, op: Operator) -> Result:
    x, w, out = g.shape(op.inputs[0]), g.shape(op.inputs[1]), g.shape(op.outputs[0])
    if len(w) != 2 or not x or numel(x) % w[1]:
        return fail(f"input {list(x)} cannot be flattened to rows of the filter's {list(w)[1:]} inputs")
    if numel(out) != numel(x) // w[1] * w[0] or out[-1] != w[0]:
        return fail(f"output {list(out)} does not hold {numel(x) // w[1]} rows of {w[0]}")
    if op.options.get("weights_format", 0) != 0:
        return fail("shuffled weights format")
    act = ACTIVATIONS.get(op.options.get("fused_activation_function", 0))
    if act in ("TANH", "SIGN_BIT"):
        return fail(f"fused activation {act}, which the TFLite interpreter rejects on FULLY_CONNECTED")
    return _bias(g, op, 2, w[0])


@register("FULLY_CONNECTED", "Gemm (transB=1), with Reshapes when the input or output is not 2-D",
          input_count(2, 3), const_inputs(1, 2, what="weights and bias"), float_inputs(1, 2, what="weights and bias"),
          Check("2-D [out, in] weights in the DEFAULT format; input flattens to rows of `in`; bias [out]; "
                "fused activation not TANH or SIGN_BIT",
                _fc_geometry))
def fully_connected(g: Graph, op: Operator) -> None:
    """``Reshape(-1, in)`` (``T/flat``) -> Gemm (named T) -> Reshape to the output shape if not 2-D."""
    name, x = g.name(op), g.value(op.inputs[0])
    x_shape, width = g.shape(op.inputs[0]), g.shape(op.inputs[1])[1]
    if len(x_shape) != 2:
        flat = g.fresh(f"{name}/flat")
        g.node("Reshape", [x, g.ints(f"{name}/flat_shape", [-1, width])], [flat], flat)
        x = flat
    out_shape = g.shape(op.outputs[0])
    tail = None if len(out_shape) == 2 else ("reshape", (out_shape, "2d"))
    g.emit(op, "Gemm", [x, g.value(op.inputs[1]), *_bias_input(g, op, 2)], act=activation(op), tail=tail,
           transB=1)


def _batch_matmul_shape(g: Graph, op: Operator) -> tuple[int, ...]:
    """``[..., M, K] x [..., K, N] -> [..., M, N]`` after ``adj_x`` / ``adj_y``, batch dimensions broadcast."""
    x, y = list(g.shape(op.inputs[0])), list(g.shape(op.inputs[1]))
    if len(x) < 2 or len(y) < 2:
        return ()
    if op.options.get("adj_x"):
        x[-2:] = x[-1], x[-2]
    if op.options.get("adj_y"):
        y[-2:] = y[-1], y[-2]
    if x[-1] != y[-2]:
        return ()
    try:
        batch = np.broadcast_shapes(tuple(x[:-2]), tuple(y[:-2]))
    except ValueError:
        return ()
    return (*batch, x[-2], y[-1])


@register("BATCH_MATMUL", "MatMul, each operand behind a Transpose of its last two axes when adj_x / adj_y",
          input_count(2), float_inputs(0, 1, what="operands"),
          output_shape(_batch_matmul_shape, "rank >= 2 operands whose inner dimensions agree after adj_x / adj_y; "
                                            "batch dimensions broadcast"))
def batch_matmul(g: Graph, op: Operator) -> None:
    """``T/adj_x`` and ``T/adj_y`` Transposes where asked, then MatMul (named T)."""
    name, operands = g.name(op), []
    for k, flag in ((0, "adj_x"), (1, "adj_y")):
        value = g.value(op.inputs[k])
        if op.options.get(flag):
            rank = len(g.shape(op.inputs[k]))
            swapped = g.fresh(f"{name}/{flag}")
            g.nodes.append(layout.transpose_node(swapped, value, swapped, (*range(rank - 2), rank - 1, rank - 2)))
            value = swapped
        operands.append(value)
    g.emit(op, "MatMul", operands)
