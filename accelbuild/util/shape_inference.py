"""onnx shape inference without handing the weights to it.

``onnx.shape_inference.infer_shapes`` serializes the whole model, parses it in C++, and serializes and
parses the result back: for a network with tens of megabytes of weights that is most of the time it
takes, and a model over protobuf's 2 GB cannot be inferred at all. Inference only needs a weight's type
and shape, so large floating-point initializers are handed over as graph inputs of that type and shape
and put back afterwards. Small initializers and every integer one stay (Reshape's shape, Slice's starts,
Resize's scales: inference reads their values). The result is the model onnx would return.
"""

from __future__ import annotations

import math
from typing import Any

import onnx

# initializers at least this large and of a floating type are handed over as typed inputs
_LARGE_ELEMENTS = 4096
_FLOAT_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                          onnx.TensorProto.DOUBLE})


def infer_shapes(model: onnx.ModelProto, **options: Any) -> onnx.ModelProto:
    """``onnx.shape_inference.infer_shapes(model, **options)``, with the large float weights kept out of it."""
    graph = model.graph
    large = [t for t in graph.initializer if t.data_type in _FLOAT_TYPES and math.prod(t.dims) >= _LARGE_ELEMENTS]
    if not large:
        return onnx.shape_inference.infer_shapes(model, **options)
    light = _without_initializers(model, {t.name for t in large})
    declared = {v.name for v in graph.input}
    stand_ins = [t for t in large if t.name not in declared]
    light.graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                             for t in stand_ins)
    inferred = onnx.shape_inference.infer_shapes(light, **options)
    added = {t.name for t in stand_ins}
    inputs = [v for v in inferred.graph.input if v.name not in added]
    inferred.graph.ClearField("input")
    inferred.graph.input.extend(inputs)
    inferred.graph.ClearField("initializer")
    inferred.graph.initializer.extend(graph.initializer)
    return inferred


def _without_initializers(model: onnx.ModelProto, names: set[str]) -> onnx.ModelProto:
    """A copy of ``model`` whose graph lacks the initializers ``names`` (never copying their bytes)."""
    light = onnx.ModelProto()
    for field, value in model.ListFields():
        if field.name != "graph":
            _copy_field(light, field, value)
    for field, value in model.graph.ListFields():
        if field.name == "initializer":
            light.graph.initializer.extend(t for t in value if t.name not in names)
        else:
            _copy_field(light.graph, field, value)
    return light


def _copy_field(target: Any, field: Any, value: Any) -> None:
    repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
    if repeated:
        getattr(target, field.name).extend(value)
    elif field.type == field.TYPE_MESSAGE:
        getattr(target, field.name).CopyFrom(value)
    else:
        setattr(target, field.name, value)
