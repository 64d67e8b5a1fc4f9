"""Float CPU operators for the nodes that have no int8 form: Vela places what the NPU cannot run on the CPU,
so the writer writes such a node as the float TFLite operator that computes it, with DEQUANTIZE before it
(its quantized inputs) and QUANTIZE after it (an output that a quantized operator reads), instead of refusing
the model. Float tensors keep the ONNX layout: a channel-last quantized input is transposed back before its
DEQUANTIZE, and an output stored channel-last is transposed after its QUANTIZE (int8 transposes, which Vela
runs on the NPU; ``floats.py``). Graph inputs and outputs that the QDQ model leaves float (or
int32/int64/bool: token ids, masks) are TFLite inputs and outputs of their own type. LSTM and GRU are
unrolled (``recurrent.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from accelbuild.targets.ethos_u.tflite import recurrent
from accelbuild.targets.ethos_u.tflite.einsum import einsum
from accelbuild.targets.ethos_u.tflite.floats import float_in, float_out, real_constant, settle, transposed
from accelbuild.targets.ethos_u.tflite.writer import Unsupported, Writer
from accelbuild.util import onnx_graph as g

UNARY = {"Sqrt": "SQRT", "Exp": "EXP", "Log": "LOG", "Neg": "NEG", "Abs": "ABS", "Not": "LOGICAL_NOT",
         "Relu": "RELU", "Sigmoid": "LOGISTIC", "Tanh": "TANH", "Floor": "FLOOR", "Ceil": "CEIL",
         "Sin": "SIN", "Cos": "COS"}
BINARY = {"Add": "ADD", "Sub": "SUB", "Mul": "MUL", "Div": "DIV", "Pow": "POW", "Max": "MAXIMUM",
          "Min": "MINIMUM", "Equal": "EQUAL", "Less": "LESS", "Greater": "GREATER", "And": "LOGICAL_AND",
          "Or": "LOGICAL_OR"}
REDUCE = {"ReduceSum": "SUM", "ReduceMean": "MEAN", "ReduceMax": "REDUCE_MAX", "ReduceMin": "REDUCE_MIN"}


def _unary(w: Writer, node: onnx.NodeProto) -> None:
    w.op(UNARY[node.op_type], [float_in(w, node.input[0])], [float_out(w, node.output[0])])


def _binary(w: Writer, node: onnx.NodeProto) -> None:
    if len(node.input) != 2:
        raise Unsupported(f"{node.op_type} of {len(node.input)} inputs")
    inputs = [float_in(w, name) for name in node.input]
    options = {"fused_activation_function": "NONE"} if node.op_type in ("Add", "Sub", "Mul", "Div") else None
    w.op(BINARY[node.op_type], inputs, [float_out(w, node.output[0])], options)


def _reciprocal(w: Writer, node: onnx.NodeProto) -> None:
    one = w.const(f"{node.name}/one", np.ones((), dtype=np.float32), "float32")
    w.op("DIV", [one, float_in(w, node.input[0])], [float_out(w, node.output[0])],
         {"fused_activation_function": "NONE"})


def _cast(w: Writer, node: onnx.NodeProto) -> None:
    w.op("CAST", [float_in(w, node.input[0])], [float_out(w, node.output[0])])


def _where(w: Writer, node: onnx.NodeProto) -> None:
    w.op("SELECT_V2", [float_in(w, name) for name in node.input], [float_out(w, node.output[0])])


def _gather(w: Writer, node: onnx.NodeProto) -> None:
    rank = len(w.qg.shape(node.input[0]))
    axis = int(g.attribute(node, "axis", 0)) % rank
    w.op("GATHER", [float_in(w, node.input[0]), _indices(w, node.input[1], w.qg.shape(node.input[0])[axis])],
         [float_out(w, node.output[0])], {"axis": axis, "batch_dims": 0})


def _indices(w: Writer, name: str, size: int) -> int:
    """Gather indices; constant negative indices are made positive (TFLite's GATHER takes none)."""
    value = w.qg.constant(name)
    if value is None:
        return float_in(w, name)
    value = np.where(value < 0, value + size, value).astype(np.int32)
    return w.const(f"{name}/int32", value, "int32")


def _reduce(w: Writer, node: onnx.NodeProto) -> None:
    rank = len(w.qg.shape(node.input[0]))
    axes_value = w.qg.constant(node.input[1]) if len(node.input) > 1 and node.input[1] else None
    axes = [int(a) % rank for a in (axes_value.reshape(-1) if axes_value is not None
                                    else g.attribute(node, "axes", list(range(rank))))]
    if len(node.input) > 1 and node.input[1] and axes_value is None:
        raise Unsupported("axes that are not constants")
    keep = bool(int(g.attribute(node, "keepdims", 1)))
    w.op(REDUCE[node.op_type], [float_in(w, node.input[0]), w.int32(f"{node.name}/axes", sorted(axes))],
         [float_out(w, node.output[0])], {"keep_dims": keep})


def _matmul(w: Writer, node: onnx.NodeProto) -> None:
    shapes = [w.qg.shape(name) for name in node.input[:2]]
    if min(len(s) for s in shapes) < 2:
        raise Unsupported("MatMul of a vector")
    w.op("BATCH_MATMUL", [float_in(w, name) for name in node.input[:2]], [float_out(w, node.output[0])],
         {"adj_x": False, "adj_y": False})


def _gemm(w: Writer, node: onnx.NodeProto) -> None:
    """alpha * op(A) @ op(B) + beta * C as FULLY_CONNECTED on constant B (alpha folded into it), or
    BATCH_MATMUL of two tensors, then MUL by alpha and ADD of beta * C where they are not folded."""
    alpha, beta = float(g.attribute(node, "alpha", 1.0)), float(g.attribute(node, "beta", 1.0))
    trans_a, trans_b = int(g.attribute(node, "transA", 0)), int(g.attribute(node, "transB", 0))
    a = float_in(w, node.input[0])
    if trans_a:
        a = transposed(w, a, (1, 0), f"{node.name}/a_t")
    b_value = real_constant(w, node.input[1])
    out_name = node.output[0]
    c_name = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    c_value = real_constant(w, c_name) if c_name else None
    units = w.qg.shape(out_name)[1]
    if b_value is not None:
        weights = (b_value if trans_b else b_value.T) * np.float32(alpha)
        bias = -1
        if c_value is not None and c_value.size == units:
            bias = w.const(f"{node.name}/bias", (c_value.reshape(-1) * np.float32(beta)).astype(np.float32), "float32")
            c_name = ""
        product = float_out(w, out_name) if not c_name else w.b.add_tensor(f"{out_name}/product",
                                                                             w.qg.shape(out_name), "float32")
        w.op("FULLY_CONNECTED", [a, w.const(f"{node.name}/weights", np.ascontiguousarray(weights, np.float32),
                                            "float32"), bias], [product],
             {"fused_activation_function": "NONE", "keep_num_dims": False})
    else:
        product = w.b.add_tensor(f"{out_name}/product", w.qg.shape(out_name), "float32")
        w.op("BATCH_MATMUL", [a, float_in(w, node.input[1])], [product], {"adj_x": False, "adj_y": bool(trans_b)})
        if alpha != 1.0:
            scaled = w.b.add_tensor(f"{out_name}/scaled", w.qg.shape(out_name), "float32")
            w.op("MUL", [product, w.const(f"{node.name}/alpha", np.asarray(alpha, np.float32), "float32")],
                 [scaled], {"fused_activation_function": "NONE"})
            product = scaled
        if not c_name:
            w.op("RESHAPE", [product, w.int32(f"{node.name}/shape", list(w.qg.shape(out_name)))],
                 [float_out(w, out_name)])
            return
    if c_name:
        c = float_in(w, c_name)
        if beta != 1.0:
            scaled_c = w.b.add_tensor(f"{c_name}/beta", w.b.shape(c), "float32")
            w.op("MUL", [c, w.const(f"{node.name}/beta", np.asarray(beta, np.float32), "float32")], [scaled_c],
                 {"fused_activation_function": "NONE"})
            c = scaled_c
        w.op("ADD", [product, c], [float_out(w, out_name)], {"fused_activation_function": "NONE"})


def _reshape(w: Writer, node: onnx.NodeProto) -> None:
    out = node.output[0]
    w.op("RESHAPE", [float_in(w, node.input[0]), w.int32(f"{node.name}/shape", list(w.qg.shape(out)))],
         [float_out(w, out)])


def _transpose(w: Writer, node: onnx.NodeProto) -> None:
    rank = len(w.qg.shape(node.input[0]))
    perm = [int(p) for p in g.attribute(node, "perm", list(reversed(range(rank))))]
    w.op("TRANSPOSE", [float_in(w, node.input[0]), w.int32(f"{node.name}/perm", perm)], [float_out(w, node.output[0])])


def _concat(w: Writer, node: onnx.NodeProto) -> None:
    rank = len(w.qg.shape(node.output[0]))
    axis = int(g.attribute(node, "axis", 0)) % rank
    w.op("CONCATENATION", [float_in(w, name) for name in node.input if name], [float_out(w, node.output[0])],
         {"axis": axis, "fused_activation_function": "NONE"})


def _softmax(w: Writer, node: onnx.NodeProto) -> None:
    rank = len(w.qg.shape(node.input[0]))
    if int(g.attribute(node, "axis", -1)) % rank != rank - 1:
        raise Unsupported("Softmax over an axis other than the last")
    w.op("SOFTMAX", [float_in(w, node.input[0])], [float_out(w, node.output[0])], {"beta": 1.0})


FLOAT_CONVERTERS: dict[str, Callable[[Writer, onnx.NodeProto], None]] = {
    **{op: _unary for op in UNARY}, **{op: _binary for op in BINARY}, **{op: _reduce for op in REDUCE},
    "Reciprocal": _reciprocal, "Cast": _cast, "Where": _where, "Gather": _gather,
    "MatMul": _matmul, "Gemm": _gemm, "Reshape": _reshape, "Flatten": _reshape, "Squeeze": _reshape,
    "Unsqueeze": _reshape, "Identity": _reshape, "Transpose": _transpose, "Concat": _concat,
    "Softmax": _softmax, "LSTM": recurrent.lstm, "GRU": recurrent.gru, "Einsum": einsum,
}
def write_float(w: Writer, node: onnx.NodeProto, reason: str) -> None:
    """``node`` as float TFLite operators between DEQUANTIZE and QUANTIZE (``reason``: why not int8)."""
    convert = FLOAT_CONVERTERS.get(node.op_type)
    if convert is None:
        raise Unsupported("TFLite has no operator the writer maps it to")
    state = w.snapshot()
    try:
        convert(w, node)
        for name in node.output:
            if name:
                settle(w, name)
    except Unsupported:
        w.restore(state)
        raise
    w.fallback.append({"node": node.name, "op": node.op_type, "why": reason})
