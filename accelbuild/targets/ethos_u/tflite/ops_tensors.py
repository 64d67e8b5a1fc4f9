"""Elementwise arithmetic, activations and data movement: Add/Sub/Mul, Relu/Clip/LeakyRelu/PRelu/Sigmoid/
Tanh/HardSwish/Softmax, Concat, Reshape/Flatten/Squeeze/Unsqueeze, Transpose, DepthToSpace, Identity, Pad,
Slice, Split."""

from __future__ import annotations

import numpy as np
import onnx

from accelbuild.quantize.qdq.rules import TFLITE_FIXED
from accelbuild.targets.ethos_u.tflite import layout
from accelbuild.targets.ethos_u.tflite.qgraph import QTensor
from accelbuild.targets.ethos_u.tflite.writer import CLIP_ACTIVATIONS, Unsupported, Writer
from accelbuild.util import onnx_graph as g
from accelbuild.util.tflite_builder import Quant

BINARY = {"Add": "ADD", "Sub": "SUB", "Mul": "MUL"}
UNARY = {"Sigmoid": "LOGISTIC", "Tanh": "TANH", "Relu": "RELU"}


def binary(w: Writer, node: onnx.NodeProto) -> None:
    fused = w.fusion(node)
    out = w.qg.tensors[fused.output]
    inputs = [w.operand(name, node, out) for name in node.input]
    options: dict = {"fused_activation_function": fused.activation}
    if node.op_type != "Mul":
        options["pot_scale_int16"] = False
    w.op(BINARY[node.op_type], inputs, [w.tensor(out)], options)
    w.done.update(fused.nodes)


def divide(w: Writer, node: onnx.NodeProto) -> None:
    """Div by a constant scalar: MUL by its reciprocal, stored exactly (one code, the scale carries it)."""
    const = w.qg.consts.get(node.input[1])
    if const is None or const.codes.size != 1:
        raise Unsupported("only division by a constant scalar (TFLite has no int8 DIV)")
    value = float((const.codes.astype(np.int64).reshape(-1)[0] - const.zero_points.reshape(-1)[0])
                  * const.scales.reshape(-1)[0])
    if value == 0.0:
        raise Unsupported("division by zero")
    fused = w.fusion(node)
    out = w.qg.tensors[fused.output]
    reciprocal = np.float32(1.0 / value)
    top = 127 if out.bits == 8 else 32767
    dtype = "int8" if out.bits == 8 else "int16"
    codes = np.full([1] * len(w.shape(out)), top if reciprocal > 0 else -top, dtype=dtype)
    operand = w.const(f"{node.name}/reciprocal", codes, dtype, Quant([float(abs(reciprocal)) / top], [0]))
    w.op("MUL", [w.operand(node.input[0], node, out), operand], [w.tensor(out)],
         {"fused_activation_function": fused.activation})
    w.done.update(fused.nodes)


def hard_sigmoid(w: Writer, node: onnx.NodeProto) -> None:
    """HardSigmoid(x) = clip(alpha x + beta, 0, 1): a 1x1 depthwise convolution with weight alpha and bias
    beta in every channel and a fused ReLU; the output's quantization (its top at most 1) clips above."""
    x, out = w.q(node.input[0]), w.q(node.output[0])
    qmax = (1 << (out.bits - 1)) - 1
    if len(x.shape) != 4 or (qmax - out.zero_point) * out.scale > 1 + 1e-6:
        raise Unsupported("HardSigmoid of a 4-D tensor whose output range tops out at most at 1")
    alpha = float(g.attribute(node, "alpha", 0.2))
    beta = float(g.attribute(node, "beta", 0.5))
    channels = w.shape(x)[3]
    weight_scale = np.float32(abs(alpha) / 127)
    weights = np.full((1, 1, 1, channels), 127 if alpha > 0 else -127, dtype=np.int8)
    bias_scale = np.float32(x.scale) * weight_scale
    dtype = "int64" if x.bits == 16 else "int32"
    bias = np.full(channels, np.rint(beta / float(bias_scale)), dtype=dtype)
    w.op("DEPTHWISE_CONV_2D", [w.tensor(x),
                               w.const(f"{node.name}/alpha", weights, "int8", Quant([float(weight_scale)] * channels,
                                                                                   [0] * channels, 3)),
                               w.const(f"{node.name}/beta", bias, dtype, Quant([float(bias_scale)] * channels,
                                                                               [0] * channels))],
         [w.tensor(out)], {"padding": "VALID", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1,
                           "fused_activation_function": "RELU", "dilation_w_factor": 1, "dilation_h_factor": 1})


