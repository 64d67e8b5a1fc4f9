"""RFFT2D and the operators that read its complex result (COMPLEX_ABS, REAL, IMAG) through ONNX DFT.

A COMPLEX64 TFLite tensor ``T`` of shape ``S`` is the float ONNX tensor ``T`` of shape ``S + [2]`` (real
and imaginary parts last, as DFT writes them; :meth:`.graph.Graph.value_info` says so). RFFT2D is two DFTs:
a one-sided real transform along the last axis, then a full complex one along the axis before it, each
cropping or zero-padding the input to ``fft_length`` as TFLite does.
"""

from __future__ import annotations

import numpy as np

from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import OK, Check, Result, const_inputs, fail, input_count, register
from accelbuild.frontends.tflite.ops.shape import _ints
from accelbuild.frontends.tflite.reader import Operator


def _rfft2d_shape(g: Graph, op: Operator) -> Result:
    shape, lengths = g.shape(op.inputs[0]), _ints(g, op.inputs[1])
    if len(shape) < 2 or len(lengths) != 2 or min(lengths) < 1:
        return fail(f"input of rank {len(shape)} with fft_length {lengths}, expected rank >= 2 and 2 lengths")
    if g.tensor(op.inputs[0]).dtype != "FLOAT32" or g.tensor(op.outputs[0]).dtype != "COMPLEX64":
        return fail("expected a FLOAT32 input and a COMPLEX64 output")
    want = (*shape[:-2], lengths[0], lengths[1] // 2 + 1)
    have = g.shape(op.outputs[0])
    return OK if have == want else fail(f"output shape {list(have)} should be {list(want)}")


@register("RFFT2D", "DFT (one-sided, last axis) then DFT (the axis before), real and imaginary parts last",
          input_count(2), const_inputs(1, what="fft_length"),
          Check("float32 input of rank >= 2; complex64 output of shape [..., fft_length[0], fft_length[1] / 2 + 1]",
                _rfft2d_shape))
def rfft2d(g: Graph, op: Operator) -> None:
    base, rank = g.name(op), len(g.shape(op.inputs[0]))
    height, width = _ints(g, op.inputs[1])
    signal = g.fresh(f"{base}/signal")
    g.node("Unsqueeze", [g.value(op.inputs[0]), g.ints(f"{base}/axes", [rank])], [signal], signal)
    rows = g.fresh(f"{base}/rows")
    g.node("DFT", [signal, _scalar(g, f"{base}/width", width), _scalar(g, f"{base}/row_axis", rank - 1)], [rows],
           rows, onesided=1)
    g.emit(op, "DFT", [rows, _scalar(g, f"{base}/height", height), _scalar(g, f"{base}/column_axis", rank - 2)])


def _scalar(g: Graph, name: str, value: int) -> str:
    """An int64 scalar (DFT's length and axis, Gather's index) under a fresh name."""
    return g.add_const(name, np.array(value, np.int64))


def _complex_input(g: Graph, op: Operator) -> Result:
    dtype = g.tensor(op.inputs[0]).dtype
    if dtype != "COMPLEX64" or g.tensor(op.outputs[0]).dtype != "FLOAT32":
        return fail(f"input is {dtype}, output {g.tensor(op.outputs[0]).dtype}; expected COMPLEX64 -> FLOAT32")
    have = g.shape(op.outputs[0])
    return OK if have == g.shape(op.inputs[0]) else fail(f"output shape {list(have)} differs from the input's")


COMPLEX_INPUT = Check("a complex64 input (an RFFT2D result) and a float32 output of its shape", _complex_input)


@register("COMPLEX_ABS", "ReduceL2 over the real and imaginary parts", input_count(1), COMPLEX_INPUT)
def complex_abs(g: Graph, op: Operator) -> None:
    rank = len(g.shape(op.inputs[0]))
    g.emit(op, "ReduceL2", [g.value(op.inputs[0]), g.ints(f"{g.name(op)}/axes", [rank])], keepdims=0)


def _part(name: str, index: int) -> None:
    def convert(g: Graph, op: Operator) -> None:
        g.emit(op, "Gather", [g.value(op.inputs[0]), _scalar(g, f"{g.name(op)}/part", index)],
               axis=len(g.shape(op.inputs[0])))
    convert.__doc__ = f"{name} -> Gather of part {index}."
    register(name, f"Gather of the {'real' if index == 0 else 'imaginary'} part", input_count(1),
             COMPLEX_INPUT)(convert)


_part("REAL", 0)
_part("IMAG", 1)
