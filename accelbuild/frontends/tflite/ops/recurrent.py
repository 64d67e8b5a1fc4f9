"""Recurrent operators as ONNX RNN and LSTM: RNN and LSTM (one step), UNIDIRECTIONAL_SEQUENCE_RNN and
UNIDIRECTIONAL_SEQUENCE_LSTM (a sequence, time- or batch-major).

The state inputs are variable tensors, zeros after allocation (:func:`.tensors.constant_value`): the
converted model computes one invocation from the reset state. ONNX's LSTM gates are ordered input,
output, forget, cell (TFLite's weights are one tensor per gate); the biases of the recurrent half are zero.
Supported: the fused activation TANH or RELU (the candidate and the output activation of an LSTM: TANH),
LSTM with an input gate (no CIFG), optional peepholes, no projection and no layer normalization.
"""

from __future__ import annotations

import numpy as np

from accelbuild.frontends.tflite.graph import ACTIVATIONS, Graph
from accelbuild.frontends.tflite.ops.base import OK, Check, Result, const_inputs, fail, input_count, register
from accelbuild.frontends.tflite.reader import Operator

_RNN_ACTIVATIONS = {"TANH": "Tanh", "RELU": "Relu"}


def _act(op: Operator) -> str:
    return ACTIVATIONS.get(op.options.get("fused_activation_function", 0), "unknown")


def _time_major(op: Operator) -> bool:
    return op.name in ("RNN", "LSTM") or bool(op.options.get("time_major", op.name == "UNIDIRECTIONAL_SEQUENCE_RNN"))


def _sequence(g: Graph, op: Operator) -> str:
    """The input as ONNX's ``[time, batch, features]``."""
    name, x = g.name(op), g.value(op.inputs[0])
    out = g.fresh(f"{name}/sequence")
    if op.name in ("RNN", "LSTM"):
        g.node("Unsqueeze", [x, g.ints(f"{out}/axes", [0])], [out], out)
    elif _time_major(op):
        return x
    else:
        g.node("Transpose", [x], [out], out, perm=[1, 0, 2])
    return out


def _result(g: Graph, op: Operator, y: str) -> None:
    """ONNX's ``Y`` ``[time, 1, batch, hidden]`` as the TFLite output."""
    name = g.name(op)
    if op.name in ("RNN", "LSTM"):
        g.emit(op, "Reshape", [y, g.ints(f"{name}/shape", g.shape(op.outputs[0]))])
        return
    squeezed = g.fresh(f"{name}/squeezed")
    g.node("Squeeze", [y, g.ints(f"{squeezed}/axes", [1])], [squeezed], squeezed)
    if _time_major(op):
        g.emit(op, "Identity", [squeezed])
    else:
        g.emit(op, "Transpose", [squeezed], perm=[1, 0, 2])


def _state(g: Graph, op: Operator, k: int, role: str) -> str:
    out = g.fresh(f"{g.name(op)}/{role}")
    g.node("Unsqueeze", [g.value(op.inputs[k]), g.ints(f"{out}/axes", [0])], [out], out)
    return out


def _expected_output(g: Graph, op: Operator, hidden: int) -> tuple[int, ...] | str:
    x = g.shape(op.inputs[0])
    if op.name in ("RNN", "LSTM"):
        return (x[0], hidden) if len(x) == 2 else f"input {list(x)} is not [batch, features]"
    return (*x[:2], hidden) if len(x) == 3 else f"input {list(x)} is not 3-D"


# --------------------------------------------------------------------------- RNN


def _rnn_geometry(g: Graph, op: Operator) -> Result:
    w, r = g.shape(op.inputs[1]), g.shape(op.inputs[2])
    if _act(op) not in _RNN_ACTIVATIONS:
        return fail(f"fused activation {_act(op)}, expected TANH or RELU")
    if len(w) != 2 or r != (w[0], w[0]) or g.shape(op.inputs[3]) != (w[0],):
        return fail(f"weights {list(w)}, recurrent weights {list(r)}, bias {list(g.shape(op.inputs[3]))}")
    want = _expected_output(g, op, w[0])
    if isinstance(want, str) or g.shape(op.outputs[0]) != want or g.shape(op.inputs[0])[-1] != w[1]:
        return fail(f"input {list(g.shape(op.inputs[0]))} and output {list(g.shape(op.outputs[0]))} for weights "
                    f"{list(w)}")
    return OK


_RNN_CHECKS = (input_count(5), const_inputs(1, 2, 3, 4, what="weights, recurrent weights, bias and state"),
               Check("TANH or RELU; [units, in] weights, [units, units] recurrent weights, [units] bias; output "
                     "[..., units]", _rnn_geometry))