def unary(w: Writer, node: onnx.NodeProto) -> None:
    x, out = w.q(node.input[0]), w.q(node.output[0])
    _emit_fixed(w, node.op_type, UNARY[node.op_type], [w.tensor(x)], out)


def hard_swish(w: Writer, node: onnx.NodeProto) -> None:
    """int8: HARD_SWISH (Vela runs it as a table). int16, where TFLite has no HARD_SWISH kernel: the three
    operators it stands for, ``ADD(x, 3)`` with a fused RELU6 onto [0, 6], ``MUL`` by ``x`` onto 6 x the output's
    scale (the output's codes, six times their value), then ``MUL`` by 1/6 into the output."""
    x, out = w.q(node.input[0]), w.q(node.output[0])
    if out.bits == 8:
        w.op("HARD_SWISH", [w.tensor(x)], [w.tensor(out)])
        return
    top, rank = 32767, len(w.shape(out))

    def constant(suffix: str, value: float) -> int:
        return w.const(f"{node.name}/{suffix}", np.full([1] * rank, top, dtype="int16"), "int16",
                       Quant([value / top], [0]))

    gate = w.requantized(out, f"{out.name}/relu6_x_plus_3", 6.0 / top, 0)
    w.op("ADD", [w.tensor(x), constant("three", 3.0)], [gate],
         {"fused_activation_function": "RELU6", "pot_scale_int16": False})
    product = w.requantized(out, f"{out.name}/times_6", 6.0 * out.scale, 0)
    w.op("MUL", [w.tensor(x), gate], [product], {"fused_activation_function": "NONE"})
    w.op("MUL", [product, constant("sixth", 1.0 / 6.0)], [w.tensor(out)], {"fused_activation_function": "NONE"})


def _emit_fixed(w: Writer, op_type: str, builtin: str, inputs: list[int], out: QTensor,
                options: dict | None = None) -> None:
    """An operator whose TFLite kernel writes fixed output parameters (Logistic, Softmax, Tanh). Where the
    QDQ model gives its output another quantization (a Concat sharing one scale), the kernel writes its own
    and a QUANTIZE requantizes, as TFLite's converter does."""
    fixed = TFLITE_FIXED.get(op_type, {}).get(out.bits)
    if fixed is None or (abs(out.scale - fixed[0]) <= 1e-9 * fixed[0] and out.zero_point == fixed[1]):
        w.op(builtin, inputs, [w.tensor(out)], options)
        return
    w.op_on_grid(builtin, inputs, out, fixed[0], fixed[1], "fixed", options)


def clip(w: Writer, node: onnx.NodeProto) -> None:
    x, out = w.q(node.input[0]), w.q(node.output[0])
    low, high = w.clip_bounds(node)
    if (low, high) == (0.0, np.inf):
        w.op("RELU", [w.tensor(x)], [w.tensor(out)])
        return
    builtin = CLIP_ACTIVATIONS.get((low, high))
    if builtin is not None:
        w.op(builtin, [w.tensor(x)], [w.tensor(out)])
        return
    if np.isinf(high) or np.isinf(low):  # one-sided: MAXIMUM / MINIMUM with the bound as a constant
        _bounded(w, node, x, out, "MAXIMUM" if np.isinf(high) else "MINIMUM", low if np.isinf(high) else high)
        return
    raise Unsupported(f"Clip({low}, {high}) on its own (ReLU, ReLU6, [-1, 1], [0, 1] and one-sided bounds "
                      "are supported)")


def _bounded(w: Writer, node: onnx.NodeProto, x: QTensor, out: QTensor, builtin: str, bound: float) -> None:
    """TFLite's integer MAXIMUM/MINIMUM compare codes as they are, so the bound is a constant on the input's
    grid; where the output is quantized otherwise, a QUANTIZE requantizes the result."""
    info = np.iinfo(f"int{x.bits}")
    code = int(np.clip(np.round(bound / x.scale) + x.zero_point, info.min, info.max))
    const = w.const(f"{node.name}/bound", np.array([code], dtype=f"int{x.bits}"), f"int{x.bits}",
                    Quant([x.scale], [x.zero_point]))
    w.op_on_grid(builtin, [w.tensor(x), const], out, x.scale, x.zero_point, "bounded")


def leaky_relu(w: Writer, node: onnx.NodeProto) -> None:
    x, out = w.q(node.input[0]), w.q(node.output[0])
    alpha = float(g.attribute(node, "alpha", 0.01))
    w.op("LEAKY_RELU", [w.tensor(x)], [w.tensor(out)], {"alpha": alpha})


