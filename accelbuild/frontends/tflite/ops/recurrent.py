"""Recurrent operators as ONNX RNN and LSTM: RNN and LSTM (one step), UNIDIRECTIONAL_ and
BIDIRECTIONAL_SEQUENCE_RNN / _LSTM (a sequence, time- or batch-major), and SVDF.

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
        parts = [g.const_value(op.inputs[_GATES[gate][position]]) for gate in order]
        return g.add_const(f"{name}/{'wrb'[position]}", np.concatenate(parts)[None].astype(np.float32))

    biases = np.concatenate([g.const_value(op.inputs[_GATES[gate][2]]) for gate in order] +
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


# --------------------------------------------------------------------------- bidirectional sequences

# per direction: input weights, recurrent weights, bias (RNN); states
_BIDI_RNN = {"fw": (1, 2, 3, 4), "bw": (5, 6, 7, 8)}
# per direction: first input weight, first recurrent, first peephole, first bias, projection, h state, c state
_BIDI_LSTM = {"fw": (1, 5, 9, 12, 16, 35, 36), "bw": (18, 22, 26, 29, 33, 37, 38)}


def _bidi_time_major(op: Operator) -> bool:
    return bool(op.options.get("time_major", True))


def _bidi_outputs(g: Graph, op: Operator, hidden: int) -> Result:
    x = g.shape(op.inputs[0])
    if len(x) != 3:
        return fail(f"input {list(x)} is not 3-D")
    merged = bool(op.options.get("merge_outputs"))
    want = [(*x[:2], 2 * hidden)] if merged else [(*x[:2], hidden)] * 2
    have = [g.shape(i) for i in op.outputs]
    return OK if have == want else fail(f"outputs {[list(h) for h in have]} should be {[list(w) for w in want]}")


def _no_aux(op: Operator, first: int) -> Result:
    return fail("auxiliary inputs") if any(_present(op, k) for k in range(first, len(op.inputs))) else OK


def _bidi_rnn_geometry(g: Graph, op: Operator) -> Result:
    if _act(op) not in _RNN_ACTIVATIONS:
        return fail(f"fused activation {_act(op)}, expected TANH or RELU")
    hidden, features = g.shape(op.inputs[1])
    for w, r, b, _ in _BIDI_RNN.values():
        if g.shape(op.inputs[w]) != (hidden, features) or g.shape(op.inputs[r]) != (hidden, hidden) \
                or g.shape(op.inputs[b]) != (hidden,):
            return fail("the two directions' weights differ in shape")
    if g.shape(op.inputs[0])[-1:] != (features,):
        return fail(f"input {list(g.shape(op.inputs[0]))} for {features} features")
    ok, reason = _no_aux(op, 9)
    return _bidi_outputs(g, op, hidden) if ok else (ok, reason)


def _bidi_result(g: Graph, op: Operator, y: str) -> None:
    """ONNX's ``Y`` ``[time, 2, batch, hidden]`` as one merged output or the forward and backward outputs."""
    name = g.name(op)
    perm = [0, 1, 2] if _bidi_time_major(op) else [1, 0, 2]
    moved = g.fresh(f"{name}/directions")
    g.node("Transpose", [y], [moved], moved, perm=[1, *(p + (p > 0) for p in perm)])  # [2, ..., hidden]
    if op.options.get("merge_outputs"):
        halves = [g.fresh(f"{name}/fw"), g.fresh(f"{name}/bw")]
        g.node("Split", [moved, g.ints(f"{name}/split", [1, 1])], halves, f"{name}/split", axis=0)
        squeezed = []
        for half in halves:
            out = g.fresh(f"{half}_3d")
            g.node("Squeeze", [half, g.ints(f"{out}/axes", [0])], [out], out)
            squeezed.append(out)
        g.emit(op, "Concat", squeezed, axis=-1)
        return
    g.node("Split", [moved, g.ints(f"{name}/split", [1, 1])], [g.fresh(f"{name}/fw"), g.fresh(f"{name}/bw")],
           f"{name}/split", axis=0)
    split = g.nodes[-1]
    for k, part in enumerate(split.output):
        g.node("Squeeze", [part, g.ints(f"{part}/axes", [0])], [g.out(op, k)], g.fresh(f"{g.name(op, k)}/squeeze"))