def _rnn(g: Graph, op: Operator) -> None:
    name = g.name(op)
    hidden = g.shape(op.inputs[1])[0]
    weights = g.derived(op.inputs[1], "w", lambda v: v[None])
    recurrent = g.derived(op.inputs[2], "r", lambda v: v[None])
    bias = g.derived(op.inputs[3], "b", lambda v: np.concatenate([v, np.zeros_like(v)])[None])
    y = g.fresh(f"{name}/y")
    g.node("RNN", [_sequence(g, op), weights, recurrent, bias, "", _state(g, op, 4, "initial_h")], [y],
           g.fresh(f"{name}/rnn"), hidden_size=hidden, activations=[_RNN_ACTIVATIONS[_act(op)]])
    _result(g, op, y)


register("RNN", "ONNX RNN over one step from the state (zeros)", *_RNN_CHECKS)(_rnn)
register("UNIDIRECTIONAL_SEQUENCE_RNN", "ONNX RNN (time- or batch-major) from the state (zeros)", *_RNN_CHECKS)(_rnn)


# --------------------------------------------------------------------------- LSTM

_GATES = {"i": (1, 5, 12), "f": (2, 6, 13), "c": (3, 7, 14), "o": (4, 8, 15)}  # input, recurrent, bias
_PEEPHOLES = {"i": 9, "f": 10, "o": 11}


def _present(op: Operator, k: int) -> bool:
    return k < len(op.inputs) and op.inputs[k] >= 0


def _lstm_geometry(g: Graph, op: Operator) -> Result:
    if _act(op) != "TANH":
        return fail(f"fused activation {_act(op)}, expected TANH")
    if op.options.get("kernel_type", 0) != 0:
        return fail("the BASIC LSTM kernel")
    if op.options.get("cell_clip", 0.0):
        return fail(f"cell_clip {op.options.get('cell_clip')} (ONNX's clip bounds the gates' inputs, not the cell)")
    if not all(_present(op, k) for k in (1, 5, 12)):
        return fail("no input gate (CIFG)")
    if any(_present(op, k) for k in (16, 17, 20, 21, 22, 23)):
        return fail("a projection or layer normalization")
    peepholes = [_present(op, k) for k in _PEEPHOLES.values()]
    if any(peepholes) and not all(peepholes):
        return fail("some peepholes but not all")
    hidden, features = g.shape(op.inputs[2])
    for gate, (w, r, b) in _GATES.items():
        if g.shape(op.inputs[w]) != (hidden, features) or g.shape(op.inputs[r]) != (hidden, hidden) \
                or g.shape(op.inputs[b]) != (hidden,):
            return fail(f"gate {gate} weights do not share [{hidden}, {features}] / [{hidden}, {hidden}] / [{hidden}]")
    want = _expected_output(g, op, hidden)
    if isinstance(want, str) or g.shape(op.outputs[0]) != want or g.shape(op.inputs[0])[-1] != features:
        return fail(f"input {list(g.shape(op.inputs[0]))} and output {list(g.shape(op.outputs[0]))} for "
                    f"{hidden} units over {features} features")
    return OK


def _lstm_inputs(g: Graph, op: Operator) -> Result:
    if not 20 <= len(op.inputs) <= 24 or op.inputs[0] < 0 or not op.outputs:
        return fail(f"expected 20 to 24 inputs (optional ones may be omitted) and an output, got {len(op.inputs)}")
    return OK


_LSTM_CHECKS = (Check("20 to 24 inputs, the optional ones (CIFG, peepholes, projection, layer normalization) "
                      "omitted or present", _lstm_inputs), const_inputs(*range(1, 20), what="weights, biases and states"),
                Check("TANH; no cell_clip; an input gate; all peepholes or none; no projection or layer normalization; "
                      "[units, in] / [units, units] / [units] per gate", _lstm_geometry))


def _lstm(g: Graph, op: Operator) -> None:
    name = g.name(op)
    order = "iofc"
    hidden = g.shape(op.inputs[2])[0]

    def stack(position: int) -> str:
        parts = [g.const(op.inputs[_GATES[gate][position]]) for gate in order]
        return g.add_const(f"{name}/{'wrb'[position]}", np.concatenate(parts)[None].astype(np.float32))

    biases = np.concatenate([g.const(op.inputs[_GATES[gate][2]]) for gate in order] +
                            [np.zeros(4 * hidden, np.float32)])[None].astype(np.float32)
    inputs = [_sequence(g, op), stack(0), stack(1), g.add_const(f"{name}/bias", biases), "",
              _state(g, op, 18, "initial_h"), _state(g, op, 19, "initial_c")]
    if _present(op, 9):
        peep = np.concatenate([g.const(op.inputs[_PEEPHOLES[gate]]) for gate in "iof"])[None].astype(np.float32)
        inputs.append(g.add_const(f"{name}/peepholes", peep))
    y = g.fresh(f"{name}/y")
    g.node("LSTM", inputs, [y], g.fresh(f"{name}/lstm"), hidden_size=hidden)
    _result(g, op, y)


register("LSTM", "ONNX LSTM over one step from the states (zeros)", *_LSTM_CHECKS)(_lstm)
register("UNIDIRECTIONAL_SEQUENCE_LSTM", "ONNX LSTM (time- or batch-major) from the states (zeros)",
         *_LSTM_CHECKS)(_lstm)