def prelu(w: Writer, node: onnx.NodeProto) -> None:
    x, out = w.q(node.input[0]), w.q(node.output[0])
    if out.bits != 8:  # LiteRT accepts an int16 PRELU and computes garbage (the map check caught it)
        raise Unsupported("PRELU has no int16 kernel in TFLite")
    w.op("PRELU", [w.tensor(x), w.operand(node.input[1], node, out)], [w.tensor(out)])


# LiteRT's int8 SOFTMAX aborts (the whole process) once the exponentials' fixed-point sum overflows: from 797
# equal inputs here; longer axes are written as a float CPU SOFTMAX between DEQUANTIZE and QUANTIZE
INT8_SOFTMAX_MAX_AXIS = 512


def softmax(w: Writer, node: onnx.NodeProto) -> None:
    x, out = w.q(node.input[0]), w.q(node.output[0])
    rank = len(x.shape)
    if layout.axis(int(g.attribute(node, "axis", -1)), rank, w.is_nhwc(x)) != rank - 1:
        raise Unsupported("softmax over an axis that is not the innermost one in TFLite's layout")
    if x.shape and x.shape[-1] > INT8_SOFTMAX_MAX_AXIS:
        raise Unsupported(f"an int8 softmax over {x.shape[-1]} values: LiteRT's int8 kernel sums their exponentials "
                          f"in fixed point and aborts the process when the sum overflows (seen from 797 equal values)")
    _emit_fixed(w, "Softmax", "SOFTMAX", [w.tensor(x)], out, {"beta": 1.0})


def concat(w: Writer, node: onnx.NodeProto) -> None:
    fused = w.fusion(node)
    out = w.qg.tensors[fused.output]
    rank = len(out.shape)
    inputs = [w.operand(name, node, out) for name in node.input if name]
    axis = layout.axis(int(g.attribute(node, "axis", 0)), rank, w.is_nhwc(out))
    w.op("CONCATENATION", inputs, [w.tensor(out)], {"axis": axis, "fused_activation_function": fused.activation})
    w.done.update(fused.nodes)


def reshape(w: Writer, node: onnx.NodeProto) -> None:
    """Reshape, Flatten, Squeeze, Unsqueeze: a RESHAPE of the values in ONNX order; a TRANSPOSE on
    either side only where a channel-last tensor's order differs from ONNX's."""
    x, out = w.q(node.input[0]), w.q(node.output[0])
    source = w.tensor(x)
    if w.is_nhwc(x) and not layout.same_order(x.shape):
        plain = w.like(x, f"{node.name}/nchw", x.shape)
        w.op("TRANSPOSE", [source, w.int32(f"{node.name}/to_nchw", layout.TO_NCHW)], [plain])
        source = plain
    target_shape = list(out.shape) if w.is_nhwc(out) and not layout.same_order(out.shape) else list(w.shape(out))
    target = w.tensor(out) if target_shape == list(w.shape(out)) else w.like(out, f"{node.name}/nchw_out",
                                                                              tuple(target_shape))
    w.op("RESHAPE", [source, w.int32(f"{node.name}/shape", target_shape)], [target], {"new_shape": target_shape})
    if target != w.tensor(out):
        w.op("TRANSPOSE", [target, w.int32(f"{node.name}/to_nhwc", layout.TO_NHWC)], [w.tensor(out)])


def transpose(w: Writer, node: onnx.NodeProto) -> None:
    x, out = w.q(node.input[0]), w.q(node.output[0])
    rank = len(x.shape)
    perm = tuple(int(p) for p in g.attribute(node, "perm", list(range(rank))[::-1]))
    tperm = layout.compose(perm, w.is_nhwc(x), w.is_nhwc(out))
    if tperm == tuple(range(rank)):
        if out.key in w.qg.outputs:
            shape = list(w.shape(out))
            w.op("RESHAPE", [w.tensor(x), w.int32(f"{node.name}/shape", shape)], [w.tensor(out)], {"new_shape": shape})
        else:
            w.alias(out, x)
        return
    w.op("TRANSPOSE", [w.tensor(x), w.int32(f"{node.name}/perm", tperm)], [w.tensor(out)])


