"""A validated TFLite :class:`~.reader.Model` -> an equivalent float32 ONNX ModelProto.

Straight-line driver: decode constants, fold DEQUANTIZE/DENSIFY of constants (float16 and sparse
weights), check every operator (all problems reported at once), convert operator by operator, add
DequantizeLinear/QuantizeLinear at quantized graph inputs/outputs, collapse redundant layout
Transposes, assemble and check. The result uses opset 21 (default domain only) and IR version 10.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import onnx
from onnx import helper

import accelbuild
from accelbuild.errors import StageError
from accelbuild.frontends.tflite import layout
from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops import spec_for
from accelbuild.frontends.tflite.reader import Model
from accelbuild.frontends.tflite.supported import find_unsupported, unsupported_error
from accelbuild.frontends.tflite.tensors import IO_QUANTIZED_TYPES, NUMPY_TYPES, constant_values, is_quantized
from accelbuild.frontends.tflite.transpose_sinking import fewest_transposes

log = logging.getLogger(__name__)

OPSET = 21
IR_VERSION = 10
PRODUCER = "accelbuild-tflite"
QUANT_METADATA_KEY = "accelbuild.tflite_quantization"
_FOLDABLE = ("DEQUANTIZE", "DENSIFY")


def convert(model: Model) -> onnx.ModelProto:
    """The whole conversion; raises ``InputFileError`` listing every unsupported operator."""
    consts = constant_values(model)
    variables = [t.name for t in model.tensors if t.variable and t.index in consts]
    if variables:
        log.warning("%s: variable tensors %s (state LiteRT keeps between invocations) start at zeros: the "
                    "converted model computes an invocation from the reset state", model.path.name, variables)
    folded = fold_constants(model, consts)
    g = Graph(model, consts)
    problems = find_unsupported(g, folded)
    if problems:
        raise unsupported_error(model.path, problems)
    inputs = [graph_input(g, i) for i in model.inputs if i not in consts]
    for index in model.outputs:
        if _quantized_io(g, index) and index not in model.inputs:
            g.values[index] = g.fresh(f"{g.names[index]}/float")
    for op in model.operators:
        if op.index not in folded:
            spec_for(op).convert(g, op)
    outputs = [graph_output(g, i) for i in model.outputs]
    return assemble(g, inputs, outputs)


def fold_constants(model: Model, consts: dict[int, np.ndarray]) -> set[int]:
    """DEQUANTIZE / DENSIFY of a constant become that constant (weights stored as fp16 or sparse)."""
    folded = set()
    for op in model.operators:
        if op.name in _FOLDABLE and len(op.inputs) == 1 and op.inputs[0] in consts and len(op.outputs) == 1:
            value = consts[op.inputs[0]]
            if value.shape == model.tensors[op.outputs[0]].shape:
                consts[op.outputs[0]] = value
                folded.add(op.index)
    return folded


def _quantized_io(g: Graph, index: int) -> bool:
    tensor = g.tensor(index)
    return tensor.dtype in IO_QUANTIZED_TYPES and is_quantized(tensor)


def _qparams(g: Graph, index: int) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Scale (float32) and zero point (the tensor's type): scalars, or vectors plus ``axis``."""
    tensor = g.tensor(index)
    quant = tensor.quant
    scale = np.asarray(quant.scale, dtype=np.float32)
    zero = np.asarray(quant.zero_point or (0,), dtype=NUMPY_TYPES[tensor.dtype])
    if scale.size == 1:
        return scale.reshape(()), zero.reshape(-1)[:1].reshape(()), {}
    return scale, np.broadcast_to(zero, scale.shape).copy(), {"axis": quant.axis}


def graph_input(g: Graph, index: int) -> onnx.ValueInfoProto:
    """A TFLite input; a quantized one stays integer and is dequantized by ``T/dequantize``.

    The zero point is applied by a separate Add (``T/zero_point``): onnxruntime 1.31's QDQ propagation
    mis-types a DequantizeLinear with an int8 zero point that feeds a Transpose or Reshape.
    """
    if not _quantized_io(g, index):
        return g.value_info(index)
    name, shape = g.names[index], g.shape(index)
    scale, zero, attrs = _qparams(g, index)
    g.values[index] = value = g.fresh(f"{name}/float")
    shift = -scale.astype(np.float32) * zero.astype(np.float32)
    dequantized = value if not shift.any() else g.fresh(f"{name}/dequantized")
    g.node("DequantizeLinear", [name, g.add_const(f"{name}/scale", scale)], [dequantized],
           g.fresh(f"{name}/dequantize"), **attrs)
    if shift.any():
        if shift.ndim:
            shift = shift.reshape([-1 if i == attrs["axis"] else 1 for i in range(len(shape))])
        g.node("Add", [dequantized, g.add_const(f"{name}/shift", shift)], [value], g.fresh(f"{name}/zero_point"))
    return helper.make_tensor_value_info(name, IO_QUANTIZED_TYPES[g.tensor(index).dtype], list(shape))


def graph_output(g: Graph, index: int) -> onnx.ValueInfoProto:
    """A TFLite output; a quantized one is requantized from ``T/float`` by ``T/quantize``."""
    if not _quantized_io(g, index):
        return g.value_info(index, g.value(index))
    name = g.names[index]
    scale, zero, attrs = _qparams(g, index)
    params = [g.add_const(f"{name}/scale", scale), g.add_const(f"{name}/zero_point", zero)]
    g.node("QuantizeLinear", [g.values[index], *params], [name], g.fresh(f"{name}/quantize"), **attrs)
    return helper.make_tensor_value_info(name, IO_QUANTIZED_TYPES[g.tensor(index).dtype], list(g.shape(index)))


def assemble(g: Graph, inputs: list, outputs: list) -> onnx.ModelProto:
    """Collapse layout Transposes, keep used initializers, add TFLite shapes and metadata, check."""
    keep = {v.name for v in outputs}
    nodes = fewest_transposes(g.nodes, g.initializers, g.fresh, keep)
    shapes = {name: g.shape(i) for i in range(len(g.model.tensors)) for name in {g.names[i], g.values[i]}}
    nodes = layout.trivial_transposes_as_reshapes(nodes, shapes, g.ints)
    used = {name for node in nodes for name in node.input}
    produced = {name for node in nodes for name in node.output} - keep
    value_info = [g.value_info(i) for i in range(len(g.model.tensors))
                  if g.values[i] in produced and i not in g.consts]
    graph = helper.make_graph(nodes, g.model.path.stem or "tflite", inputs, outputs,
                              initializer=[t for name, t in g.initializers.items() if name in used],
                              value_info=value_info)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                              producer_name=PRODUCER, producer_version=accelbuild.__version__)
    quant = quantization_table(g)
    if quant:
        helper.set_model_props(model, {QUANT_METADATA_KEY: json.dumps(quant, sort_keys=True, separators=(",", ":"))})
    _check(model)
    return model


def quantization_table(g: Graph) -> dict[str, dict]:
    """``{tensor: {"scale", "zero_point", "axis"}}`` for every quantized TFLite tensor, for reporting."""
    table = {}
    for tensor in g.model.tensors:
        if tensor.quant is not None:
            q = tensor.quant
            table[g.names[tensor.index]] = {"scale": list(q.scale), "zero_point": list(q.zero_point),
                                            "axis": q.axis}
    return table


def _check(model: onnx.ModelProto) -> None:
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StageError(f"TFLite conversion produced an invalid ONNX graph: {first}") from None
