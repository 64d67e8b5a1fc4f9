"""Channel-first spatial ops: pooling (incl. L2 and REDUCE_WINDOW), resizing, DEPTH_TO_SPACE, SPACE_TO_DEPTH
and LRN.

Each runs between ``T/nchw_in`` and ``T/nhwc`` Transposes; the coordinate rules of TFLite's resize
kernels are mapped onto ONNX Resize's ``coordinate_transformation_mode`` and ``nearest_mode``.
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
    input_count,
    input_rank,
    output_shape,
    padding_known,
    positive_options,
    register,
)
from accelbuild.frontends.tflite.ops.conv import PADDING
from accelbuild.frontends.tflite.reader import Operator

_POOL_OPTIONS = ("stride_h", "stride_w", "filter_height", "filter_width")


def _pool(g: Graph, op: Operator, op_type: str, **extra: int) -> None:
    o = op.options
    kernel = [o.get("filter_height", 1), o.get("filter_width", 1)]
    strides = [o.get("stride_h", 1), o.get("stride_w", 1)]
    pads = layout.onnx_pads(PADDING[o.get("padding", 0)], g.shape(op.inputs[0])[1:3], kernel, strides)
    g.emit(op, op_type, [g.to_nchw(op, g.value(op.inputs[0]))], act=activation(op), tail=("nhwc", None),
           kernel_shape=kernel, strides=strides, pads=pads, **extra)


def _pool_out(g: Graph, op: Operator) -> tuple[int, ...]:
    n, h, w, c = g.shape(op.inputs[0])
    o, padding = op.options, PADDING[op.options.get("padding", 0)]
    return (n, layout.conv_output_size(padding, h, o.get("filter_height", 1), o.get("stride_h", 1)),
            layout.conv_output_size(padding, w, o.get("filter_width", 1), o.get("stride_w", 1)), c)


_POOL_CHECKS = (input_count(1), input_rank(0, 4), padding_known(), positive_options(*_POOL_OPTIONS),
                output_shape(_pool_out, "output shape follows from padding, window and strides"))


@register("MAX_POOL_2D", "MaxPool (channel-first, explicit pads)", *_POOL_CHECKS)
def max_pool_2d(g: Graph, op: Operator) -> None:
    _pool(g, op, "MaxPool")


@register("AVERAGE_POOL_2D", "AveragePool (channel-first, explicit pads, count_include_pad=0)", *_POOL_CHECKS)
def average_pool_2d(g: Graph, op: Operator) -> None:
    """TFLite averages over the window's in-bounds pixels only, hence ``count_include_pad=0``."""
    _pool(g, op, "AveragePool", count_include_pad=0)


def _resize_flags(g: Graph, op: Operator) -> Result:
    if op.options.get("align_corners") and op.options.get("half_pixel_centers"):
        return fail("align_corners and half_pixel_centers are both set")
    size, (n, _, _, c) = g.const(op.inputs[1]), g.shape(op.inputs[0])
    if size is None or [n, *(int(v) for v in size.reshape(-1)), c] != list(g.shape(op.outputs[0])):
        return fail(f"size input does not give the output shape {list(g.shape(op.outputs[0]))}")
    return OK


_RESIZE_CHECKS = (input_count(2), input_rank(0, 4), const_inputs(1, what="size"),
                  Check("size matches the output shape; not both align_corners and half_pixel_centers",
                        _resize_flags))


def _resize(g: Graph, op: Operator, **attrs: str) -> None:
    n, h, w, c = g.shape(op.outputs[0])
    sizes = g.ints(f"{g.name(op)}/sizes", [n, c, h, w])
    g.emit(op, "Resize", [g.to_nchw(op, g.value(op.inputs[0])), "", "", sizes], tail=("nhwc", None), **attrs)


@register("RESIZE_BILINEAR", "Resize linear (align_corners / half_pixel / asymmetric coordinates)",
          *_RESIZE_CHECKS)
def resize_bilinear(g: Graph, op: Operator) -> None:
    """TFLite clamps source coordinates to the image like ONNX Resize does."""
    mode = "align_corners" if op.options.get("align_corners") else (
        "half_pixel" if op.options.get("half_pixel_centers") else "asymmetric")
    _resize(g, op, mode="linear", coordinate_transformation_mode=mode)


@register("RESIZE_NEAREST_NEIGHBOR", "Resize nearest (floor, or round-half-up for align_corners/half pixels)",
          *_RESIZE_CHECKS)