def depth_to_space(w: Writer, node: onnx.NodeProto) -> None:
    """DEPTH_TO_SPACE on the channel-last tensor: TFLite's channel order is ONNX's DCR mode."""
    x, out = w.q(node.input[0]), w.q(node.output[0])
    mode = _text(g.attribute(node, "mode", b"DCR"))
    if mode != "DCR":
        raise Unsupported(f"mode {mode} (TFLite's DEPTH_TO_SPACE orders channels as mode DCR)")
    if len(x.shape) != 4 or not (w.is_nhwc(x) and w.is_nhwc(out)):
        raise Unsupported("only a 4-D channel-last tensor")
    if x.bits != 8:
        raise Unsupported("DEPTH_TO_SPACE has no int16 kernel in TFLite")
    block = int(g.attribute(node, "blocksize", 0))
    w.op_on_grid("DEPTH_TO_SPACE", [w.tensor(x)], out, x.scale, x.zero_point, "moved", {"block_size": block})


def identity(w: Writer, node: onnx.NodeProto) -> None:
    w.alias(w.q(node.output[0]), w.q(node.input[0]))


def gather(w: Writer, node: onnx.NodeProto) -> None:
    """GATHER of int8 codes by constant indices (a selection: the output keeps the input's quantization), on a
    tensor in ONNX layout; a channel-last one is gathered as float (``fallback.py``)."""
    x, out = w.q(node.input[0]), w.q(node.output[0])
    indices = w.qg.constant(node.input[1])
    if indices is None:
        raise Unsupported("indices that are not constants")
    if w.is_nhwc(x) or w.is_nhwc(out):
        raise Unsupported("a Gather of a channel-last tensor")
    if (out.scale, out.zero_point) != (x.scale, x.zero_point):
        raise Unsupported("a Gather whose output quantization differs from its input's")
    axis = int(g.attribute(node, "axis", 0)) % len(x.shape)
    positive = np.where(indices < 0, indices + x.shape[axis], indices).astype(np.int32)
    w.op("GATHER", [w.tensor(x), w.const(f"{node.name}/indices", positive, "int32")], [w.tensor(out)],
         {"axis": axis, "batch_dims": 0})


def quantize_linear(w: Writer, node: onnx.NodeProto) -> None:
    """The model's own QuantizeLinear of a quantized tensor (a model whose output is int8 codes): the same
    codes where its parameters are the tensor's, else a QUANTIZE (TFLite's requantize); ONNX layout, since
    it is a tensor of its own type the graph hands on (a graph output, as a rule)."""
    x = w.q(node.input[0])
    scale = w.qg.constant(node.input[1])
    zero = w.qg.constant(node.input[2]) if len(node.input) > 2 and node.input[2] else np.zeros((), np.uint8)
    if scale is None or zero is None or scale.size != 1 or zero.size != 1:
        raise Unsupported("a QuantizeLinear whose scale and zero point are not one constant each")
    if zero.dtype != np.dtype(x.dtype):
        raise Unsupported(f"a QuantizeLinear to {zero.dtype} of an {x.dtype} tensor")
    params = (float(scale.reshape(-1)[0]), int(zero.reshape(-1)[0]))
    source = w.tensor(x)
    if params != (x.scale, x.zero_point):
        requantized = w.b.add_tensor(f"{node.output[0]}/{'nhwc' if w.is_nhwc(x) else 'requantized'}", w.shape(x),
                                     x.dtype, quant=Quant([params[0]], [params[1]]))
        w.op("QUANTIZE", [source], [requantized])
        source = requantized
    if w.is_nhwc(x):
        out = w.b.add_tensor(node.output[0], x.shape, x.dtype, quant=Quant([params[0]], [params[1]]))
        w.op("TRANSPOSE", [source, w.int32(f"{node.name}/perm", list(layout.TO_NCHW))], [out])
        source = out
    w.floats[node.output[0]] = source


