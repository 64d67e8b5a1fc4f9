"""Float CPU operators for the nodes that have no int8 form: Vela places what the NPU cannot run on the CPU,
so the writer writes such a node as the float TFLite operator that computes it, with DEQUANTIZE before it
(its quantized inputs) and QUANTIZE after it (an output that a quantized operator reads), instead of refusing
the model. Float tensors keep the ONNX layout: a channel-last quantized input is transposed back before its
DEQUANTIZE, and an output stored channel-last is transposed after its QUANTIZE (int8 transposes, which Vela
runs on the NPU). Graph inputs and outputs
that the QDQ model leaves float (or int32/int64/bool: token ids, masks) are TFLite inputs and outputs of
their own type.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from accelbuild.targets.ethos_u.tflite import layout
from accelbuild.targets.ethos_u.tflite.writer import Unsupported, Writer
from accelbuild.util import onnx_graph as g

TYPES = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.INT32: "int32", onnx.TensorProto.INT64: "int64",
         onnx.TensorProto.BOOL: "bool", onnx.TensorProto.INT8: "int8", onnx.TensorProto.INT16: "int16",
         onnx.TensorProto.UINT8: "uint8", onnx.TensorProto.FLOAT16: "float16"}


# ---------------------------------------------------------------- tensors


def dtype_of(w: Writer, name: str) -> str:
    elem = g.elem_type(w.qg.model, name)
    if elem not in TYPES:
        raise Unsupported(f"tensor {name!r} has an element type TFLite does not hold ({elem})")
    return TYPES[elem]


def float_in(w: Writer, name: str) -> int:
    """``name`` as a tensor of its own (float) type in ONNX layout."""
    if name in w.floats:
        return w.floats[name]
    key = w.qg.key(name)
    if key is not None:
        t = w.qg.tensors[key]
        cached = f"{key}/dequantized"  # the codes' values: not a float output of the same name
        if cached in w.floats:
            return w.floats[cached]
        source = w.tensor(t)
        if w.is_nhwc(t):  # transposed as int8 codes: Vela runs that TRANSPOSE on the NPU
            source = _transposed(w, source, layout.TO_NCHW, f"{t.name}/nchw")
        value = w.b.add_tensor(f"{t.name}/dequantized", w.b.shape(source), "float32")
        w.op("DEQUANTIZE", [source], [value])
        w.floats[cached] = value
        return value
    if name in w.qg.consts:
        c = w.qg.consts[name]
        axis_shape = [1] * c.codes.ndim
        if c.scales.size > 1:
            axis_shape[c.axis] = c.scales.size
        real = (c.codes.astype(np.float32) - c.zero_points.reshape(axis_shape).astype(np.float32)) \
            * c.scales.reshape(axis_shape)
        w.floats[name] = w.const(f"{name}/float", real.astype(np.float32), "float32")
        return w.floats[name]
    value = w.qg.constant(name)
    if value is not None:
        dtype = TYPES.get(onnx.helper.np_dtype_to_tensor_dtype(value.dtype))
        if dtype is None:
            raise Unsupported(f"constant {name!r} of type {value.dtype}")
        w.floats[name] = w.const(name, value, dtype)
        return w.floats[name]
    raise Unsupported(f"input {name!r} is neither quantized nor written as a float tensor")


def float_out(w: Writer, name: str, dtype: str | None = None) -> int:
    """A new tensor for the ONNX output ``name`` (ONNX shape and layout, its ONNX type)."""
    key = w.qg.key(name)
    clashes = key is not None and w.qg.tensors[key].name == name  # the quantized tensor has this name
    tensor = w.b.add_tensor(f"{name}/float" if clashes else name, w.qg.shape(name), dtype or dtype_of(w, name))
    w.floats[name] = tensor
    return tensor


def settle(w: Writer, name: str) -> None:
    """An output a QuantizeLinear reads: QUANTIZE it into its quantized tensor (channel-last if stored so)."""
    key = w.qg.key(name)
    if key is None or key in w.ids:
        return
    t = w.qg.tensors[key]
    if not w.is_nhwc(t):
        w.op("QUANTIZE", [w.floats[name]], [w.tensor(t)])
        return
    codes = w.b.add_tensor(f"{t.name}/nchw", t.shape, t.dtype, quant=w.b.tensors[w.tensor(t)].quant)
    w.op("QUANTIZE", [w.floats[name]], [codes])
    w.op("TRANSPOSE", [codes, w.int32(f"{t.name}/nhwc/perm", list(layout.TO_NHWC))], [w.tensor(t)])


def _transposed(w: Writer, tensor: int, perm: tuple[int, ...], name: str) -> int:
    shape = w.b.shape(tensor)
    source = w.b.tensors[tensor]
    out = w.b.add_tensor(name, tuple(shape[p] for p in perm), source.dtype, quant=source.quant)
    w.op("TRANSPOSE", [tensor, w.int32(f"{name}/perm", list(perm))], [out])
    return out


def graph_inputs(w: Writer) -> None:
    """The graph inputs the QDQ model leaves unquantized, as TFLite inputs of their own type."""
    for value in g.real_inputs(w.qg.model.graph):
        if w.qg.key(value.name) is None:
            w.floats[value.name] = w.b.add_tensor(value.name, w.qg.shape(value.name), dtype_of(w, value.name))


def graph_io(w: Writer) -> tuple[list[int], list[int]]:
    """TFLite inputs and outputs, in the ONNX graph's order."""
    graph = w.qg.model.graph

    def tensor(name: str) -> int:
        key = w.qg.key(name)
        if key is not None:
            return w.tensor(w.qg.tensors[key])
        if name not in w.floats:
            raise Unsupported(f"graph output {name!r} is not written")
        return w.floats[name]

    return [tensor(v.name) for v in g.real_inputs(graph)], [tensor(v.name) for v in graph.output]