def resize_nearest_neighbor(g: Graph, op: Operator) -> None:
    """TFLite: ``floor(x*in/out)``; align_corners: ``round(x*(in-1)/(out-1))``;
    half_pixel_centers: ``floor((x+0.5)*in/out)`` = ``round_prefer_ceil((x+0.5)*in/out - 0.5)``."""
    if op.options.get("align_corners"):
        attrs = {"coordinate_transformation_mode": "align_corners", "nearest_mode": "round_prefer_ceil"}
    elif op.options.get("half_pixel_centers"):
        attrs = {"coordinate_transformation_mode": "half_pixel", "nearest_mode": "round_prefer_ceil"}
    else:
        attrs = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    _resize(g, op, mode="nearest", **attrs)


def _block_divides(g: Graph, op: Operator) -> Result:
    x, block = g.shape(op.inputs[0]), op.options.get("block_size", 0)
    if op.name == "DEPTH_TO_SPACE" and x[3] % (block * block):
        return fail(f"channels {x[3]} are not a multiple of block_size^2 = {block * block}")
    if op.name == "SPACE_TO_DEPTH" and (x[1] % block or x[2] % block):
        return fail(f"height and width {list(x[1:3])} are not multiples of block_size {block}")
    grow = block if op.name == "DEPTH_TO_SPACE" else 1 / block
    want = (x[0], round(x[1] * grow), round(x[2] * grow), round(x[3] / grow / grow))
    return OK if want == g.shape(op.outputs[0]) else fail(f"output shape should be {list(want)}")


_BLOCK_CHECKS = (input_count(1), input_rank(0, 4), positive_options("block_size"),
                 Check("block_size divides the channels (DEPTH_TO_SPACE) or height and width (SPACE_TO_DEPTH); "
                       "output shape matches",
                       _block_divides))


@register("DEPTH_TO_SPACE", "DepthToSpace mode DCR (channel-first)", *_BLOCK_CHECKS)
def depth_to_space(g: Graph, op: Operator) -> None:
    """TFLite's channel order ``(i*bs + j)*C + c`` is ONNX's DCR mode."""
    g.emit(op, "DepthToSpace", [g.to_nchw(op, g.value(op.inputs[0]))], tail=("nhwc", None),
           blocksize=op.options["block_size"], mode="DCR")


@register("SPACE_TO_DEPTH", "SpaceToDepth (channel-first)", *_BLOCK_CHECKS)
def space_to_depth(g: Graph, op: Operator) -> None:
    g.emit(op, "SpaceToDepth", [g.to_nchw(op, g.value(op.inputs[0]))], tail=("nhwc", None),
           blocksize=op.options["block_size"])


@register("L2_POOL_2D", "Sqrt of AveragePool of the squares (in-bounds pixels only, channel-first)", *_POOL_CHECKS)
def l2_pool_2d(g: Graph, op: Operator) -> None:
    """TFLite's ``sqrt(sum(x^2) / count)`` over each window's in-bounds pixels."""
    o, x = op.options, g.value(op.inputs[0])
    kernel = [o.get("filter_height", 1), o.get("filter_width", 1)]
    strides = [o.get("stride_h", 1), o.get("stride_w", 1)]
    pads = layout.onnx_pads(PADDING[o.get("padding", 0)], g.shape(op.inputs[0])[1:3], kernel, strides)
    squares, pooled = g.fresh(f"{g.name(op)}/squares"), g.fresh(f"{g.name(op)}/pooled")
    g.node("Mul", [x, x], [squares], squares)
    g.node("AveragePool", [g.to_nchw(op, squares)], [pooled], pooled, kernel_shape=kernel, strides=strides,
           pads=pads, count_include_pad=0)
    g.emit(op, "Sqrt", [pooled], act=activation(op), tail=("nhwc", None))


@register("LOCAL_RESPONSE_NORMALIZATION", "LRN over channels (size 2 * radius + 1, alpha scaled by the size)",
          input_count(1), input_rank(0, 4), output_shape(lambda g, op: g.shape(op.inputs[0]),
                                                         "output shape equals the input shape"))
def local_response_normalization(g: Graph, op: Operator) -> None:
    """TFLite divides by ``(bias + alpha * sum)^beta``, ONNX by ``(bias + alpha / size * sum)^beta``."""
    o = op.options
    size = 2 * int(o.get("radius", 5)) + 1
    g.emit(op, "LRN", [g.to_nchw(op, g.value(op.inputs[0]))], tail=("nhwc", None), size=size,
           alpha=float(o.get("alpha", 1.0)) * size, beta=float(o.get("beta", 0.5)), bias=float(o.get("bias", 1.0)))