def _bidi_sequence(g: Graph, op: Operator) -> str:
    if _bidi_time_major(op):
        return g.value(op.inputs[0])
    out = g.fresh(f"{g.name(op)}/sequence")
    g.node("Transpose", [g.value(op.inputs[0])], [out], out, perm=[1, 0, 2])
    return out


def _stacked_state(g: Graph, op: Operator, positions: tuple[int, int], role: str) -> str:
    value = np.stack([g.const_value(op.inputs[k]) for k in positions]).astype(np.float32)
    return g.add_const(f"{g.name(op)}/{role}", value)


@register("BIDIRECTIONAL_SEQUENCE_RNN", "ONNX RNN direction bidirectional from the states (zeros)",
          input_count(9, 12), const_inputs(*range(1, 9), what="weights, biases and states"),
          Check("TANH or RELU; both directions' weights of one shape; no auxiliary input; merged or two outputs",
                _bidi_rnn_geometry))
def bidirectional_sequence_rnn(g: Graph, op: Operator) -> None:
    name, hidden = g.name(op), g.shape(op.inputs[1])[0]

    def stack(position: int) -> str:
        parts = [g.const_value(op.inputs[_BIDI_RNN[d][position]]) for d in ("fw", "bw")]
        if position == 2:
            parts = [np.concatenate([p, np.zeros_like(p)]) for p in parts]
        return g.add_const(f"{name}/{'wrb'[position]}", np.stack(parts).astype(np.float32))

    y = g.fresh(f"{name}/y")
    initial = _stacked_state(g, op, (4, 8), "initial_h")
    g.node("RNN", [_bidi_sequence(g, op), stack(0), stack(1), stack(2), "", initial], [y], g.fresh(f"{name}/rnn"),
           hidden_size=hidden, direction="bidirectional", activations=[_RNN_ACTIVATIONS[_act(op)]] * 2)
    _bidi_result(g, op, y)


def _bidi_lstm_geometry(g: Graph, op: Operator) -> Result:
    if _act(op) != "TANH" or op.options.get("cell_clip", 0.0):
        return fail(f"fused activation {_act(op)} or a cell_clip; expected TANH and none")
    hidden, features = g.shape(op.inputs[2])
    for w, r, p, b, proj, _, _ in _BIDI_LSTM.values():
        if not all(_present(op, k) for k in (w, r, b)) or any(_present(op, k) for k in (proj, proj + 1)):
            return fail("no input gate (CIFG) or a projection")
        peepholes = [_present(op, k) for k in range(p, p + 3)]
        if any(peepholes) and not all(peepholes):
            return fail("some peepholes but not all")
        for gate in range(4):
            if g.shape(op.inputs[w + gate]) != (hidden, features) or g.shape(op.inputs[r + gate]) != (hidden, hidden) \
                    or g.shape(op.inputs[b + gate]) != (hidden,):
                return fail("gate weights do not share one shape")
    if _present(op, 9) != _present(op, 26):
        return fail("peepholes in one direction only")
    if g.shape(op.inputs[0])[-1:] != (features,):
        return fail(f"input {list(g.shape(op.inputs[0]))} for {features} features")
    ok, reason = _no_aux(op, 39)
    return _bidi_outputs(g, op, hidden) if ok else (ok, reason)


@register("BIDIRECTIONAL_SEQUENCE_LSTM", "ONNX LSTM direction bidirectional from the states (zeros)",
          Check("39 to 48 inputs, the optional ones omitted or present",
                lambda g, op: OK if 39 <= len(op.inputs) <= 48 and op.inputs[0] >= 0 and op.outputs
                else fail(f"expected 39 to 48 inputs, got {len(op.inputs)}")),
          const_inputs(*range(1, 39), what="weights, biases and states"),
          Check("TANH; no cell_clip; input gates; all peepholes or none; no projection or auxiliary input; merged "
                "or two outputs", _bidi_lstm_geometry))
