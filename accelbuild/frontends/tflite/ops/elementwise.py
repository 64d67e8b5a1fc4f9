"""Element-wise ops: arithmetic, activations, softmax, and QUANTIZE/DEQUANTIZE of activations.

These are layout-agnostic, so they run directly on the channel-last TFLite tensors. In the float
graph a QUANTIZE or DEQUANTIZE of an activation carries the value unchanged (an Identity named after
its output); DEQUANTIZE of a constant (float16 or int8 weights) is folded before conversion.
"""

from __future__ import annotations

import numpy as np

from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import (
    OK,
    SAME_SHAPE,
    Check,
    Result,
    activation,
    const_inputs,
    fail,
    input_count,
    register,
)
from accelbuild.frontends.tflite.reader import Operator


def _broadcastable(g: Graph, op: Operator) -> Result:
    shapes = [g.shape(i) for i in op.inputs]
    try:
        result = np.broadcast_shapes(*shapes)
    except ValueError:
        return fail(f"input shapes {[list(s) for s in shapes]} do not broadcast")
    if tuple(result) != g.shape(op.outputs[0]):
        return fail(f"broadcast shape {list(result)} differs from the output {list(g.shape(op.outputs[0]))}")
    return OK


BROADCAST = Check("inputs broadcast (numpy rules) to the output shape", _broadcastable)


def _float_result(g: Graph, op: Operator) -> Result:
    dtype = g.tensor(op.outputs[0]).dtype
    return OK if dtype not in ("INT32", "INT64", "BOOL") else fail(f"integer ({dtype}) division")


def _binary(name: str, onnx_op: str, *extra: Check, fused: bool = True) -> None:
    def convert(g: Graph, op: Operator) -> None:
        g.emit(op, onnx_op, [g.value(i) for i in op.inputs], act=activation(op) if fused else "NONE")
    convert.__doc__ = f"{name} -> {onnx_op} (numpy broadcasting in both)."
    register(name, onnx_op + (" + fused activation" if fused else ""), input_count(2), BROADCAST, *extra)(convert)


_binary("ADD", "Add")
_binary("SUB", "Sub")
_binary("MUL", "Mul")
_binary("DIV", "Div", Check("float result", _float_result))
_binary("MAXIMUM", "Max", fused=False)
_binary("MINIMUM", "Min", fused=False)


def _unary(name: str, onnx_op: str, doc: str = "") -> None:
    def convert(g: Graph, op: Operator) -> None:
        g.emit(op, onnx_op, [g.value(op.inputs[0])])
    convert.__doc__ = f"{name} -> {onnx_op}."
    register(name, doc or onnx_op, input_count(1), SAME_SHAPE)(convert)


_unary("LOGISTIC", "Sigmoid")
_unary("NEG", "Neg")
_unary("LOG", "Log")
_unary("SQRT", "Sqrt")
_unary("TANH", "Tanh")
_unary("RELU", "Relu")
_unary("HARD_SWISH", "HardSwish")
_unary("QUANTIZE", "Identity", "Identity (the graph computes in float)")
_unary("DEQUANTIZE", "Identity", "Identity on activations; folded into the constant for weights")


def _clip(name: str, low: float, high: float) -> None:
    def convert(g: Graph, op: Operator) -> None:
        g.emit(op, "Clip", [g.value(op.inputs[0]), g.scalar(low), g.scalar(high)])
    convert.__doc__ = f"{name} -> Clip({low}, {high})."
    register(name, f"Clip({low:g}, {high:g})", input_count(1), SAME_SHAPE)(convert)


_clip("RELU6", 0.0, 6.0)
_clip("RELU_N1_TO_1", -1.0, 1.0)


@register("LEAKY_RELU", "LeakyRelu", input_count(1), SAME_SHAPE)
def leaky_relu(g: Graph, op: Operator) -> None:
    g.emit(op, "LeakyRelu", [g.value(op.inputs[0])], alpha=float(op.options.get("alpha", 0.0)))


def _alpha_broadcasts(g: Graph, op: Operator) -> Result:
    x, alpha = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    try:
        ok = tuple(np.broadcast_shapes(x, alpha)) == x
    except ValueError:
        ok = False
    return OK if ok else fail(f"alpha {list(alpha)} does not broadcast to the input {list(x)}")


@register("PRELU", "PRelu", input_count(2), SAME_SHAPE,
          Check("alpha broadcasts to the input shape", _alpha_broadcasts))
def prelu(g: Graph, op: Operator) -> None:
    g.emit(op, "PRelu", [g.value(op.inputs[0]), g.value(op.inputs[1])])


def _has_axes(g: Graph, op: Operator) -> Result:
    return OK if g.shape(op.inputs[0]) else fail("input is a scalar")


@register("SOFTMAX", "Softmax over the last axis (after Mul by beta when beta != 1)", input_count(1), SAME_SHAPE,
          Check("input has rank >= 1", _has_axes))
def softmax(g: Graph, op: Operator) -> None:
    """``softmax(beta * x)`` over the last axis; the scaling node is ``T/beta``."""
    x, beta = g.value(op.inputs[0]), float(op.options.get("beta", 1.0))
    if beta != 1.0:
        scaled = g.fresh(f"{g.name(op)}/beta")
        g.node("Mul", [x, g.scalar(beta)], [scaled], scaled)
        x = scaled
    g.emit(op, "Softmax", [x], axis=-1)


@register("DENSIFY", "folded: the sparse constant becomes a dense initializer", input_count(1),
          const_inputs(0, what="the sparse input"), SAME_SHAPE)
def densify(g: Graph, op: Operator) -> None:
    """Reached only if folding was impossible; a constant input is still just a value."""
    g.emit(op, "Identity", [g.value(op.inputs[0])])


@register("SQUARE", "Mul(x, x)", input_count(1), SAME_SHAPE)
def square(g: Graph, op: Operator) -> None:
    x = g.value(op.inputs[0])
    g.emit(op, "Mul", [x, x])


@register("EQUAL", "Equal (a bool tensor)", input_count(2), BROADCAST)
def equal(g: Graph, op: Operator) -> None:
    g.emit(op, "Equal", [g.value(i) for i in op.inputs])


def _select_broadcast(g: Graph, op: Operator) -> Result:
    if g.tensor(op.inputs[0]).dtype != "BOOL":
        return fail(f"condition is {g.tensor(op.inputs[0]).dtype}, not BOOL")
    return _broadcastable(g, op)


@register("SELECT_V2", "Where", input_count(3),
          Check("a BOOL condition; the three inputs broadcast to the output shape", _select_broadcast))
def select_v2(g: Graph, op: Operator) -> None:
    g.emit(op, "Where", [g.value(i) for i in op.inputs])