_WINDOW_FUNCTIONS = {1: "ADD", 3: "MINIMUM", 4: "MAXIMUM"}  # tflite.ReduceWindowFunction values converted


def _window(g: Graph, op: Operator) -> tuple[list[int], list[int], list[int]]:
    window, strides, dilations = ([int(v) for v in g.const_value(op.inputs[k]).reshape(-1)] for k in (2, 3, 4))
    return window, strides, dilations


def _reduce_window_geometry(g: Graph, op: Operator) -> Result:
    shape = g.shape(op.inputs[0])
    function = op.options.get("reduce_function", 0)
    if function not in _WINDOW_FUNCTIONS or g.tensor(op.inputs[0]).dtype != "FLOAT32":
        return fail(f"reduce_function {function} on {g.tensor(op.inputs[0]).dtype}, expected ADD, MINIMUM or "
                    "MAXIMUM on float32")
    window, strides, dilations = _window(g, op)
    if not len(window) == len(strides) == len(dilations) == len(shape) or min(window + strides + dilations) < 1:
        return fail(f"window {window}, strides {strides}, dilations {dilations} for rank {len(shape)}")
    moving = [a for a in range(len(shape)) if (window[a], strides[a]) != (1, 1)]
    if len(moving) > 3 or len(shape) > 4 or (len(shape) == 4 and 0 in moving):
        return fail(f"windows over axes {moving} of a rank-{len(shape)} input (at most 3 axes after the first)")
    want = tuple((d - (w - 1) * r - 1) // s + 1 for d, w, s, r in zip(shape, window, strides, dilations))
    if g.shape(op.inputs[1]) not in ((), (1,)) or g.shape(op.outputs[0]) != want:
        return fail(f"output shape {list(g.shape(op.outputs[0]))} should be {list(want)} (and a scalar init value)")
    return OK


@register("REDUCE_WINDOW", "MaxPool (MAXIMUM, MINIMUM on the negation) or a Conv with ones (ADD) on [batch, 1, "
                           "window axes], then the init value", input_count(5),
          const_inputs(2, 3, 4, what="window dimensions, strides and dilations"),
          Check("ADD, MINIMUM or MAXIMUM on float32; windows over at most 3 axes (after the first of a 4-D "
                "input); output shape matches", _reduce_window_geometry))
def reduce_window(g: Graph, op: Operator) -> None:
    name, shape = g.name(op), list(g.shape(op.inputs[0]))
    window, strides, dilations = _window(g, op)
    batched = len(shape) == 4
    spatial = list(range(1, 4)) if batched else list(range(len(shape)))
    lead = [shape[0], 1] if batched else [1, 1]
    function = _WINDOW_FUNCTIONS[op.options["reduce_function"]]
    grid = g.fresh(f"{name}/grid")
    g.node("Reshape", [g.value(op.inputs[0]), g.ints(f"{grid}/shape", lead + [shape[a] for a in spatial])], [grid],
           grid)
    attrs = {"kernel_shape": [window[a] for a in spatial], "strides": [strides[a] for a in spatial],
             "dilations": [dilations[a] for a in spatial]}
    pooled = g.fresh(f"{name}/pooled")
    if function == "ADD":
        ones = g.add_const(f"{name}/ones", np.ones([1, 1, *attrs["kernel_shape"]], np.float32))
        g.node("Conv", [grid, ones], [pooled], pooled, **attrs)
    elif function == "MAXIMUM":
        g.node("MaxPool", [grid], [pooled], pooled, **attrs)
    else:
        negated, maxed = g.fresh(f"{name}/negated"), g.fresh(f"{name}/maxed")
        g.node("Neg", [grid], [negated], negated)
        g.node("MaxPool", [negated], [maxed], maxed, **attrs)
        g.node("Neg", [maxed], [pooled], pooled)
    result = g.fresh(f"{name}/windows")
    g.node("Reshape", [pooled, g.ints(f"{result}/shape", g.shape(op.outputs[0]))], [result], result)
    init = g.fresh(f"{name}/init")
    g.node("Reshape", [g.value(op.inputs[1]), g.ints(f"{init}/shape", [])], [init], init)
    g.emit(op, {"ADD": "Add", "MAXIMUM": "Max", "MINIMUM": "Min"}[function], [result, init])