def bidirectional_sequence_lstm(g: Graph, op: Operator) -> None:
    name, hidden = g.name(op), g.shape(op.inputs[2])[0]
    order = (0, 3, 1, 2)  # TFLite i, f, c, o -> ONNX i, o, f, c

    def stack(position: int, extra: bool = False) -> str:
        per_direction = []
        for d in ("fw", "bw"):
            first = _BIDI_LSTM[d][position]
            parts = [g.const_value(op.inputs[first + k]) for k in order]
            per_direction.append(np.concatenate(parts + ([np.zeros(4 * hidden, np.float32)] if extra else [])))
        return g.add_const(f"{name}/{'wrpb'[position]}", np.stack(per_direction).astype(np.float32))

    inputs = [_bidi_sequence(g, op), stack(0), stack(1), stack(3, extra=True), "",
              _stacked_state(g, op, (35, 37), "initial_h"), _stacked_state(g, op, (36, 38), "initial_c")]
    if _present(op, 9):
        peep = np.stack([np.concatenate([g.const(op.inputs[_BIDI_LSTM[d][2] + k]) for k in (0, 2, 1)])
                         for d in ("fw", "bw")]).astype(np.float32)
        inputs.append(g.add_const(f"{name}/peepholes", peep))
    y = g.fresh(f"{name}/y")
    g.node("LSTM", inputs, [y], g.fresh(f"{name}/lstm"), hidden_size=hidden, direction="bidirectional")
    _bidi_result(g, op, y)


# --------------------------------------------------------------------------- SVDF


def _svdf_geometry(g: Graph, op: Operator) -> Result:
    x, features, time = (g.shape(op.inputs[k]) for k in (0, 1, 2))
    rank = op.options.get("rank", 1)
    if len(x) != 2 or len(features) != 2 or features[1] != x[1] or len(time) != 2 or time[0] != features[0]:
        return fail(f"input {list(x)}, feature weights {list(features)}, time weights {list(time)}")
    if rank < 1 or features[0] % rank:
        return fail(f"rank {rank} does not divide {features[0]} filters")
    units = features[0] // rank
    if _present(op, 3) and g.shape(op.inputs[3]) != (units,):
        return fail(f"bias {list(g.shape(op.inputs[3]))} is not [{units}]")
    if g.shape(op.inputs[4]) != (x[0], features[0] * time[1]) or g.shape(op.outputs[0]) != (x[0], units):
        return fail(f"state {list(g.shape(op.inputs[4]))} or output {list(g.shape(op.outputs[0]))} do not match")
    return OK if _act(op) in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1") else fail(f"fused activation {_act(op)}")


@register("SVDF", "MatMul by the feature weights scaled by the newest time weight, ReduceSum over the rank, "
                  "bias, activation (one invocation from the zero state)",
          input_count(5), const_inputs(1, 2, 3, 4, what="weights, bias and state"),
          Check("[batch, in] input; [filters, in] and [filters, memory] weights; rank divides the filters; "
                "NONE or a RELU activation", _svdf_geometry))
def svdf(g: Graph, op: Operator) -> None:
    """From the zero state only the newest memory slot holds a value: ``x . W_f * W_t[:, -1]`` per filter."""
    name = g.name(op)
    filters = g.shape(op.inputs[1])[0]
    rank = op.options.get("rank", 1)
    batch, units = g.shape(op.outputs[0])
    scaled = g.const_value(op.inputs[1]) * g.const_value(op.inputs[2])[:, -1:]
    projected, grouped = g.fresh(f"{name}/filters"), g.fresh(f"{name}/grouped")
    g.node("MatMul", [g.value(op.inputs[0]), g.add_const(f"{name}/weights", scaled.T.astype(np.float32))],
           [projected], projected)
    g.node("Reshape", [projected, g.ints(f"{name}/rank_shape", [batch, filters // rank, rank])], [grouped], grouped)
    summed = g.fresh(f"{name}/summed")
    g.node("ReduceSum", [grouped, g.ints(f"{name}/axes", [2])], [summed], summed, keepdims=0)
    inputs = [summed, g.value(op.inputs[3])] if _present(op, 3) else [summed, g.scalar(0.0)]
    g.emit(op, "Add", inputs, act=_act(op))