def pad(w: Writer, node: onnx.NodeProto) -> None:
    """PAD (zeros: the zero point), PADV2 for another constant (its code on the output's grid, the input
    requantized to that grid first where the two differ), or MIRROR_PAD for reflect (the same codes); Vela runs
    each on the NPU. Edge padding has no TFLite form."""
    x, out = w.q(node.input[0]), w.q(node.output[0])
    mode = _text(g.attribute(node, "mode", b"constant"))
    if mode not in ("constant", "reflect"):
        raise Unsupported(f"mode {mode} (TFLite pads with a constant or by reflection)")
    pads = w.qg.constant(node.input[1])
    value = w.qg.constant(node.input[2]) if len(node.input) > 2 and node.input[2] else np.zeros(1, np.float32)
    if pads is None or value is None:
        raise Unsupported("pads and the pad value must be constants")
    fill = float(value.reshape(-1)[0])
    if mode == "reflect" and (out.scale, out.zero_point) != (x.scale, x.zero_point):
        raise Unsupported("reflect padding whose output quantization differs from its input's")
    if len(node.input) > 3 and node.input[3]:
        raise Unsupported("Pad with axes")
    rank = len(x.shape)
    pairs = np.asarray(pads, dtype=np.int64).reshape(2, rank).T
    if np.any(pairs < 0):
        raise Unsupported("negative pads")
    perm = layout.permutation(w.is_nhwc(x), rank)
    paddings = np.ascontiguousarray(pairs[list(perm)].astype(np.int32))
    paddings_tensor = w.const(f"{node.name}/paddings", paddings, "int32")
    if mode == "reflect":
        w.op("MIRROR_PAD", [w.tensor(x), paddings_tensor], [w.tensor(out)], {"mode": "REFLECT"})
    elif fill == 0.0:
        w.op("PAD", [w.tensor(x), paddings_tensor], [w.tensor(out)])
    else:
        _pad_with(w, node, x, out, paddings_tensor, fill)


def _pad_with(w: Writer, node: onnx.NodeProto, x: QTensor, out: QTensor, paddings: int, fill: float) -> None:
    source = w.tensor(x)
    if (x.scale, x.zero_point) != (out.scale, out.zero_point):
        source = w.requantized(x, f"{node.name}/requantized", out.scale, out.zero_point)
        w.op("QUANTIZE", [w.tensor(x)], [source])
    info = np.iinfo(np.dtype(out.dtype))
    code = np.clip(np.rint(np.float32(fill) / np.float32(out.scale)) + out.zero_point, info.min, info.max)
    value = w.const(f"{node.name}/value", np.asarray(code, dtype=out.dtype), out.dtype,
                    Quant([out.scale], [out.zero_point]))
    w.op("PADV2", [source, paddings, value], [w.tensor(out)])


def slice_(w: Writer, node: onnx.NodeProto) -> None:
    x, out = w.q(node.input[0]), w.q(node.output[0])
    rank = len(x.shape)
    values = [w.qg.constant(name) if name else None for name in list(node.input[1:5]) + [""] * (4 - len(node.input[1:5]))]
    starts, ends, axes, steps = values
    if starts is None or ends is None:
        raise Unsupported("starts and ends must be constants")
    axes = list(range(len(starts))) if axes is None else [int(a) % rank for a in axes.reshape(-1)]
    steps = [1] * len(axes) if steps is None else [int(s) for s in steps.reshape(-1)]
    begin, end, stride = [0] * rank, list(x.shape), [1] * rank
    for a, s, e, st in zip(axes, starts.reshape(-1), ends.reshape(-1), steps):
        if st <= 0:
            raise Unsupported("negative or zero steps")
        size = x.shape[a]
        s, e = int(s), int(e)
        s = min(max(s + size if s < 0 else s, 0), size)
        e = min(max(e + size if e < 0 else e, 0), size)
        begin[a], end[a], stride[a] = s, e, st
    perm = layout.permutation(w.is_nhwc(x), rank)
    begin, end, stride = ([v[p] for p in perm] for v in (begin, end, stride))
    if all(s == 1 for s in stride):
        sizes = [e - b for b, e in zip(begin, end)]
        w.op("SLICE", [w.tensor(x), w.int32(f"{node.name}/begin", begin), w.int32(f"{node.name}/size", sizes)],
             [w.tensor(out)])
        return
    w.op("STRIDED_SLICE", [w.tensor(x), w.int32(f"{node.name}/begin", begin), w.int32(f"{node.name}/end", end),
                           w.int32(f"{node.name}/strides", stride)], [w.tensor(out)],
         {"begin_mask": 0, "end_mask": 0})


def split(w: Writer, node: onnx.NodeProto) -> None:
    x = w.q(node.input[0])
    outs = [w.q(o) for o in node.output]
    rank = len(x.shape)
    onnx_axis = int(g.attribute(node, "axis", 0)) % rank
    sizes = [o.shape[onnx_axis] for o in outs]
    axis = layout.axis(onnx_axis, rank, w.is_nhwc(x))
    axis_tensor = w.const(f"{node.name}/axis", np.asarray(axis, dtype=np.int32), "int32")
    w.op("SPLIT_V", [w.tensor(x), w.int32(f"{node.name}/sizes", sizes), axis_tensor], [w.tensor(o) for o in outs],
         {"num_splits": len(outs)})


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
