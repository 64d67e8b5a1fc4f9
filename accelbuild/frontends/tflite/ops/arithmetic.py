"""Element-wise operators beyond the basic arithmetic of :mod:`.elementwise`: math functions, comparisons,
logical operators, floor division and modulo, squared difference, and the constant-filling FILL.

Each is one ONNX node or a short chain of them on the channel-last tensors, with TFLite's semantics where
ONNX differs: FLOOR_DIV rounds towards minus infinity for integers too (ONNX's integer Div truncates),
FLOOR_MOD takes the divisor's sign, RSQRT is ``1 / sqrt(x)``.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import (
    OK,
    SAME_SHAPE,
    Check,
    Result,
    fail,
    input_count,
    register,
)
from accelbuild.frontends.tflite.ops.elementwise import BROADCAST
from accelbuild.frontends.tflite.reader import Operator
from accelbuild.frontends.tflite.tensors import onnx_type

_INT_TYPES = {TensorProto.INT32: np.int32, TensorProto.INT64: np.int64}


def _is_float(g: Graph, index: int) -> bool:
    return onnx_type(g.tensor(index)) == TensorProto.FLOAT


def _float_input(g: Graph, op: Operator) -> Result:
    if _is_float(g, op.inputs[0]):
        return OK
    return fail(f"input is {g.tensor(op.inputs[0]).dtype}, expected float")


FLOAT_INPUT = Check("float input", _float_input)


def _numeric_input(g: Graph, op: Operator) -> Result:
    kind = onnx_type(g.tensor(op.inputs[0]))
    return OK if kind == TensorProto.FLOAT or kind in _INT_TYPES else \
        fail(f"input is {g.tensor(op.inputs[0]).dtype}, expected float, int32 or int64")


NUMERIC_INPUT = Check("float, int32 or int64 input", _numeric_input)


def _bool_inputs(g: Graph, op: Operator) -> Result:
    bad = [g.tensor(i).dtype for i in op.inputs if g.tensor(i).dtype != "BOOL"]
    return fail(f"inputs are {bad}, expected BOOL") if bad else OK


BOOL_INPUTS = Check("BOOL inputs", _bool_inputs)


# --------------------------------------------------------------------------- unary math


def _unary(name: str, onnx_op: str, *checks: Check) -> None:
    def convert(g: Graph, op: Operator) -> None:
        g.emit(op, onnx_op, [g.value(op.inputs[0])])
    convert.__doc__ = f"{name} -> {onnx_op}."
    register(name, onnx_op, input_count(1), SAME_SHAPE, *checks)(convert)


for _name, _onnx in (("SIN", "Sin"), ("COS", "Cos"), ("EXP", "Exp"), ("FLOOR", "Floor"), ("CEIL", "Ceil"),
                     ("ROUND", "Round")):
    _unary(_name, _onnx, FLOAT_INPUT)
_unary("ABS", "Abs", NUMERIC_INPUT)
_unary("SIGN", "Sign", NUMERIC_INPUT)
_unary("LOGICAL_NOT", "Not", BOOL_INPUTS)


@register("RSQRT", "Reciprocal(Sqrt(x))", input_count(1), SAME_SHAPE, FLOAT_INPUT)
def rsqrt(g: Graph, op: Operator) -> None:
    root = g.fresh(f"{g.name(op)}/sqrt")
    g.node("Sqrt", [g.value(op.inputs[0])], [root], root)
    g.emit(op, "Reciprocal", [root])


@register("ELU", "Elu (alpha 1)", input_count(1), SAME_SHAPE, FLOAT_INPUT)
def elu(g: Graph, op: Operator) -> None:
    g.emit(op, "Elu", [g.value(op.inputs[0])], alpha=1.0)


@register("GELU", "Gelu (approximate tanh when the option says so)", input_count(1), SAME_SHAPE, FLOAT_INPUT)
def gelu(g: Graph, op: Operator) -> None:
    g.emit(op, "Gelu", [g.value(op.inputs[0])], approximate="tanh" if op.options.get("approximate") else "none")


@register("RELU_0_TO_1", "Clip(0, 1)", input_count(1), SAME_SHAPE, FLOAT_INPUT)
def relu_0_to_1(g: Graph, op: Operator) -> None:
    g.emit(op, "Clip", [g.value(op.inputs[0]), g.scalar(0.0), g.scalar(1.0)])


def _has_axes(g: Graph, op: Operator) -> Result:
    return OK if g.shape(op.inputs[0]) else fail("input is a scalar")


@register("LOG_SOFTMAX", "LogSoftmax over the last axis", input_count(1), SAME_SHAPE, FLOAT_INPUT,
          Check("input has rank >= 1", _has_axes))
def log_softmax(g: Graph, op: Operator) -> None:
    g.emit(op, "LogSoftmax", [g.value(op.inputs[0])], axis=-1)


# --------------------------------------------------------------------------- binary


def _binary(name: str, onnx_op: str, doc: str, *checks: Check) -> None:
    def convert(g: Graph, op: Operator) -> None:
        g.emit(op, onnx_op, [g.value(i) for i in op.inputs])
    convert.__doc__ = f"{name} -> {onnx_op}."
    register(name, doc, input_count(2), BROADCAST, *checks)(convert)


for _name, _onnx in (("GREATER", "Greater"), ("GREATER_EQUAL", "GreaterOrEqual"), ("LESS", "Less"),
                     ("LESS_EQUAL", "LessOrEqual")):
    _binary(_name, _onnx, f"{_onnx} (a bool tensor)", NUMERIC_INPUT)
_binary("LOGICAL_AND", "And", "And", BOOL_INPUTS)
_binary("LOGICAL_OR", "Or", "Or", BOOL_INPUTS)
_binary("POW", "Pow", "Pow", FLOAT_INPUT)


@register("NOT_EQUAL", "Not(Equal) (a bool tensor)", input_count(2), BROADCAST)
def not_equal(g: Graph, op: Operator) -> None:
    same = g.fresh(f"{g.name(op)}/equal")
    g.node("Equal", [g.value(i) for i in op.inputs], [same], same)
    g.emit(op, "Not", [same])


@register("SQUARED_DIFFERENCE", "Sub, then Mul by itself", input_count(2), BROADCAST, NUMERIC_INPUT)
def squared_difference(g: Graph, op: Operator) -> None:
    diff = g.fresh(f"{g.name(op)}/diff")
    g.node("Sub", [g.value(i) for i in op.inputs], [diff], diff)
    g.emit(op, "Mul", [diff, diff])


def _as_double(g: Graph, op: Operator) -> list[str]:
    """Both inputs in float64, where int32 division and flooring are exact."""
    names = []
    for k, index in enumerate(op.inputs):
        cast = g.fresh(f"{g.name(op)}/double{k}")
        g.node("Cast", [g.value(index)], [cast], cast, to=TensorProto.DOUBLE)
        names.append(cast)
    return names


def _floored_quotient(g: Graph, op: Operator, a: str, b: str) -> str:
    quotient, floored = g.fresh(f"{g.name(op)}/quotient"), g.fresh(f"{g.name(op)}/floor")
    g.node("Div", [a, b], [quotient], quotient)
    g.node("Floor", [quotient], [floored], floored)
    return floored


@register("FLOOR_DIV", "Floor(Div) (integers through float64, exact for int32)", input_count(2), BROADCAST,
          NUMERIC_INPUT)
def floor_div(g: Graph, op: Operator) -> None:
    if _is_float(g, op.inputs[0]):
        a, b = (g.value(i) for i in op.inputs)
        g.emit(op, "Floor", [_quotient(g, op, a, b)])
        return
    a, b = _as_double(g, op)
    floored = _floored_quotient(g, op, a, b)
    g.emit(op, "Cast", [floored], to=onnx_type(g.tensor(op.outputs[0])))


def _quotient(g: Graph, op: Operator, a: str, b: str) -> str:
    quotient = g.fresh(f"{g.name(op)}/quotient")
    g.node("Div", [a, b], [quotient], quotient)
    return quotient


@register("FLOOR_MOD", "Mod (integers); a - b * floor(a / b) (float)", input_count(2), BROADCAST, NUMERIC_INPUT)
def floor_mod(g: Graph, op: Operator) -> None:
    a, b = (g.value(i) for i in op.inputs)
    if not _is_float(g, op.inputs[0]):
        g.emit(op, "Mod", [a, b], fmod=0)
        return
    floored = _floored_quotient(g, op, a, b)
    product = g.fresh(f"{g.name(op)}/product")
    g.node("Mul", [b, floored], [product], product)
    g.emit(op, "Sub", [a, product])


# --------------------------------------------------------------------------- FILL, ZEROS_LIKE


def _fill_shape(g: Graph, op: Operator) -> Result:
    dims, value = g.const(op.inputs[0]), g.shape(op.inputs[1])
    if value not in ((), (1,)):
        return fail(f"value has shape {list(value)}, expected a scalar")
    if dims is not None and tuple(int(d) for d in dims.reshape(-1)) != g.shape(op.outputs[0]):
        return fail(f"dims {dims.tolist()} differ from the output shape {list(g.shape(op.outputs[0]))}")
    return OK


@register("FILL", "Expand of the value to the output's static shape", input_count(2),
          Check("value is a scalar; constant dims equal the output shape", _fill_shape))
def fill(g: Graph, op: Operator) -> None:
    g.emit(op, "Expand", [g.value(op.inputs[1]), g.ints(f"{g.name(op)}/shape", g.shape(op.outputs[0]))])


@register("ZEROS_LIKE", "a constant: zeros of the input's static shape and type", input_count(1), SAME_SHAPE,
          NUMERIC_INPUT)
def zeros_like(g: Graph, op: Operator) -> None:
    kind = onnx_type(g.tensor(op.inputs[0]))
    zero = g.scalar(0.0) if kind == TensorProto.FLOAT else g.scalar(0, _INT_TYPES[kind])
    g.emit(op, "Expand", [zero, g.ints(f"{g.name(op)}/shape", g.shape(op.outputs[0]))])


# --------------------------------------------------------------------------- ADD_N, ATAN2, SELECT, CAST, StableHLO


def _same_shapes(g: Graph, op: Operator) -> Result:
    shapes = {g.shape(i) for i in (*op.inputs, *op.outputs)}
    return OK if len(shapes) == 1 else fail(f"inputs and output of shapes {sorted(list(s) for s in shapes)}")


SAME_SHAPES = Check("inputs and output have one shape", _same_shapes)


@register("ADD_N", "Sum", input_count(1, 1 << 16), SAME_SHAPES, NUMERIC_INPUT)
def add_n(g: Graph, op: Operator) -> None:
    g.emit(op, "Sum", [g.value(i) for i in op.inputs])


@register("ATAN2", "Atan(y / x), moved by +-pi where x < 0", input_count(2), BROADCAST, FLOAT_INPUT)
def atan2(g: Graph, op: Operator) -> None:
    y, x = (g.value(i) for i in op.inputs)
    base = g.name(op)
    names = {role: g.fresh(f"{base}/{role}") for role in ("ratio", "atan", "left", "upper", "turn", "turned")}
    g.node("Div", [y, x], [names["ratio"]], names["ratio"])
    g.node("Atan", [names["ratio"]], [names["atan"]], names["atan"])
    g.node("Less", [x, g.scalar(0.0)], [names["left"]], names["left"])
    g.node("GreaterOrEqual", [y, g.scalar(0.0)], [names["upper"]], names["upper"])
    g.node("Where", [names["upper"], g.scalar(float(np.pi)), g.scalar(float(-np.pi))], [names["turn"]], names["turn"])
    g.node("Add", [names["atan"], names["turn"]], [names["turned"]], names["turned"])
    g.emit(op, "Where", [names["left"], names["turned"], names["atan"]])


def _select_condition(g: Graph, op: Operator) -> Result:
    cond, x = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    if g.tensor(op.inputs[0]).dtype != "BOOL":
        return fail(f"condition is {g.tensor(op.inputs[0]).dtype}, not BOOL")
    if g.shape(op.inputs[2]) != x or g.shape(op.outputs[0]) != x:
        return fail("the two value inputs and the output differ in shape")
    return OK if cond == x or (len(cond) == 1 and x and cond[0] == x[0]) else \
        fail(f"condition {list(cond)} is neither the values' shape {list(x)} nor their first dimension")


@register("SELECT", "Where (a 1-D condition picks whole rows)", input_count(3),
          Check("a BOOL condition of the values' shape, or 1-D over their first dimension", _select_condition))
def select(g: Graph, op: Operator) -> None:
    cond, rank = g.value(op.inputs[0]), len(g.shape(op.inputs[1]))
    if g.shape(op.inputs[0]) != g.shape(op.inputs[1]):
        rows = g.fresh(f"{g.name(op)}/rows")
        g.node("Reshape", [cond, g.ints(f"{rows}/shape", [-1] + [1] * (rank - 1))], [rows], rows)
        cond = rows
    g.emit(op, "Where", [cond, g.value(op.inputs[1]), g.value(op.inputs[2])])


_CAST_TYPES = {"FLOAT32": TensorProto.FLOAT, "INT32": TensorProto.INT32, "INT64": TensorProto.INT64,
               "BOOL": TensorProto.BOOL}


def _cast_types(g: Graph, op: Operator) -> Result:
    pair = [g.tensor(i).dtype for i in (op.inputs[0], op.outputs[0])]
    return OK if all(t in _CAST_TYPES for t in pair) else fail(f"a cast from {pair[0]} to {pair[1]}")


@register("CAST", "Cast (float to integer truncates, as TFLite does)", input_count(1), SAME_SHAPE,
          Check("float32, int32, int64 or bool on both sides", _cast_types))
def cast(g: Graph, op: Operator) -> None:
    g.emit(op, "Cast", [g.value(op.inputs[0])], to=_CAST_TYPES[g.tensor(op.outputs[0]).dtype])


for _name, _onnx in (("STABLEHLO_ADD", "Add"), ("STABLEHLO_MULTIPLY", "Mul"), ("STABLEHLO_MAXIMUM", "Max"),
                     ("STABLEHLO_MINIMUM", "Min")):
    _binary(_name, _onnx, f"{_onnx} (operands of one shape)", SAME_SHAPES, NUMERIC_INPUT)


def _and_types(g: Graph, op: Operator) -> Result:
    dtype = g.tensor(op.inputs[0]).dtype
    return OK if dtype in ("BOOL", "INT32", "INT64") else fail(f"operands are {dtype}")


@register("STABLEHLO_AND", "And (bool) or BitwiseAnd (integers)", input_count(2), SAME_SHAPES,
          Check("bool, int32 or int64 operands", _and_types))
def stablehlo_and(g: Graph, op: Operator) -> None:
    kind = "And" if g.tensor(op.inputs[0]).dtype == "BOOL" else "BitwiseAnd"
    g.emit(op, kind, [g.value(i) for i in op.inputs])


def _int_inputs(g: Graph, op: Operator) -> Result:
    bad = [g.tensor(i).dtype for i in op.inputs if g.tensor(i).dtype not in ("INT32", "INT64")]
    return fail(f"operands are {bad}, expected int32 or int64") if bad else OK


INT_INPUTS = Check("int32 or int64 operands", _int_inputs)
_binary("BITWISE_XOR", "BitwiseXor", "BitwiseXor", INT_INPUTS)


def _power_of_two(g: Graph, op: Operator) -> str:
    """``2 ** shift`` in float64 for the shift amounts (input 1)."""
    shift, power = g.fresh(f"{g.name(op)}/shift"), g.fresh(f"{g.name(op)}/power")
    g.node("Cast", [g.value(op.inputs[1])], [shift], shift, to=TensorProto.DOUBLE)
    g.node("Pow", [g.scalar(2.0, np.float64), shift], [power], power)
    return power


@register("RIGHT_SHIFT", "Floor(x / 2^y) in float64 (an arithmetic shift, exact for int32)", input_count(2),
          BROADCAST, INT_INPUTS)
def right_shift(g: Graph, op: Operator) -> None:
    value = g.fresh(f"{g.name(op)}/value")
    g.node("Cast", [g.value(op.inputs[0])], [value], value, to=TensorProto.DOUBLE)
    floored = _floored_quotient(g, op, value, _power_of_two(g, op))
    g.emit(op, "Cast", [floored], to=onnx_type(g.tensor(op.outputs[0])))


@register("STABLEHLO_SHIFT_LEFT", "Mul by 2^y (int32 wrap-around)", input_count(2), SAME_SHAPES, INT_INPUTS)
def stablehlo_shift_left(g: Graph, op: Operator) -> None:
    kind = onnx_type(g.tensor(op.outputs[0]))
    factor = g.fresh(f"{g.name(op)}/factor")
    g.node("Cast", [_power_of_two(g, op)], [factor], factor, to=TensorProto.INT64)
    wide, product = g.fresh(f"{g.name(op)}/wide"), g.fresh(f"{g.name(op)}/product")
    g.node("Cast", [g.value(op.inputs[0])], [wide], wide, to=TensorProto.INT64)
    g.node("Mul", [wide, factor], [product], product)
    g.emit(op, "Cast", [product], to=kind)
