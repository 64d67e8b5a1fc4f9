"""QDQ ONNX -> full-integer TFLite bytes.

Straight-line driver: read the QDQ model as an integer graph (``qgraph.py``), decide which tensors are
channel-last (``layout.py``), convert node by node (``ops.py``: one function per ONNX operator), and
serialize with the ``tflite`` package's schema (``accelbuild.util.tflite_builder.TFLiteBuilder``).
Quantize/Dequantize pairs become tensor quantization (int8 with a zero point, or int16 with zero point
0; weights int8 per channel, zero point 0; biases int32 at input scale x weight scale, int64 with int16
activations); a Relu or Clip after a layer becomes its fused activation. Inputs and outputs are
integer tensors: the model is what an Ethos-U runs. Every operator that cannot be written is collected
and reported at once. Equal models give equal bytes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import onnx

from accelbuild.errors import UserError
from accelbuild.targets.ethos_u.tflite import layout
from accelbuild.targets.ethos_u.tflite.qgraph import QConst, QGraph, QTensor, read_qdq
from accelbuild.util.tflite_builder import Quant, TFLiteBuilder

log = logging.getLogger(__name__)

DESCRIPTION = "accelbuild int8 TFLite writer"


class Unsupported(Exception):
    """One node the writer cannot express (the reason is the message)."""


class UnsupportedOperatorsError(UserError):
    """The quantized model holds operators that have no int8 TFLite form here (exit 2)."""

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        self.problems = problems  # (op type, node name, reason)
        ops = sorted({op for op, _, _ in problems})
        lines = [f"  {op} ({name}): {reason}" for op, name, reason in problems]
        super().__init__(f"operators the TFLite writer for Ethos-U cannot write, in int8 or as a float CPU "
                         f"operator: {', '.join(ops)}\n" + "\n".join(lines) + "\n  what to do: crop them to the "
                         "host (crop.outputs / crop.inputs), replace them in the exported model, or choose "
                         "another family")


@dataclass(frozen=True)
class Fusion:
    output: str                   # key of the quantized tensor the fused chain writes
    activation: str               # TFLite fused activation
    bias: QConst | None = None    # a MatMul's bias Add
    nodes: tuple[str, ...] = ()   # the nodes folded into the layer


CLIP_ACTIVATIONS = {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1", (0.0, 1.0): "RELU_0_TO_1"}


class Writer:
    """Holds the TFLite builder and the tensors made so far; ``ops.py`` functions call its helpers."""

    def __init__(self, qg: QGraph) -> None:
        self.qg = qg
        self.b = TFLiteBuilder(description=DESCRIPTION)
        self.ids: dict[str, int] = {}
        self.done: set[str] = set()
        self.nhwc: set[str] = set()
        self.floats: dict[str, int] = {}   # ONNX name -> a float (or integer) tensor in ONNX layout
        self.fallback: list[dict[str, str]] = []  # nodes written as float CPU operators, and why

    def snapshot(self) -> tuple:
        """What ``restore`` needs to undo a converter that gave up half way."""
        b = self.b
        return (len(b.tensors), len(b.ops), len(b.buffers), len(b.opcodes), dict(self.ids), set(self.done),
                dict(self.floats))

    def restore(self, state: tuple) -> None:
        b = self.b
        tensors, ops, buffers, opcodes, ids, done, floats = state
        del b.tensors[tensors:], b.ops[ops:], b.buffers[buffers:], b.opcodes[opcodes:]
        self.ids, self.done, self.floats = ids, done, floats

    # ---------------------------------------------------------------- tensors

    def q(self, name: str) -> QTensor:
        key = self.qg.key(name)
        if key is None:
            raise Unsupported(f"input {name!r} is not a quantized tensor")
        return self.qg.tensors[key]

    def is_nhwc(self, t: QTensor) -> bool:
        return t.key in self.nhwc and len(t.shape) == 4

    def shape(self, t: QTensor) -> tuple[int, ...]:
        perm = layout.permutation(self.is_nhwc(t), len(t.shape))
        return tuple(t.shape[p] for p in perm)

    def tensor(self, t: QTensor) -> int:
        if t.key not in self.ids:
            self.ids[t.key] = self.b.add_tensor(t.name, self.shape(t), t.dtype, quant=_quant(t))
        return self.ids[t.key]

    def alias(self, output: QTensor, source: QTensor) -> None:
        """``output`` is the same TFLite tensor as ``source`` (an operator that moves nothing)."""
        if output.key in self.ids or (output.scale, output.zero_point) != (source.scale, source.zero_point):
            raise Unsupported("a no-op whose output quantization differs from its input's")
        self.ids[output.key] = self.tensor(source)

    def like(self, t: QTensor, name: str, shape: tuple[int, ...]) -> int:
        """A new intermediate tensor with ``t``'s quantization and a TFLite ``shape``."""
        return self.b.add_tensor(name, shape, t.dtype, quant=_quant(t))

    def requantized(self, t: QTensor, name: str, scale: float, zero_point: int) -> int:
        """A new intermediate tensor shaped like ``t`` with its own quantization: an operator writes it, then a
        QUANTIZE (TFLite's requantize) turns it into ``t``."""
        return self.b.add_tensor(name, self.shape(t), t.dtype, quant=Quant([scale], [zero_point]))

    def op_on_grid(self, builtin: str, inputs: list[int], out: QTensor, scale: float, zero_point: int,
                   suffix: str, options: dict | None = None) -> None:
        """``builtin``, whose kernel writes its result quantized with (``scale``, ``zero_point``), into ``out``;
        where ``out`` is quantized otherwise, into a ``<out>/<suffix>`` tensor that a QUANTIZE requantizes."""
        if (scale, zero_point) == (out.scale, out.zero_point):
            self.op(builtin, inputs, [self.tensor(out)], options)
            return
        produced = self.requantized(out, f"{out.name}/{suffix}", scale, zero_point)
        self.op(builtin, inputs, [produced], options)
        self.op("QUANTIZE", [produced], [self.tensor(out)])

    def const(self, name: str, array: np.ndarray, dtype: str, quant: Quant | None = None) -> int:
        return self.b.add_tensor(name, array.shape, dtype, np.ascontiguousarray(array), quant)

    def int32(self, name: str, values: list[int] | tuple[int, ...] | np.ndarray) -> int:
        return self.const(name, np.asarray(values, dtype=np.int32), "int32")

    def qconst(self, name: str, c: QConst, shape: tuple[int, ...] | None = None) -> int:
        """A per-tensor quantized constant operand, reshaped to ``shape`` (TFLite layout) if given."""
        codes = c.codes if shape is None else c.codes.reshape(shape)
        return self.const(name, codes, str(c.codes.dtype), Quant(c.scales.reshape(-1).tolist(),
                                                                   c.zero_points.reshape(-1).tolist()))

    def operand(self, name: str, node: onnx.NodeProto, like: QTensor) -> int:
        """A data input: a quantized tensor, or a quantized constant broadcast into ``like``'s layout."""
        if name in self.qg.consts:
            c = self.qg.consts[name]
            if c.scales.size != 1:
                raise Unsupported(f"constant {name!r} is quantized per channel")
            codes = c.codes
            rank = len(like.shape)
            if self.is_nhwc(like) and codes.ndim > 0:
                codes = codes.reshape((1,) * (rank - codes.ndim) + codes.shape).transpose(layout.TO_NHWC)
            return self.qconst(f"{node.name}/{name}", QConst(codes, c.scales, c.zero_points, 0))
        return self.tensor(self.q(name))

    # ---------------------------------------------------------------- operators

    def op(self, builtin: str, inputs: list[int], outputs: list[int], options: dict | None = None,
           version: int = 1) -> None:
        self.b.add_op(builtin, inputs, outputs, options, version=version)

    def fusion(self, node: onnx.NodeProto, bias_allowed: bool = False) -> Fusion:
        """Where ``node``'s result lands: its own quantized output, or, through its fused bias Add and
        activation, the quantized output of the last of them."""
        return self.fusion_from(node.output[0], bias_allowed)

    def fusion_from(self, tensor: str, bias_allowed: bool = False) -> Fusion:
        bias, activation = None, "NONE"
        folded: list[str] = []
        for _ in range(3):
            key = self.qg.key(tensor)
            if key is not None:
                return Fusion(key, activation, bias, tuple(folded))
            readers = self.qg.readers.get(tensor, [])
            if len(readers) != 1:
                raise Unsupported(f"output {tensor!r} is not quantized")
            reader = readers[0]
            if reader.op_type == "Add" and bias_allowed and bias is None and activation == "NONE":
                other = [i for i in reader.input if i != tensor]
                if len(other) != 1 or other[0] not in self.qg.consts:
                    raise Unsupported(f"output {tensor!r} is not quantized")
                bias = self.qg.consts[other[0]]
            elif reader.op_type in ("Relu", "Clip") and activation == "NONE":
                activation = self._activation(reader)
            else:
                raise Unsupported(f"output {tensor!r} is not quantized")
            folded.append(reader.name)
            tensor = reader.output[0]
        raise Unsupported(f"output {tensor!r} is not quantized")

    def _activation(self, node: onnx.NodeProto) -> str:
        if node.op_type == "Relu":
            return "RELU"
        low, high = self.clip_bounds(node)
        if high == np.inf and low == 0.0:
            return "RELU"
        if (low, high) in CLIP_ACTIVATIONS:
            return CLIP_ACTIVATIONS[(low, high)]
        out = self.q(node.output[0])
        q_low = (-(1 << (out.bits - 1)) - out.zero_point) * out.scale
        q_high = ((1 << (out.bits - 1)) - 1 - out.zero_point) * out.scale
        if low <= q_low and q_high <= high:
            return "NONE"  # the output's range already lies inside the bounds: saturation clips
        raise Unsupported(f"Clip({low}, {high}) has no TFLite fused activation")

    def clip_bounds(self, node: onnx.NodeProto) -> tuple[float, float]:
        bounds = [-np.inf, np.inf]
        for i, name in enumerate(node.input[1:3]):
            if name:
                value = self.qg.constant(name)
                if value is None:
                    raise Unsupported("Clip bounds are not constants")
                bounds[i] = float(value.reshape(-1)[0])
        return bounds[0], bounds[1]


