"""Weighted layers, pooling and resampling: Conv (incl. depthwise), ConvTranspose, Gemm/MatMul, pools,
GlobalAveragePool, ReduceMean, Resize."""

from __future__ import annotations

import numpy as np
import onnx

from accelbuild.frontends.tflite.layout import same_padding
from accelbuild.targets.ethos_u.tflite import layout
from accelbuild.targets.ethos_u.tflite.qgraph import QConst, QTensor
from accelbuild.targets.ethos_u.tflite.writer import Unsupported, Writer
from accelbuild.util import onnx_graph as g
from accelbuild.util.tflite_builder import Quant


def _ints(node: onnx.NodeProto, name: str, default: list[int]) -> list[int]:
    return [int(v) for v in g.attribute(node, name, default)]


def _padding(w: Writer, node: onnx.NodeProto, x: QTensor, kernel: list[int], strides: list[int],
             dilations: list[int], pad_allowed: bool) -> tuple[str, int]:
    """TFLite padding (SAME/VALID) and the input tensor to use (after an explicit PAD when needed)."""
    auto_pad = g.attribute(node, "auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    source = w.tensor(x)
    if auto_pad == "VALID":
        return "VALID", source
    if auto_pad == "SAME_UPPER":
        return "SAME", source
    if auto_pad not in ("NOTSET", ""):
        raise Unsupported(f"auto_pad {auto_pad}")
    pads = _ints(node, "pads", [0, 0, 0, 0])
    if not any(pads):
        return "VALID", source
    (top, bottom), (left, right) = (same_padding(size, k, s, d) for size, k, s, d in
                                    zip(x.shape[2:], kernel, strides, dilations))
    if pads == [top, left, bottom, right]:
        return "SAME", source
    if not pad_allowed:
        raise Unsupported(f"pads {pads} are neither TFLite SAME nor VALID")
    shape = w.shape(x)
    padded = (shape[0], shape[1] + pads[0] + pads[2], shape[2] + pads[1] + pads[3], shape[3])
    out = w.like(x, f"{node.name}/padded", padded)
    paddings = np.array([[0, 0], [pads[0], pads[2]], [pads[1], pads[3]], [0, 0]], dtype=np.int32)
    w.op("PAD", [source, w.const(f"{node.name}/paddings", paddings, "int32")], [out])
    return "VALID", out


def _weights(w: Writer, node: onnx.NodeProto, index: int) -> QConst:
    c = w.qg.consts.get(node.input[index]) if len(node.input) > index else None
    if c is None:
        raise Unsupported("weights are not quantized constants")
    if c.codes.dtype != np.int8:
        raise Unsupported(f"weights are {c.codes.dtype}; Ethos-U takes int8 weights (weight_bits: 8)")
    if np.any(c.zero_points):
        raise Unsupported("weights have non-zero zero points")
    return c


def _bias(w: Writer, node: onnx.NodeProto, x: QTensor, weights: QConst, bias: QConst | None, channels: int) -> int:
    """int32 bias (int64 with int16 activations) at scale input_scale * weight_scale, zero point 0."""
    scales = np.broadcast_to(weights.scales.reshape(-1), (channels,)).astype(np.float32)
    if bias is None:
        codes = np.zeros(channels, dtype=np.int64)
        bias_scales = (np.float32(x.scale) * scales).astype(np.float32)
    else:
        codes = bias.codes.reshape(-1).astype(np.int64)
        bias_scales = np.broadcast_to(bias.scales.reshape(-1), (channels,)).astype(np.float32)
    dtype = "int64" if x.bits == 16 else "int32"
    return w.const(f"{node.name}/bias", codes.astype(dtype), dtype,
                   Quant(bias_scales.tolist(), [0] * channels, 0))


def _weight_quant(c: QConst, channels: int, axis: int) -> Quant:
    scales = np.broadcast_to(c.scales.reshape(-1), (channels,)).astype(np.float32)
    return Quant(scales.tolist(), [0] * channels, axis)


def conv(w: Writer, node: onnx.NodeProto) -> None:
    x = w.q(node.input[0])
    if len(x.shape) != 4:
        raise Unsupported(f"only 2-D convolutions (input rank {len(x.shape)})")
    c = _weights(w, node, 1)
    bias = w.qg.consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    fused = w.fusion(node)
    out = w.qg.tensors[fused.output]
    cout, cin_g, kh, kw = c.codes.shape
    group = int(g.attribute(node, "group", 1))
    strides, dilations = _ints(node, "strides", [1, 1]), _ints(node, "dilations", [1, 1])
    padding, source = _padding(w, node, x, [kh, kw], strides, dilations, pad_allowed=True)
    options = {"padding": padding, "stride_w": strides[1], "stride_h": strides[0],
               "fused_activation_function": fused.activation,
               "dilation_w_factor": dilations[1], "dilation_h_factor": dilations[0]}
    cin = x.shape[1]
    if group == 1:
        weights = w.const(f"{node.name}/weights", c.codes.transpose(0, 2, 3, 1), "int8", _weight_quant(c, cout, 0))
        builtin = "CONV_2D"
    elif group == cin and cin_g == 1:
        weights = w.const(f"{node.name}/weights", c.codes.transpose(1, 2, 3, 0), "int8", _weight_quant(c, cout, 3))
        builtin = "DEPTHWISE_CONV_2D"
        options["depth_multiplier"] = cout // cin
    else:
        raise Unsupported(f"grouped convolution (group {group}) other than depthwise")
    version = 2 if builtin == "DEPTHWISE_CONV_2D" and dilations != [1, 1] else 1
    w.op(builtin, [source, weights, _bias(w, node, x, c, bias, cout)], [w.tensor(out)], options, version)
    w.done.update(fused.nodes)


def conv_transpose(w: Writer, node: onnx.NodeProto) -> None:
    """TRANSPOSE_CONV: ONNX weights [in, out, kh, kw] become [out, kh, kw, in]; ONNX pads become VALID (none at
    the start: TFLite crops the end to the output shape) or SAME (the total split as TFLite splits it)."""
    x = w.q(node.input[0])
    if len(x.shape) != 4:
        raise Unsupported(f"only 2-D transposed convolutions (input rank {len(x.shape)})")
    c = _weights(w, node, 1)
    if int(g.attribute(node, "group", 1)) != 1:
        raise Unsupported("grouped transposed convolution")
    if _ints(node, "dilations", [1, 1]) != [1, 1]:
        raise Unsupported("dilated transposed convolution")
    auto_pad = g.attribute(node, "auto_pad", b"NOTSET")
    if (auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad) not in ("NOTSET", ""):
        raise Unsupported("auto_pad (give explicit pads)")
    bias = w.qg.consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    fused = w.fusion(node)
    out = w.qg.tensors[fused.output]
    _, cout, kh, kw = c.codes.shape
    strides, pads = _ints(node, "strides", [1, 1]), _ints(node, "pads", [0, 0, 0, 0])
    full = [s * (i - 1) + k for s, i, k in zip(strides, x.shape[2:], (kh, kw))]
    totals = [f - o for f, o in zip(full, out.shape[2:])]
    if pads[0] == pads[1] == 0 and min(totals) >= 0:
        padding = "VALID"
    elif [pads[0], pads[1]] == [t // 2 for t in totals] and min(totals) >= 0:
        padding = "SAME"
    else:
        raise Unsupported(f"pads {pads} with output {list(out.shape[2:])} are neither TFLite SAME nor VALID")
    weights = w.const(f"{node.name}/weights", np.ascontiguousarray(c.codes.transpose(1, 2, 3, 0)), "int8",
                      _weight_quant(c, cout, 0))
    shape = w.int32(f"{node.name}/output_shape", list(w.shape(out)))
    options = {"padding": padding, "stride_w": strides[1], "stride_h": strides[0],
               "fused_activation_function": fused.activation}
    w.op("TRANSPOSE_CONV", [shape, weights, w.tensor(x), _bias(w, node, x, c, bias, cout)], [w.tensor(out)], options,
         version=3 if fused.activation == "NONE" else 4)
    w.done.update(fused.nodes)


def fully_connected(w: Writer, node: onnx.NodeProto) -> None:
    x = w.q(node.input[0])
    if node.op_type == "MatMul" and w.qg.key(node.input[1]) is not None:
        batch_matmul(w, node, x, w.q(node.input[1]))
        return
    c = _weights(w, node, 1)
    codes = c.codes
    bias = None
    source = -1
    if node.op_type == "Gemm":
        if not int(g.attribute(node, "transB", 0)):
            codes = codes.T
        real_bias = _gemm_bias(w, node)
        c, bias = _gemm_scaled(node, x, c, real_bias, codes.shape[0])
        if int(g.attribute(node, "transA", 0)):
            source = _transposed_input(w, node, x)
    elif node.op_type == "MatMul":
        if codes.ndim != 2:
            raise Unsupported("MatMul weights of rank other than 2")
        codes = codes.T
    if w.is_nhwc(x):
        raise Unsupported("fully connected layer reading a channel-last tensor")
    fused = w.fusion(node, bias_allowed=node.op_type == "MatMul")
    bias = bias if bias is not None else fused.bias
    out = w.qg.tensors[fused.output]
    units = codes.shape[0]
    weights = w.const(f"{node.name}/weights", np.ascontiguousarray(codes), "int8", _weight_quant(c, units, 0))
    options = {"fused_activation_function": fused.activation, "keep_num_dims": len(x.shape) > 2}
    w.op("FULLY_CONNECTED", [w.tensor(x) if source < 0 else source, weights, _bias(w, node, x, c, bias, units)],
         [w.tensor(out)], options)
    w.done.update(fused.nodes)


def _gemm_bias(w: Writer, node: onnx.NodeProto) -> np.ndarray | None:
    """Gemm's C as real values: an int32 constant the quantizer wrote, or a float one it left (with transA,
    alpha or beta it does not take the bias as the layer's)."""
    if len(node.input) < 3 or not node.input[2]:
        return None
    if node.input[2] in w.qg.consts:
        q = w.qg.consts[node.input[2]]
        return q.codes.reshape(-1).astype(np.float64) * np.broadcast_to(q.scales.reshape(-1), (q.codes.size,))
    value = w.qg.constant(node.input[2])
    if value is None:
        raise Unsupported("Gemm bias is not a constant")
    return value.reshape(-1).astype(np.float64)


def _gemm_scaled(node: onnx.NodeProto, x: QTensor, c: QConst, real_bias: np.ndarray | None,
                 units: int) -> tuple[QConst, QConst | None]:
    """Gemm's alpha folded into the weights' scales (the codes stay), beta * C into int32 bias codes at the
    bias scale (input scale x weight scale): alpha * A.B + beta * C computed by one FULLY_CONNECTED."""
    alpha = float(g.attribute(node, "alpha", 1.0))
    beta = float(g.attribute(node, "beta", 1.0))
    if alpha <= 0.0:
        raise Unsupported("Gemm with alpha <= 0")
    scaled = c if alpha == 1.0 else QConst(c.codes, (c.scales * np.float32(alpha)).astype(np.float32),
                                           c.zero_points, c.axis)
    if real_bias is None:
        return scaled, None
    if real_bias.size != units:
        raise Unsupported("Gemm with a C that is not one value per output")
    scales = (np.float32(x.scale) * np.broadcast_to(scaled.scales.reshape(-1), (units,))).astype(np.float32)
    codes = np.clip(np.rint(real_bias * beta / scales.astype(np.float64)), -(2 ** 31), 2 ** 31 - 1)
    return scaled, QConst(codes.astype(np.int32), scales, np.zeros(units, np.int64), 0)


def _transposed_input(w: Writer, node: onnx.NodeProto, x: QTensor) -> int:
    """Gemm's transA: A [K, M] as an int8 [M, K] tensor (a TRANSPOSE, which Vela runs on the NPU)."""
    if len(x.shape) != 2:
        raise Unsupported("Gemm transA of an input of rank other than 2")
    out = w.like(x, f"{node.name}/a_transposed", (x.shape[1], x.shape[0]))
    w.op("TRANSPOSE", [w.tensor(x), w.int32(f"{node.name}/a_perm", [1, 0])], [out])
    return out


def batch_matmul(w: Writer, node: onnx.NodeProto, a: QTensor, b: QTensor) -> None:
    """MatMul of two quantized tensors (attention's Q.K^T and scores.V): int8 BATCH_MATMUL, which requantizes
    into the output's quantization as onnxruntime's QDQ MatMul does."""
    if min(len(a.shape), len(b.shape)) < 2 or w.is_nhwc(a) or w.is_nhwc(b):
        raise Unsupported("MatMul of a vector or of a channel-last tensor")
    if a.bits != 8 or b.bits != 8:
        raise Unsupported("MatMul of two int16 tensors (TFLite's BATCH_MATMUL takes int8 here)")
    fused = w.fusion(node)
    out = w.qg.tensors[fused.output]
    if w.is_nhwc(out) or (fused.activation != "NONE" and not implied(out, fused.activation)):
        raise Unsupported("an activation after a MatMul of two tensors that its output range does not imply")
    w.op("BATCH_MATMUL", [w.tensor(a), w.tensor(b)], [w.tensor(out)], {"adj_x": False, "adj_y": False})
    w.done.update(fused.nodes)


def pool(w: Writer, node: onnx.NodeProto) -> None:
    x = w.q(node.input[0])
    if len(x.shape) != 4:
        raise Unsupported("only 2-D pooling")
    kernel, strides = _ints(node, "kernel_shape", []), _ints(node, "strides", [1, 1])
    if _ints(node, "dilations", [1, 1]) != [1, 1]:
        raise Unsupported("dilated pooling")
    average = node.op_type == "AveragePool"
    include_pad = average and int(g.attribute(node, "count_include_pad", 0))
    if not average:
        _max_pool(w, node, x, kernel, strides)
        return
    padding, source = _padding(w, node, x, kernel, strides, [1, 1], pad_allowed=bool(include_pad))
    if include_pad and padding == "SAME":  # TFLite's SAME averages over the real pixels only
        raise Unsupported("count_include_pad with SAME-like pads")
    fused = w.fusion(node)
    out = w.qg.tensors[fused.output]
    if _out_hw(w, x, source, padding, kernel, strides) != out.shape[2:]:
        raise Unsupported("ceil_mode pooling whose output TFLite cannot reproduce")
    if (out.scale, out.zero_point) != (x.scale, x.zero_point):
        raise Unsupported("pooling whose output quantization differs from its input's "
                          "(quantize with conventions='tflite')")
    options = {"padding": padding, "stride_w": strides[1], "stride_h": strides[0], "filter_width": kernel[1],
               "filter_height": kernel[0], "fused_activation_function": fused.activation}
    w.op("AVERAGE_POOL_2D" if average else "MAX_POOL_2D", [source], [w.tensor(out)], options)
    w.done.update(fused.nodes)


def _max_pool(w: Writer, node: onnx.NodeProto, x: QTensor, kernel: list[int], strides: list[int]) -> None:
    """MAX_POOL_2D; pads TFLite's SAME does not make (ceil_mode, uneven pads) become a PADV2 with the lowest code
    first, which no window's maximum can be (ONNX pads max pooling with minus infinity; every window holds
    at least one real value), and a VALID pool."""
    fused = w.fusion_from(node.output[0])
    out = w.qg.tensors[fused.output]
    if (out.scale, out.zero_point) != (x.scale, x.zero_point):
        raise Unsupported("pooling whose output quantization differs from its input's "
                          "(quantize with conventions='tflite')")
    try:
        padding, source = _padding(w, node, x, kernel, strides, [1, 1], pad_allowed=False)
    except Unsupported:
        padding, source = "", -1
    if not padding or _out_hw(w, x, source, padding, kernel, strides) != out.shape[2:]:
        padding, source = "VALID", _lowest_padded(w, node, x, kernel, strides, out.shape[2:])
    options = {"padding": padding, "stride_w": strides[1], "stride_h": strides[0], "filter_width": kernel[1],
               "filter_height": kernel[0], "fused_activation_function": fused.activation}
    w.op("MAX_POOL_2D", [source], [w.tensor(out)], options)
    w.done.update(fused.nodes)


def _lowest_padded(w: Writer, node: onnx.NodeProto, x: QTensor, kernel: list[int], strides: list[int],
                   out_hw: tuple[int, ...]) -> int:
    auto_pad = g.attribute(node, "auto_pad", b"NOTSET")
    if (auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad) not in ("NOTSET", ""):
        raise Unsupported(f"auto_pad {auto_pad!r} with an output TFLite's padding does not make")
    top, left, bottom, right = _ints(node, "pads", [0, 0, 0, 0])
    needed = [(o - 1) * s + k for o, s, k in zip(out_hw, strides, kernel)]
    bottom = max(0, needed[0] - x.shape[2] - top)
    right = max(0, needed[1] - x.shape[3] - left)
    shape = w.shape(x)
    padded = (shape[0], shape[1] + top + bottom, shape[2] + left + right, shape[3])
    if any((p - k) // s + 1 != o for p, k, s, o in zip(padded[1:3], kernel, strides, out_hw)):
        raise Unsupported(f"pads with output {list(out_hw)} that padding cannot reproduce")
    lowest = np.asarray(-(1 << (x.bits - 1)), dtype=x.dtype)
    result = w.like(x, f"{node.name}/padded", padded)
    paddings = np.array([[0, 0], [top, bottom], [left, right], [0, 0]], dtype=np.int32)
    value = w.const(f"{node.name}/lowest", lowest, x.dtype, Quant([x.scale], [x.zero_point]))
    w.op("PADV2", [w.tensor(x), w.const(f"{node.name}/paddings", paddings, "int32"), value], [result])
    return result


def _out_hw(w: Writer, x: QTensor, source: int, padding: str, kernel: list[int],
            strides: list[int]) -> tuple[int, ...]:
    _, h, wd, _ = w.b.shape(source)
    if padding == "SAME":
        return (-(-h // strides[0]), -(-wd // strides[1]))
    return ((h - kernel[0]) // strides[0] + 1, (wd - kernel[1]) // strides[1] + 1)


def mean(w: Writer, node: onnx.NodeProto) -> None:
    x = w.q(node.input[0])
    rank = len(x.shape)
    if node.op_type == "GlobalAveragePool":
        axes, keep = list(range(2, rank)), 1
    else:
        axes_value = w.qg.constant(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        axes = [int(a) for a in (axes_value.reshape(-1) if axes_value is not None else _ints(node, "axes", []))]
        if not axes:
            axes = list(range(rank))
        keep = int(g.attribute(node, "keepdims", 1))
    fused = w.fusion(node)
    out = w.qg.tensors[fused.output]
    if fused.activation != "NONE" and not implied(out, fused.activation):
        raise Unsupported("an activation after a mean that its output range does not imply")
    nhwc = w.is_nhwc(x)
    tfl_axes = sorted(layout.axis(a, rank, nhwc) for a in axes)
    kept = [layout.axis(a, rank, nhwc) for a in range(rank) if a not in {b % rank for b in axes}]
    if not keep and kept != sorted(kept):  # a global mean over H, W keeps [N, C] in both layouts
        raise Unsupported("a mean over a channel-last tensor without keepdims that reorders the axes it keeps")
    w.op("MEAN", [w.tensor(x), w.int32(f"{node.name}/axes", tfl_axes)], [w.tensor(out)], {"keep_dims": bool(keep)})
    w.done.update(fused.nodes)


def implied(out: QTensor, activation: str) -> bool:
    """A ReLU-family activation that saturation to the output's grid already applies."""
    qmin, qmax = -(1 << (out.bits - 1)), (1 << (out.bits - 1)) - 1
    low, high = (qmin - out.zero_point) * out.scale, (qmax - out.zero_point) * out.scale
    bounds = {"RELU": (0.0, np.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}
    b_low, b_high = bounds[activation]
    return b_low <= low + 1e-12 and high <= b_high


def resize(w: Writer, node: onnx.NodeProto) -> None:
    x, out = w.q(node.input[0]), w.q(node.output[0])
    if len(x.shape) != 4 or x.shape[:2] != out.shape[:2]:
        raise Unsupported("only resizing of the spatial dimensions of a 4-D tensor")
    mode = _text(g.attribute(node, "mode", b"nearest"))
    transform = _text(g.attribute(node, "coordinate_transformation_mode", b"half_pixel"))
    nearest_mode = _text(g.attribute(node, "nearest_mode", b"round_prefer_floor"))
    if mode == "linear":
        flags = {"half_pixel": (False, True), "pytorch_half_pixel": (False, True), "align_corners": (True, False),
                 "asymmetric": (False, False)}.get(transform)
        builtin = "RESIZE_BILINEAR"
    elif mode == "nearest":
        flags = {("asymmetric", "floor"): (False, False), ("half_pixel", "round_prefer_ceil"): (False, True),
                 ("tf_half_pixel_for_nn", "round_prefer_ceil"): (False, True),
                 ("align_corners", "round_prefer_ceil"): (True, False)}.get((transform, nearest_mode))
        builtin = "RESIZE_NEAREST_NEIGHBOR"
    else:
        raise Unsupported(f"mode {mode}")
    if flags is None:
        raise Unsupported(f"mode {mode} with coordinate_transformation_mode {transform}"
                          + (f", nearest_mode {nearest_mode}" if mode == "nearest" else ""))
    if (out.scale, out.zero_point) != (x.scale, x.zero_point):
        raise Unsupported("resizing whose output quantization differs from its input's "
                          "(quantize with conventions='tflite')")
    size = w.int32(f"{node.name}/size", list(out.shape[2:]))
    w.op(builtin, [w.tensor(x), size], [w.tensor(out)], {"align_corners": flags[0], "half_pixel_centers": flags[1]})


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
