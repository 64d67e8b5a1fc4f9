"""Recurrent layers as float CPU operators: a forward ONNX LSTM or GRU unrolled step by step into
FULLY_CONNECTED, ADD, SUB, SPLIT, LOGISTIC, TANH and MUL (Vela 5.2 rejects a float UNIDIRECTIONAL_SEQUENCE_LSTM,
taking int8/int16 only, and TFLite has no builtin GRU), each step after the other as ONNX defines it."""

from __future__ import annotations

import numpy as np
import onnx

from accelbuild.targets.ethos_u.tflite.floats import float_in, float_out, real_constant, text
from accelbuild.targets.ethos_u.tflite.writer import Unsupported, Writer


def lstm(w: Writer, node: onnx.NodeProto) -> None:
    """A forward ONNX LSTM (default activations, zero initial state, no clip) unrolled into float operators, one
    step after another: the input projection of every step in one FULLY_CONNECTED (both biases summed), then
    per step the recurrent FULLY_CONNECTED, ADD, SPLIT into ONNX's gate blocks (i, o, f, c), LOGISTIC/TANH,
    the peephole and cell MULs. Vela 5.2 refuses a float UNIDIRECTIONAL_SEQUENCE_LSTM (int8/int16 only), so
    the recurrence is written as operators it places on the CPU. Y stacks the steps, Y_h is the last."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if text(attrs.get("direction", b"forward")) != "forward":
        raise Unsupported("a bidirectional or reverse LSTM (write it as two forward ones, or crop it to the host)")
    if attrs.get("layout", 0) or attrs.get("input_forget", 0) or attrs.get("clip"):
        raise Unsupported("LSTM with layout 1, input_forget or clip")
    if [text(a) for a in attrs.get("activations", [b"Sigmoid", b"Tanh", b"Tanh"])] != ["Sigmoid", "Tanh", "Tanh"]:
        raise Unsupported("LSTM activations other than Sigmoid, Tanh, Tanh")
    inputs = list(node.input) + [""] * (8 - len(node.input))
    outputs = list(node.output) + [""] * (3 - len(node.output))
    if outputs[2] and (w.qg.readers.get(outputs[2]) or outputs[2] in {v.name for v in w.qg.model.graph.output}):
        raise Unsupported("LSTM whose final cell state Y_c is read")
    weights, recurrent = real_constant(w, inputs[1]), real_constant(w, inputs[2])
    bias = real_constant(w, inputs[3]) if inputs[3] else None
    if weights is None or recurrent is None or (inputs[3] and bias is None):
        raise Unsupported("LSTM weights or biases that are not constants")
    for index, what in ((5, "initial_h"), (6, "initial_c")):
        value = real_constant(w, inputs[index]) if inputs[index] else None
        if inputs[index] and (value is None or np.any(value)):
            raise Unsupported(f"LSTM with a non-zero {what}")
    seq, batch, features = w.qg.shape(inputs[0])
    lengths = w.qg.constant(inputs[4]) if inputs[4] else None
    if inputs[4] and (lengths is None or np.any(lengths != seq)):
        raise Unsupported("LSTM sequence_lens shorter than the sequence")
    peep = real_constant(w, inputs[7]) if inputs[7] else None
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


def gru(w: Writer, node: onnx.NodeProto) -> None:
    """A forward ONNX GRU (default activations, zero initial state, no clip; either linear_before_reset) unrolled
    into float operators like the LSTM (TFLite has no builtin GRU): per step z and r from the projected input
    and a recurrent FULLY_CONNECTED, the candidate from the reset state, H = h~ + z * (H - h~)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if text(attrs.get("direction", b"forward")) != "forward":
        raise Unsupported("a bidirectional or reverse GRU (write it as two forward ones, or crop it to the host)")
    if attrs.get("layout", 0) or attrs.get("clip"):
        raise Unsupported("GRU with layout 1 or clip")
    if [text(a) for a in attrs.get("activations", [b"Sigmoid", b"Tanh"])] != ["Sigmoid", "Tanh"]:
        raise Unsupported("GRU activations other than Sigmoid, Tanh")
    inputs = list(node.input) + [""] * (6 - len(node.input))
    outputs = list(node.output) + [""] * (2 - len(node.output))
    weights, recurrent = real_constant(w, inputs[1]), real_constant(w, inputs[2])
    bias = real_constant(w, inputs[3]) if inputs[3] else None
    if weights is None or recurrent is None or (inputs[3] and bias is None):
        raise Unsupported("GRU weights or biases that are not constants")
    initial = real_constant(w, inputs[5]) if inputs[5] else None
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