def _quant(t: QTensor) -> Quant:
    return Quant([t.scale], [t.zero_point])


def data_io(w: Writer, node: onnx.NodeProto) -> tuple[list[str], list[str]]:
    """Quantized data input and output keys of ``node`` (after fusion), for the layout decision."""
    ins = [k for k in (w.qg.key(i) for i in node.input if i) if k is not None]
    outs = []
    for o in node.output:
        if not o:
            continue
        key = w.qg.key(o)
        outs.append(key if key is not None else w.fusion_from(o, bias_allowed=node.op_type == "MatMul").output)
    return ins, outs


def write_int8_tflite(model: onnx.ModelProto) -> bytes:
    """The TFLite model of a QDQ ONNX model: int8 operators where they have a form, float CPU operators
    between DEQUANTIZE and QUANTIZE where not (``fallback.py``); ``UnsupportedOperatorsError`` lists every
    operator that has neither."""
    return write(model)[0]


def write(model: onnx.ModelProto) -> tuple[bytes, list[dict[str, str]]]:
    """``write_int8_tflite``, and the nodes written as float CPU operators (node, operator, why)."""
    from accelbuild.targets.ethos_u.tflite import fallback, floats
    from accelbuild.targets.ethos_u.tflite.ops import CONVERTERS

    qg = read_qdq(model)
    w = Writer(qg)
    problems: list[tuple[str, str, str]] = []
    for key in [*qg.inputs, *qg.outputs]:
        t = qg.tensors[key]
        if not t.signed:
            problems.append(("(graph)", t.name, "unsigned activations (quantize with conventions='tflite')"))
    w.nhwc = layout.nhwc_tensors(qg, lambda n: data_io(w, n))
    floats.graph_inputs(w)
    for node in qg.nodes:
        if node.name in w.done:
            continue
        convert = CONVERTERS.get(node.op_type)
        reason = "no int8 form in the writer"
        if convert is not None:
            state = w.snapshot()
            try:
                convert(w, node)
                continue
            except Unsupported as exc:
                w.restore(state)
                reason = str(exc)
        try:
            fallback.write_float(w, node, reason)
        except Unsupported as exc:
            problems.append((node.op_type, node.name, f"{reason}; no float form either: {exc}"))
    if problems:  # an output an unwritten node would have made is not a problem of its own
        raise UnsupportedOperatorsError(problems)
    try:
        ins, outs = floats.graph_io(w)
    except Unsupported as exc:
        raise UnsupportedOperatorsError([("(graph)", "", str(exc))]) from exc
    data = w.b.finish(ins, outs)
    log.debug("int8 TFLite: %d operators, %d tensors, %d bytes", len(w.b.ops), len(w.b.tensors), len(data))
    return data, w.fallback


def tensor_layouts(model: onnx.ModelProto) -> set[str]:
    """Keys of the quantized tensors the TFLite model stores NHWC."""
    qg = read_qdq(model)
    w = Writer(qg)
    return {k for k in layout.nhwc_tensors(qg, lambda n: data_io(w, n)) if len(qg.tensors[k].shape) == 4}


def io_layout(model: onnx.ModelProto) -> dict[str, bool]:
    """Graph input/output name -> whether the TFLite model stores it NHWC (the ONNX one is NCHW)."""
    qg = read_qdq(model)
    w = Writer(qg)
    w.nhwc = layout.nhwc_tensors(qg, lambda n: data_io(w, n))
    names = [v.name for v in model.graph.input if v.name in qg.alias] + [v.name for v in model.graph.output]
    return {name: w.is_nhwc(qg.tensors[qg.alias[name]]) for name in names if name in qg.alias}
