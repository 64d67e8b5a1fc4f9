"""CONV_3D and CONV_3D_TRANSPOSE: channel-last ``[N, D, H, W, C]`` convolutions with ``[kd, kh, kw, in, out]``
filters (``[kd, kh, kw, out, in]`` for the transpose), as ONNX Conv / ConvTranspose on ``[N, C, D, H, W]``
between two Transposes (node ``T`` is the convolution, ``T/ncdhw_in`` and ``T/ndhwc`` the Transposes).
"""

from __future__ import annotations

import numpy as np

from accelbuild.frontends.tflite import layout
from accelbuild.frontends.tflite.graph import Graph
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
)
from accelbuild.frontends.tflite.ops.conv import PADDING, _transpose_pads
from accelbuild.frontends.tflite.reader import Operator

_AXES = ("d", "h", "w")
_OPTIONS = tuple(f"stride_{a}" for a in _AXES) + tuple(f"dilation_{a}_factor" for a in _AXES)


def _geometry(g: Graph, op: Operator) -> Result:
    x, w = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    if len(x) != 5 or len(w) != 5 or x[4] != w[3]:
        return fail(f"input {list(x)} and filter {list(w)} must be 5-D with matching input channels")
    if len(op.inputs) > 2 and op.inputs[2] >= 0 and g.shape(op.inputs[2]) != (w[4],):
        return fail(f"bias shape {list(g.shape(op.inputs[2]))} is not [{w[4]}]")
    return OK


def _strides(op: Operator) -> tuple[list[int], list[int]]:
    o = op.options
    return [o.get(f"stride_{a}", 1) for a in _AXES], [o.get(f"dilation_{a}_factor", 1) for a in _AXES]


def _out(g: Graph, op: Operator) -> tuple[int, ...]:
    x, w = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    padding = PADDING[op.options.get("padding", 0)]
    strides, dilations = _strides(op)
    return (x[0], *(layout.conv_output_size(padding, size, k, s, d)
                    for size, k, s, d in zip(x[1:4], w[:3], strides, dilations)), w[4])


@register("CONV_3D", "Conv on [N, C, D, H, W] between Transposes", input_count(2, 3),
          const_inputs(1, 2, what="filter and bias"), float_inputs(1, 2, what="filter and bias"), padding_known(),
          positive_options(*_OPTIONS), Check("5-D input and [kd, kh, kw, in, out] filter; bias [out]", _geometry),
          output_shape(_out, "output shape follows from padding, strides and dilations"))
def conv_3d(g: Graph, op: Operator) -> None:
    base, x, w = g.name(op), op.inputs[0], op.inputs[1]
    strides, dilations = _strides(op)
    padding = PADDING[op.options.get("padding", 0)]
    pairs = [layout.same_padding(size, k, s, d) if padding == "SAME" else (0, 0)
             for size, k, s, d in zip(g.shape(x)[1:4], g.shape(w)[:3], strides, dilations)]
    first = g.fresh(f"{base}/ncdhw_in")
    g.nodes.append(layout.transpose_node(first, g.value(x), first, (0, 4, 1, 2, 3)))
    weights = g.derived(w, "oidhw", lambda v: np.ascontiguousarray(v.transpose(4, 3, 0, 1, 2)))
    bias = [g.value(op.inputs[2])] if len(op.inputs) > 2 and op.inputs[2] >= 0 else []
    result = g.fresh(f"{base}/ncdhw")
    act = activation(op)
    conv_out = result if act == "NONE" else g.fresh(f"{base}/ncdhw_pre")
    g.node("Conv", [first, weights, *bias], [conv_out], base, kernel_shape=list(g.shape(w)[:3]), strides=strides,
           dilations=dilations, pads=[p[0] for p in pairs] + [p[1] for p in pairs])
    if act != "NONE":
        g.activation(g.fresh(f"{base}/act"), act, conv_out, result)
    g.nodes.append(layout.transpose_node(g.fresh(f"{base}/ndhwc"), result, g.out(op), (0, 2, 3, 4, 1)))


def _transpose_geometry(g: Graph, op: Operator) -> Result:
    shape_value, w, x = g.const_value(op.inputs[0]), g.shape(op.inputs[1]), g.shape(op.inputs[2])
    out = g.shape(op.outputs[0])
    if len(w) != 5 or len(x) != 5 or x[4] != w[4] or len(out) != 5 or out[4] != w[3] or out[0] != x[0]:
        return fail(f"input {list(x)}, filter {list(w)} and output {list(out)} are not 5-D with matching channels")
    if [int(v) for v in shape_value.reshape(-1)] != list(out):
        return fail(f"output_shape {shape_value.tolist()} differs from the output tensor {list(out)}")
    strides, dilations = _strides(op)
    padding = PADDING[op.options.get("padding", 0)]
    if dilations != [1, 1, 1]:
        return fail(f"dilations {dilations}")
    if any(layout.conv_output_size(padding, o, k, s) != i for o, k, s, i in zip(out[1:4], w[:3], strides, x[1:4])):
        return fail(f"output {list(out)} is not what a {padding} convolution maps back onto the input {list(x)}")
    if len(op.inputs) > 3 and op.inputs[3] >= 0 and g.shape(op.inputs[3]) != (w[3],):
        return fail(f"bias shape {list(g.shape(op.inputs[3]))} is not [{w[3]}]")
    return OK


@register("CONV_3D_TRANSPOSE", "ConvTranspose on [N, C, D, H, W] between Transposes (explicit pads)",
          input_count(3, 4), const_inputs(0, 1, 3, what="output_shape, filter and bias"),
          float_inputs(1, 3, what="filter and bias"), padding_known(), positive_options(*_OPTIONS),
          Check("output_shape equals the output tensor and a convolution with the same padding and strides maps "
                "it back onto the input; [kd, kh, kw, out, in] filter; no dilation; bias [out]", _transpose_geometry))
def conv_3d_transpose(g: Graph, op: Operator) -> None:
    base, w, x = g.name(op), op.inputs[1], op.inputs[2]
    strides, _ = _strides(op)
    kernel = list(g.shape(w)[:3])
    pads, extra = _transpose_pads(PADDING[op.options.get("padding", 0)], g.shape(x)[1:4],
                                  g.shape(op.outputs[0])[1:4], kernel, strides)
    first = g.fresh(f"{base}/ncdhw_in")
    g.nodes.append(layout.transpose_node(first, g.value(x), first, (0, 4, 1, 2, 3)))
    weights = g.derived(w, "iodhw", lambda v: np.ascontiguousarray(v.transpose(4, 3, 0, 1, 2)))
    bias = [g.value(op.inputs[3])] if len(op.inputs) > 3 and op.inputs[3] >= 0 else []
    result = g.fresh(f"{base}/ncdhw")
    act = activation(op)
    conv_out = result if act == "NONE" else g.fresh(f"{base}/ncdhw_pre")
    g.node("ConvTranspose", [first, weights, *bias], [conv_out], base, kernel_shape=kernel, strides=strides,
           pads=pads, output_padding=extra)
    if act != "NONE":
        g.activation(g.fresh(f"{base}/act"), act, conv_out, result)
    g.nodes.append(layout.transpose_node(g.fresh(f"{base}/ndhwc"), result, g.out(op), (0, 2, 3, 4, 1)))