# ---------------------------------------------------------------- operators


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
    axis = int(g.attribute(node, "axis", 0)) % rank  # type: ignore[arg-type]
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
                                    else g.attribute(node, "axes", list(range(rank))))]  # type: ignore[union-attr]
    if len(node.input) > 1 and node.input[1] and axes_value is None:
        raise Unsupported("axes that are not constants")
    keep = bool(int(g.attribute(node, "keepdims", 1)))  # type: ignore[arg-type]
    w.op(REDUCE[node.op_type], [float_in(w, node.input[0]), w.int32(f"{node.name}/axes", sorted(axes))],
         [float_out(w, node.output[0])], {"keep_dims": keep})


def _pad(w: Writer, node: onnx.NodeProto) -> None:
    mode = _text(g.attribute(node, "mode", b"constant"))
    pads = w.qg.constant(node.input[1])
    if pads is None:
        raise Unsupported("pads that are not constants")
    if len(node.input) > 3 and node.input[3]:
        raise Unsupported("Pad with axes")
    rank = len(w.qg.shape(node.input[0]))
    pairs = np.asarray(pads, dtype=np.int64).reshape(2, rank).T
    if np.any(pairs < 0):
        raise Unsupported("negative pads")
    paddings = w.const(f"{node.name}/paddings", np.ascontiguousarray(pairs.astype(np.int32)), "int32")
    x, out = float_in(w, node.input[0]), float_out(w, node.output[0])
    if mode == "reflect":
        w.op("MIRROR_PAD", [x, paddings], [out], {"mode": "REFLECT"})
    elif mode == "constant":
        value = w.qg.constant(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if value is None and len(node.input) > 2 and node.input[2]:
            raise Unsupported("a pad value that is not a constant")
        fill = np.asarray(0 if value is None else value.reshape(-1)[0], dtype=np.float32)
        w.op("PADV2", [x, paddings, w.const(f"{node.name}/value", fill, "float32")], [out])
    else:
        raise Unsupported(f"mode {mode} (TFLite pads with a constant or by reflection)")


def _matmul(w: Writer, node: onnx.NodeProto) -> None:
    shapes = [w.qg.shape(name) for name in node.input[:2]]
    if min(len(s) for s in shapes) < 2:
        raise Unsupported("MatMul of a vector")
    w.op("BATCH_MATMUL", [float_in(w, name) for name in node.input[:2]], [float_out(w, node.output[0])],
         {"adj_x": False, "adj_y": False})


def _gemm(w: Writer, node: onnx.NodeProto) -> None:
    """alpha * op(A) @ op(B) + beta * C as FULLY_CONNECTED on constant B (alpha folded into it), or
    BATCH_MATMUL of two tensors, then MUL by alpha and ADD of beta * C where they are not folded."""
    alpha, beta = float(g.attribute(node, "alpha", 1.0)), float(g.attribute(node, "beta", 1.0))  # type: ignore
    trans_a, trans_b = int(g.attribute(node, "transA", 0)), int(g.attribute(node, "transB", 0))  # type: ignore
    a = float_in(w, node.input[0])
    if trans_a:
        a = _transposed(w, a, (1, 0), f"{node.name}/a_t")
    b_value = _real_constant(w, node.input[1])
    out_name = node.output[0]
    c_name = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    c_value = _real_constant(w, c_name) if c_name else None
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


def _real_constant(w: Writer, name: str) -> np.ndarray | None:
    """A constant operand's real values (a quantized constant dequantized), or None for a tensor."""
    if name in w.qg.consts:
        c = w.qg.consts[name]
        shape = [1] * c.codes.ndim
        if c.scales.size > 1:
            shape[c.axis] = c.scales.size
        return ((c.codes.astype(np.float32) - c.zero_points.reshape(shape)) * c.scales.reshape(shape)).astype(np.float32)
    value = w.qg.constant(name)
    return None if value is None else value.astype(np.float32)


def _reshape(w: Writer, node: onnx.NodeProto) -> None:
    out = node.output[0]
    w.op("RESHAPE", [float_in(w, node.input[0]), w.int32(f"{node.name}/shape", list(w.qg.shape(out)))],
         [float_out(w, out)])


def _transpose(w: Writer, node: onnx.NodeProto) -> None:
    rank = len(w.qg.shape(node.input[0]))
    perm = [int(p) for p in g.attribute(node, "perm", list(reversed(range(rank))))]  # type: ignore[union-attr]
    w.op("TRANSPOSE", [float_in(w, node.input[0]), w.int32(f"{node.name}/perm", perm)], [float_out(w, node.output[0])])


def _concat(w: Writer, node: onnx.NodeProto) -> None:
    rank = len(w.qg.shape(node.output[0]))
    axis = int(g.attribute(node, "axis", 0)) % rank  # type: ignore[arg-type]
    w.op("CONCATENATION", [float_in(w, name) for name in node.input if name], [float_out(w, node.output[0])],
         {"axis": axis, "fused_activation_function": "NONE"})


def _softmax(w: Writer, node: onnx.NodeProto) -> None:
    rank = len(w.qg.shape(node.input[0]))
    if int(g.attribute(node, "axis", -1)) % rank != rank - 1:  # type: ignore[arg-type]
        raise Unsupported("Softmax over an axis other than the last")
    w.op("SOFTMAX", [float_in(w, node.input[0])], [float_out(w, node.output[0])], {"beta": 1.0})


def _lstm(w: Writer, node: onnx.NodeProto) -> None:
    """A forward ONNX LSTM (default activations, zero initial state, no clip) unrolled into float operators, one
    step after another: the input projection of every step in one FULLY_CONNECTED (both biases summed), then
    per step the recurrent FULLY_CONNECTED, ADD, SPLIT into ONNX's gate blocks (i, o, f, c), LOGISTIC/TANH,
    the peephole and cell MULs. Vela 5.2 refuses a float UNIDIRECTIONAL_SEQUENCE_LSTM (int8/int16 only), so
    the recurrence is written as operators it places on the CPU. Y stacks the steps, Y_h is the last."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if _text(attrs.get("direction", b"forward")) != "forward":
        raise Unsupported("a bidirectional or reverse LSTM (write it as two forward ones, or crop it to the host)")
    if attrs.get("layout", 0) or attrs.get("input_forget", 0) or attrs.get("clip"):
        raise Unsupported("LSTM with layout 1, input_forget or clip")
    if [_text(a) for a in attrs.get("activations", [b"Sigmoid", b"Tanh", b"Tanh"])] != ["Sigmoid", "Tanh", "Tanh"]:
        raise Unsupported("LSTM activations other than Sigmoid, Tanh, Tanh")
    inputs = list(node.input) + [""] * (8 - len(node.input))
    outputs = list(node.output) + [""] * (3 - len(node.output))
    if outputs[2] and (w.qg.readers.get(outputs[2]) or outputs[2] in {v.name for v in w.qg.model.graph.output}):
        raise Unsupported("LSTM whose final cell state Y_c is read")
    weights, recurrent = _real_constant(w, inputs[1]), _real_constant(w, inputs[2])
    bias = _real_constant(w, inputs[3]) if inputs[3] else None
    if weights is None or recurrent is None or (inputs[3] and bias is None):
        raise Unsupported("LSTM weights or biases that are not constants")
    for index, what in ((5, "initial_h"), (6, "initial_c")):
        value = _real_constant(w, inputs[index]) if inputs[index] else None
        if inputs[index] and (value is None or np.any(value)):
            raise Unsupported(f"LSTM with a non-zero {what}")
    seq, batch, features = w.qg.shape(inputs[0])
    lengths = w.qg.constant(inputs[4]) if inputs[4] else None
    if inputs[4] and (lengths is None or np.any(lengths != seq)):
        raise Unsupported("LSTM sequence_lens shorter than the sequence")
    peep = _real_constant(w, inputs[7]) if inputs[7] else None
    hidden = recurrent.shape[-1]
    _Unrolled(w, node.name, hidden, batch, peep).run(inputs[0], weights[0], recurrent[0], bias, seq, features,
                                                    outputs[:2])


class _Unrolled:
    """The float operators of one unrolled forward LSTM."""

    def __init__(self, w: Writer, name: str, hidden: int, batch: int, peep: np.ndarray | None) -> None:
        self.w, self.name, self.hidden, self.batch = w, name, hidden, batch
        self.peep = None if peep is None else {g: peep[0, k * hidden:(k + 1) * hidden] for k, g in enumerate("iof")}

    def tensor(self, what: str, shape: tuple[int, ...]) -> int:
        return self.w.b.add_tensor(f"{self.name}/{what}", shape, "float32")

    def op(self, builtin: str, inputs: list[int], what: str, shape: tuple[int, ...] | None = None,
           options: dict | None = None) -> int:
        out = self.tensor(what, shape or (self.batch, self.hidden))
        self.w.op(builtin, inputs, [out], options)
        return out

    def arith(self, builtin: str, a: int, b: int, what: str) -> int:
        return self.op(builtin, [a, b], what, options={"fused_activation_function": "NONE"})

    def run(self, x_name: str, weights: np.ndarray, recurrent: np.ndarray, bias: np.ndarray | None, seq: int,
            features: int, outputs: list[str]) -> None:
        w, hidden, batch = self.w, self.hidden, self.batch
        summed = np.zeros(4 * hidden, np.float32) if bias is None else bias[0, :4 * hidden] + bias[0, 4 * hidden:]
        rows = self.op("RESHAPE", [float_in(w, x_name), w.int32(f"{self.name}/rows", [seq * batch, features])],
                       "rows", (seq * batch, features))
        projected = self.op("FULLY_CONNECTED", [rows, w.const(f"{self.name}/W", weights, "float32"),
                                                w.const(f"{self.name}/B", summed.astype(np.float32), "float32")],
                            "projected", (seq * batch, 4 * hidden),
                            {"fused_activation_function": "NONE", "keep_num_dims": False})
        r_weights = w.const(f"{self.name}/R", np.ascontiguousarray(recurrent, np.float32), "float32")
        peeps = {g: w.const(f"{self.name}/P_{g}", v.astype(np.float32), "float32") for g, v in (self.peep or {}).items()}
        h = c = -1
        steps = []
        for t in range(seq):
            gates = self.op("SLICE", [projected, w.int32(f"{self.name}/{t}/begin", [t * batch, 0]),
                                      w.int32(f"{self.name}/{t}/size", [batch, 4 * hidden])],
                            f"{t}/x_gates", (batch, 4 * hidden))
            if h >= 0:
                hr = self.op("FULLY_CONNECTED", [h, r_weights, -1], f"{t}/h_gates", (batch, 4 * hidden),
                             {"fused_activation_function": "NONE", "keep_num_dims": False})
                gates = self.op("ADD", [gates, hr], f"{t}/gates", (batch, 4 * hidden),
                                {"fused_activation_function": "NONE"})
            parts = [self.tensor(f"{t}/{g}_pre", (batch, hidden)) for g in "iofc"]
            w.op("SPLIT", [w.const(f"{self.name}/{t}/axis", np.asarray(1, np.int32), "int32"), gates], parts,
                 {"num_splits": 4})
            pre = dict(zip("iofc", parts))
            if c >= 0 and peeps:
                for g in "if":
                    pre[g] = self.arith("ADD", pre[g], self.arith("MUL", c, peeps[g], f"{t}/{g}_peep"), f"{t}/{g}_in")
            i, f = (self.op("LOGISTIC", [pre[g]], f"{t}/{g}") for g in "if")
            cell = self.arith("MUL", i, self.op("TANH", [pre["c"]], f"{t}/candidate"), f"{t}/new")
            if c >= 0:
                cell = self.arith("ADD", self.arith("MUL", f, c, f"{t}/kept"), cell, f"{t}/c")
            c = cell
            if peeps:
                pre["o"] = self.arith("ADD", pre["o"], self.arith("MUL", c, peeps["o"], f"{t}/o_peep"), f"{t}/o_in")
            h = self.arith("MUL", self.op("LOGISTIC", [pre["o"]], f"{t}/o"), self.op("TANH", [c], f"{t}/c_tanh"),
                           f"{t}/h")
            steps.append(h)
        self.finish(steps, seq, outputs)

    def finish(self, steps: list[int], seq: int, outputs: list[str]) -> None:
        """Y (the steps stacked, a direction axis added) and Y_h (the last step), where the node has them."""
        w, hidden, batch = self.w, self.hidden, self.batch
        if outputs[0]:
            stacked = steps[0] if seq == 1 else self.op("CONCATENATION", steps, "stacked", (seq * batch, hidden),
                                                          {"axis": 0, "fused_activation_function": "NONE"})
            w.op("RESHAPE", [stacked, w.int32(f"{self.name}/y_shape", [seq, 1, batch, hidden])],
                 [float_out(w, outputs[0])])
        if len(outputs) > 1 and outputs[1]:
            w.op("RESHAPE", [steps[-1], w.int32(f"{self.name}/y_h_shape", [1, batch, hidden])],
                 [float_out(w, outputs[1])])


def _gru(w: Writer, node: onnx.NodeProto) -> None:
    """A forward ONNX GRU (default activations, zero initial state, no clip; either linear_before_reset) unrolled
    into float operators like the LSTM (TFLite has no builtin GRU): per step z and r from the projected input
    and a recurrent FULLY_CONNECTED, the candidate from the reset state, H = h~ + z * (H - h~)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if _text(attrs.get("direction", b"forward")) != "forward":
        raise Unsupported("a bidirectional or reverse GRU (write it as two forward ones, or crop it to the host)")
    if attrs.get("layout", 0) or attrs.get("clip"):
        raise Unsupported("GRU with layout 1 or clip")
    if [_text(a) for a in attrs.get("activations", [b"Sigmoid", b"Tanh"])] != ["Sigmoid", "Tanh"]:
        raise Unsupported("GRU activations other than Sigmoid, Tanh")
    inputs = list(node.input) + [""] * (6 - len(node.input))
    outputs = list(node.output) + [""] * (2 - len(node.output))
    weights, recurrent = _real_constant(w, inputs[1]), _real_constant(w, inputs[2])
    bias = _real_constant(w, inputs[3]) if inputs[3] else None
    if weights is None or recurrent is None or (inputs[3] and bias is None):
        raise Unsupported("GRU weights or biases that are not constants")
    initial = _real_constant(w, inputs[5]) if inputs[5] else None
    if inputs[5] and (initial is None or np.any(initial)):
        raise Unsupported("GRU with a non-zero initial_h")
    seq, batch, features = w.qg.shape(inputs[0])
    lengths = w.qg.constant(inputs[4]) if inputs[4] else None
    if inputs[4] and (lengths is None or np.any(lengths != seq)):
        raise Unsupported("GRU sequence_lens shorter than the sequence")
    hidden = recurrent.shape[-1]
    bias = np.zeros((1, 6 * hidden), np.float32) if bias is None else bias
    u = _Unrolled(w, node.name, hidden, batch, None)
    x_bias = bias[0, :3 * hidden] + np.concatenate([bias[0, 3 * hidden:5 * hidden], np.zeros(hidden, np.float32)])
    rows = u.op("RESHAPE", [float_in(w, inputs[0]), w.int32(f"{node.name}/rows", [seq * batch, features])], "rows",
                (seq * batch, features))
    fc = {"fused_activation_function": "NONE", "keep_num_dims": False}
    projected = u.op("FULLY_CONNECTED", [rows, w.const(f"{node.name}/W", weights[0], "float32"),
                                         w.const(f"{node.name}/Wb", x_bias.astype(np.float32), "float32")],
                     "projected", (seq * batch, 3 * hidden), fc)
    r_zr = w.const(f"{node.name}/R_zr", np.ascontiguousarray(recurrent[0, :2 * hidden]), "float32")
    r_h = w.const(f"{node.name}/R_h", np.ascontiguousarray(recurrent[0, 2 * hidden:]), "float32")
    rb_h = w.const(f"{node.name}/Rb_h", np.ascontiguousarray(bias[0, 5 * hidden:]), "float32")
    h = w.const(f"{node.name}/h0", np.zeros((batch, hidden), np.float32), "float32")
    steps = []
    for t in range(seq):
        x_gates = u.op("SLICE", [projected, w.int32(f"{node.name}/{t}/begin", [t * batch, 0]),
                                 w.int32(f"{node.name}/{t}/size", [batch, 3 * hidden])], f"{t}/x_gates",
                       (batch, 3 * hidden))
        x_z, x_r, x_h = (u.tensor(f"{t}/x_{g}", (batch, hidden)) for g in "zrh")
        w.op("SPLIT", [w.const(f"{node.name}/{t}/axis3", np.asarray(1, np.int32), "int32"), x_gates], [x_z, x_r, x_h],
             {"num_splits": 3})
        h_zr = u.op("FULLY_CONNECTED", [h, r_zr, -1], f"{t}/h_zr", (batch, 2 * hidden), fc)
        h_z, h_r = (u.tensor(f"{t}/h_{g}", (batch, hidden)) for g in "zr")
        w.op("SPLIT", [w.const(f"{node.name}/{t}/axis2", np.asarray(1, np.int32), "int32"), h_zr], [h_z, h_r],
             {"num_splits": 2})
        z = u.op("LOGISTIC", [u.arith("ADD", x_z, h_z, f"{t}/z_pre")], f"{t}/z")
        r = u.op("LOGISTIC", [u.arith("ADD", x_r, h_r, f"{t}/r_pre")], f"{t}/r")
        if attrs.get("linear_before_reset", 0):
            recalled = u.arith("MUL", r, u.op("FULLY_CONNECTED", [h, r_h, rb_h], f"{t}/h_h", None, fc), f"{t}/reset")
        else:
            recalled = u.op("FULLY_CONNECTED", [u.arith("MUL", r, h, f"{t}/reset_h"), r_h, rb_h], f"{t}/reset", None,
                            fc)
        candidate = u.op("TANH", [u.arith("ADD", x_h, recalled, f"{t}/h_pre")], f"{t}/candidate")
        kept = u.arith("MUL", z, u.arith("SUB", h, candidate, f"{t}/delta"), f"{t}/kept")
        h = u.arith("ADD", candidate, kept, f"{t}/h")
        steps.append(h)
    u.finish(steps, seq, outputs)


FLOAT_CONVERTERS: dict[str, Callable[[Writer, onnx.NodeProto], None]] = {
    **{op: _unary for op in UNARY}, **{op: _binary for op in BINARY}, **{op: _reduce for op in REDUCE},
    "Reciprocal": _reciprocal, "Cast": _cast, "Where": _where, "Gather": _gather, "Pad": _pad,
    "MatMul": _matmul, "Gemm": _gemm, "Reshape": _reshape, "Flatten": _reshape, "Squeeze": _reshape,
    "Unsqueeze": _reshape, "Identity": _reshape, "Transpose": _transpose, "Concat": _concat,
    "Softmax": _softmax, "LSTM": _lstm, "GRU": _gru,
}
NO_FORM = {
    "Einsum": "Einsum: write it as MatMul/Transpose/Reshape in the exported model",
}


def write_float(w: Writer, node: onnx.NodeProto, reason: str) -> None:
    """``node`` as float TFLite operators between DEQUANTIZE and QUANTIZE (``reason``: why not int8)."""
    if node.op_type in NO_FORM:
        raise Unsupported(NO_FORM[node.op_type])
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


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
