"""Which layers an NPU runs: operator-support predicates in the style of Arm Vela's supported-operators checks.

Each ``Constraint`` is one condition: the op types it applies to, a sentence for the documentation (with
the profile's limits filled in) and a check returning ``None`` or the reason a layer fails it. The
reasons are the user's messages (partition records, ``fail_on_fallback`` errors) and the sentences are
the ``docs/supported_ops.md`` sections of the family (``rows(hw)``), so the two cannot drift apart.

    ok, reason = is_supported(node, info, hw)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import onnx

from accelbuild.targets.npu.graph_info import MATRIX_OPS, GraphInfo, attribute
from accelbuild.targets.npu.hardware import NpuHardware

Check = Callable[[onnx.NodeProto, GraphInfo, NpuHardware], "str | None"]


@dataclass(frozen=True)
class Constraint:
    ops: frozenset[str] | None  # None: every op type
    text: Callable[[NpuHardware, str], str]  # (profile, op type; "" for the every-operator row) -> sentence
    check: Check


CONSTRAINTS: list[Constraint] = []


def constraint(ops: set[str] | None, text: Callable[[NpuHardware, str], str]) -> Callable[[Check], Check]:
    """Register ``check`` for ``ops`` (``None``: all), documented by ``text(hw, op)``; order of registration is
    kept."""
    def register(check: Check) -> Check:
        CONSTRAINTS.append(Constraint(None if ops is None else frozenset(ops), text, check))
        return check
    return register


# ------------------------------------------------------------------------------------------ every op
@constraint(None, lambda hw, op: "operators of the default ai.onnx domain; custom and vendor-domain operators "
                                 "always run on the host")
def _domain(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    if node.domain not in ("", "ai.onnx"):
        return f"custom operator {node.domain}.{node.op_type} runs on the host"
    return None


@constraint(None, lambda hw, op: "the op type is one that a unit of the profile runs (the table below)")
def _known(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    if node.domain in ("", "ai.onnx") and hw.unit_for(node.op_type) is None:
        return f"{node.op_type} is not an operator the {hw.name} NPU runs"
    return None


@constraint(None, lambda hw, op: "every input and output has a known shape")
def _shapes(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    missing = [t for t in [*info.data_inputs(node), *node.output] if t and info.shape(t) is None]
    return f"shape of {missing[0]} is unknown" if missing else None


@constraint(None, lambda hw, op: f"tensors of rank {hw.support.max_rank} or less"
            + (" (an operator's row gives its own rank where it differs)" if hw.support.op_max_rank else ""))
def _rank(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    limit = hw.support.rank_limit(node.op_type)
    for tensor in [*info.data_inputs(node), *node.output]:
        shape = info.shape(tensor)
        if shape is not None and len(shape) > limit:
            return f"{tensor} is {len(shape)}-D; the NPU takes at most {limit}-D tensors"
    return None


@constraint(None, lambda hw, op: "any number of channels" if hw.support.max_channels is None
            else f"feature maps of at most {hw.support.max_channels} channels")
def _channels(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    limit = hw.support.max_channels
    if limit is None:
        return None
    for tensor in [*info.data_inputs(node), *node.output]:
        shape = info.shape(tensor)
        if shape is not None and len(shape) == 4 and shape[1] > limit:
            return f"{tensor} has {shape[1]} channels; the NPU takes at most {limit}"
    return None


@constraint(None, lambda hw, op: "")  # per op: rows() gives each limited op's count in its row
def _elements(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    limit = hw.support.element_limit(node.op_type)
    if limit is None:
        return None
    for tensor in [*info.data_inputs(node), *node.output]:
        shape = info.shape(tensor)
        per_frame = math.prod(shape[1:]) if shape else 0
        if per_frame > limit:
            return f"{tensor} has {per_frame} elements a frame; {hw.name} runs {node.op_type} on at most {limit}"
    return None


@constraint(None, lambda hw, op: f"weights of {_bits(hw.quantization.weight_bits)} bits and activations of "
                                 f"{_bits(hw.quantization.activation_bits)} bits (16-bit operands run each unit's "
                                 "bits16_factor times slower)")
def _precision(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    weight, activation = info.weight_bits(node), info.activation_bits(node)
    if weight is not None and weight not in hw.quantization.weight_bits:
        return f"{weight}-bit weights; {hw.name} takes {_bits(hw.quantization.weight_bits)}-bit weights"
    if activation is not None and activation not in hw.quantization.activation_bits:
        return f"{activation}-bit activations; {hw.name} takes {_bits(hw.quantization.activation_bits)}-bit ones"
    return None


# ------------------------------------------------------------------------------------ convolutions
@constraint({"Conv", "ConvTranspose"}, lambda hw, op: f"kernel at most {_window(hw, op)}, stride at most "
                                                      f"{hw.support.conv_max_stride}, dilation at most "
                                                      f"{hw.support.conv_max_dilation}")
def _conv_window(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    s = hw.support
    weight = info.shape(node.input[1]) if len(node.input) > 1 else None
    kernel = list(attribute(node, "kernel_shape", weight[2:] if weight else []))
    limit = s.kernel_limit(node.op_type)
    if kernel and max(kernel) > limit:
        return f"kernel {'x'.join(map(str, kernel))} is larger than {limit}x{limit}"
    strides = list(attribute(node, "strides", [1]))
    if max(strides) > s.conv_max_stride:
        return f"stride {max(strides)} is larger than {s.conv_max_stride}"
    dilations = list(attribute(node, "dilations", [1]))
    if max(dilations) > s.conv_max_dilation:
        return f"dilation {max(dilations)} is larger than {s.conv_max_dilation}"
    return None


@constraint({"Conv", "ConvTranspose"}, lambda hw, op: {
    "none": "no grouped or depthwise convolutions",
    "depthwise": "depthwise convolutions (one input channel per group) but no other grouped ones",
    "any": "any grouping (depthwise included)"}[hw.support.conv_grouped])
def _conv_groups(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    group = int(attribute(node, "group", 1))
    if group == 1 or hw.support.conv_grouped == "any":
        return None
    weight = info.shape(node.input[1]) if len(node.input) > 1 else None
    depthwise = weight is not None and node.op_type == "Conv" and weight[1] == 1
    if hw.support.conv_grouped == "depthwise" and depthwise:
        return None
    kind = "depthwise" if depthwise else f"grouped ({group} groups)"
    return f"{kind} convolutions are not supported on {hw.name}"


@constraint({"ConvTranspose"}, lambda hw, op: "runs on the NPU" if hw.support.conv_transpose
            else "never on the NPU (host)")
def _conv_transpose(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    return None if hw.support.conv_transpose else f"ConvTranspose is not supported on {hw.name}"


@constraint({"Conv", "ConvTranspose", "Gemm"}, lambda hw, op: "constant weights")
def _constant_weights(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    if len(node.input) > 1 and not info.is_constant(node.input[1]):
        return "its weights are not constant"
    return None


# ---------------------------------------------------------------------------------------- pooling
@constraint({"MaxPool", "AveragePool"}, lambda hw, op: f"window at most {_window(hw, op)}, "
                                                       f"stride at most {hw.support.pool_max_stride}")
def _pool_window(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    s = hw.support
    kernel = list(attribute(node, "kernel_shape", [1]))
    limit = s.kernel_limit(node.op_type)
    if max(kernel) > limit:
        return f"pooling window {'x'.join(map(str, kernel))} is larger than {limit}x{limit}"
    strides = list(attribute(node, "strides", [1]))
    if max(strides) > s.pool_max_stride:
        return f"pooling stride {max(strides)} is larger than {s.pool_max_stride}"
    return None


def _window(hw: NpuHardware, op: str) -> str:
    limit = hw.support.kernel_limit(op)
    return f"{limit}x{limit}"


# ----------------------------------------------------------------------------------------- resize
@constraint({"Resize"}, lambda hw, op: f"mode {' or '.join(hw.support.resize_modes) or '(none)'}, up to "
                                       f"{hw.support.resize_max_scale:g}x per axis"
                                       + (", whole-number scales" if hw.support.resize_integer_scale_only else ""))
def _resize(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    s = hw.support
    mode = attribute(node, "mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in s.resize_modes:
        return f"Resize mode {mode} is not supported on {hw.name} ({', '.join(s.resize_modes) or 'none'})"
    inp, out = info.shape(node.input[0]), info.shape(node.output[0])
    if inp is None or out is None or len(inp) != len(out):
        return None
    for before, after in zip(inp[2:], out[2:]):
        scale = after / before if before else 1.0
        if scale > s.resize_max_scale:
            return f"Resize scale {scale:g} is larger than {s.resize_max_scale:g}"
        if s.resize_integer_scale_only and not (float(scale).is_integer() or float(1 / scale).is_integer()):
            return f"Resize scale {scale:g} is not a whole number"
    return None


# ---------------------------------------------------------------------------------------- division
@constraint({"Div"}, lambda hw, op: "by a constant or a run-time tensor" if hw.support.divide_by_tensor
            else "by a constant only (the engine multiplies by its reciprocal)")
def _div_by_constant(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    if not hw.support.divide_by_tensor and len(node.input) > 1 and not info.is_constant(node.input[1]):
        return "Div by a tensor computed at run time; the NPU divides by constants only"
    return None


# ----------------------------------------------------------------------------------------- expand
@constraint({"Expand"}, lambda hw, op: "broadcasts along one axis only (input and output differ in one dimension)")
def _expand_one_axis(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    inp, out = info.shape(node.input[0]), info.shape(node.output[0])
    if inp is None or out is None:
        return None
    padded = [1] * (len(out) - len(inp)) + list(inp)
    differ = sum(1 for a, b in zip(padded, out) if a != b)
    if differ > 1:
        return f"Expand broadcasts along {differ} axes; {hw.name} expands along one axis only"
    return None


# ---------------------------------------------------------------------------------------- softmax
@constraint({"Softmax"}, lambda hw, op: "over the last axis" if hw.support.softmax_last_axis_only else "any axis")
def _softmax_axis(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> str | None:
    if not hw.support.softmax_last_axis_only:
        return None
    shape = info.shape(node.input[0])
    default = -1 if _opset(info) >= 13 else 1
    axis = int(attribute(node, "axis", default))
    if shape is not None and axis % len(shape) != len(shape) - 1:
        return f"Softmax over axis {axis}; {hw.name} runs it over the last axis only"
    return None


# ------------------------------------------------------------------------------------------- API
def is_supported(node: onnx.NodeProto, info: GraphInfo, hw: NpuHardware) -> tuple[bool, str]:
    """``(True, "")`` when the NPU runs ``node``, else ``(False, reasons)`` (every failed condition, "; ")."""
    reasons: list[str] = []
    for c in CONSTRAINTS:
        if c.ops is not None and node.op_type not in c.ops:
            continue
        reason = c.check(node, info, hw)
        if reason is not None:
            reasons.append(reason)
            if c.check in (_domain, _known):  # an op no unit runs: the other conditions do not apply
                break
    return (not reasons, "; ".join(dict.fromkeys(reasons)))


def unsupported(info: GraphInfo, hw: NpuHardware) -> dict[str, str]:
    """Layer name -> why the NPU cannot run it, for every such layer (in topological order)."""
    result = {}
    for node in info.layers():
        ok, reason = is_supported(node, info, hw)
        if not ok:
            result[node.name] = reason
    return result


def rows(hw: NpuHardware) -> list[tuple[str, str]]:
    """``(operator, unit and conditions)`` rows of docs/supported_ops.md for one profile."""
    general = "; ".join(text for c in CONSTRAINTS if c.ops is None and (text := c.text(hw, "")))
    result = [("(every operator)", general)]
    for unit in sorted(hw.units, key=lambda u: hw.timeline.index(u.name)):
        for op in sorted(unit.ops):
            conditions = [c.text(hw, op) for c in CONSTRAINTS if c.ops is not None and op in c.ops]
            if hw.support.rank_limit(op) != hw.support.max_rank:
                conditions.insert(0, f"tensors of rank {hw.support.rank_limit(op)} or less")
            if hw.support.element_limit(op) is not None:
                conditions.insert(0, f"at most {hw.support.element_limit(op)} elements a frame (C x H x W)")
            text = f"{unit.name} ({unit.kind})" + (f". Requires: {'; '.join(conditions)}" if conditions else "")
            if op in MATRIX_OPS:
                text += f"; 16-bit operands {unit.bits16_factor:g}x slower"
            result.append((op, text))
    host = hw.arm.name + (f" or {hw.dsp.name} (offload.host: dsp)" if hw.dsp is not None else "")
    result.append(("anything else", f"runs on the host: {host}"))
    return result


def _bits(values: tuple[int, ...]) -> str:
    return " or ".join(str(v) for v in values)


def _opset(info: GraphInfo) -> int:
    return next((imp.version for imp in info.model.opset_import if imp.domain in ("", "ai.onnx")), 21)
