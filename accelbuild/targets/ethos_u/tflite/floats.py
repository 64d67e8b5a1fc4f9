"""Float (and integer) tensors of the TFLite model in ONNX layout, for the operators ``fallback.py`` and
``recurrent.py`` write: a quantized tensor dequantized (an int8 TRANSPOSE first where it is stored
channel-last), a constant as its real values, an output quantized back into its int8 tensor, and the graph's
unquantized inputs and outputs as tensors of their own type.
"""

from __future__ import annotations

import numpy as np
import onnx

from accelbuild.targets.ethos_u.tflite import layout
from accelbuild.targets.ethos_u.tflite.writer import Unsupported, Writer
from accelbuild.util import onnx_graph as g

TYPES = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.INT32: "int32", onnx.TensorProto.INT64: "int64",
         onnx.TensorProto.BOOL: "bool", onnx.TensorProto.INT8: "int8", onnx.TensorProto.INT16: "int16",
         onnx.TensorProto.UINT8: "uint8", onnx.TensorProto.FLOAT16: "float16"}


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
            source = transposed(w, source, layout.TO_NCHW, f"{t.name}/nchw")
        value = w.b.add_tensor(f"{t.name}/dequantized", w.b.shape(source), "float32")
        w.op("DEQUANTIZE", [source], [value])
        w.floats[cached] = value
        return value
    if name in w.qg.consts:
        w.floats[name] = w.const(f"{name}/float", real_constant(w, name), "float32")  # type: ignore[arg-type]
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


def transposed(w: Writer, tensor: int, perm: tuple[int, ...], name: str) -> int:
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


def real_constant(w: Writer, name: str) -> np.ndarray | None:
    """A constant operand's real values (a quantized constant dequantized), or None for a tensor."""
    if name in w.qg.consts:
        c = w.qg.consts[name]
        shape = [1] * c.codes.ndim
        if c.scales.size > 1:
            shape[c.axis] = c.scales.size
        return ((c.codes.astype(np.float32) - c.zero_points.reshape(shape)) * c.scales.reshape(shape)).astype(np.float32)
    value = w.qg.constant(name)
    return None if value is None else value.astype(np.float32)


def text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
