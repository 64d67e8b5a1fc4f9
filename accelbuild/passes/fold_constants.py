"""Constant folding, including the shape arithmetic exporters leave in detection heads.

Once input shapes are fixed, ``Shape``/``Size`` of a tensor with a static shape is a constant; the
Gather/Concat/Range/... chains hanging off them then have only constant inputs. We evaluate every such
node (the common shape operators with the reference's own numpy code, ``constant_ops``; any other batch with
onnx's reference evaluator, one batch per round), store the results as initializers and
drop the nodes; ``Constant`` nodes become initializers the same way. Rounds repeat with fresh shape
inference until nothing changes. Folding is exact: it runs the same operators on the same values.
Nodes with subgraphs are never folded, and a folded value that only a subgraph reads stays (the graph
helpers count subgraph reads as uses).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from accelbuild.passes import constant_ops
from accelbuild.util import onnx_graph as g
from accelbuild.util.shape_inference import infer_shapes

# don't materialise huge Expand/Tile/ConstantOfShape results: a folded tensor may be larger only where one of
# its inputs already is (a weight standardised at run time, as NFNet's and BiT's convolutions export, is no
# larger than the weight, and a convolution whose weight is left computed runs on the host)
MAX_FOLDED_ELEMENTS = 1 << 22
_NEVER_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
               "Bernoulli", "If", "Loop", "Scan"}
MAX_ROUNDS = 16


def fold_constants(model: onnx.ModelProto) -> list[str]:
    """Fold until a fixed point; returns one note per folded node."""
    notes: list[str] = []
    for _ in range(MAX_ROUNDS):
        model.graph.ClearField("value_info")  # stale entries may disagree with folded values
        inferred = infer_shapes(model, data_prop=True)
        model.graph.value_info.extend(inferred.graph.value_info)
        folded = _fold_round(model)
        if not folded:
            break
        notes.extend(folded)
    g.prune(model.graph)
    return notes


def _fold_round(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    known = {t.name for t in graph.initializer} | {""}
    values: dict[str, np.ndarray] = {}
    foldable: list[onnx.NodeProto] = []
    shapes = g.static_shapes(model)  # the graph does not change until the values are stored
    for node in g.topological_order(graph):
        shape_value = _static_shape_value(shapes, node)
        if shape_value is not None:
            values[node.output[0]] = shape_value
            foldable.append(node)
            known.add(node.output[0])
        elif _can_fold(shapes, node, known):
            foldable.append(node)
            known.update(node.output)
    if not foldable:
        return []
    for node in foldable:
        if node.op_type == "Constant" and node.output[0] not in values:
            values[node.output[0]] = _constant_value(node)
    values.update(_evaluate(model, [n for n in foldable if n.output[0] not in values], values))
    for name, value in list(values.items()):  # the evaluator may drop scalar ranks: trust inference
        shape = shapes.get(name)
        if shape is not None and list(value.shape) != shape and value.size == int(np.prod(shape, dtype=np.int64)):
            values[name] = value.reshape(shape)
    g.set_initializers(graph, values)
    g.remove_nodes(graph, foldable)
    return [f"{n.op_type} {n.name or n.output[0]}" for n in foldable]


def _static_shape_value(shapes: dict[str, list[int] | None], node: onnx.NodeProto) -> np.ndarray | None:
    """The value of Shape/Size on a tensor whose shape is known."""
    if node.op_type not in ("Shape", "Size") or node.domain not in ("", "ai.onnx"):
        return None
    shape = shapes.get(node.input[0])
    if shape is None:
        return None
    if node.op_type == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    start = int(g.attribute(node, "start", 0))
    end = g.attribute(node, "end", None)
    return np.array(shape[start:end if end is None else int(end)], dtype=np.int64)


def _constant_value(node: onnx.NodeProto) -> np.ndarray:
    """A Constant node's value with the rank the operator defines (value_float/int are scalars)."""
    attr = node.attribute[0]
    value = helper.get_attribute_value(attr)
    if attr.name in ("value", "sparse_value"):
        return numpy_helper.to_array(value) if attr.name == "value" else numpy_helper.to_array(value.values)
    dtype = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
             "value_ints": np.int64}.get(attr.name, object)
    return np.asarray(value, dtype=dtype)


def _can_fold(shapes: dict[str, list[int] | None], node: onnx.NodeProto, known: set[str]) -> bool:
    if node.op_type in _NEVER_FOLD or node.domain not in ("", "ai.onnx") or g.subgraphs(node):
        return False
    if not all(name in known for name in node.input):
        return False
    limit = max([MAX_FOLDED_ELEMENTS, *(_elements(shapes, name) for name in node.input if name)])
    return all(_elements(shapes, out) <= limit for out in node.output)


def _elements(shapes: dict[str, list[int] | None], name: str) -> int:
    """A tensor's element count where its shape is known, else 0."""
    shape = shapes.get(name)
    return 0 if shape is None else int(np.prod(shape, dtype=np.int64))


def _evaluate(model: onnx.ModelProto, nodes: list[onnx.NodeProto],
              computed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the constant nodes once, on the constants they read: with ``constant_ops`` where it has every node,
    else with onnx's reference evaluator."""
    if not nodes:
        return {}
    produced = {o for n in nodes for o in n.output if o}
    needed = {i for n in nodes for i in n.input if i and i not in produced}
    inits = [t for t in model.graph.initializer if t.name in needed]
    if not any(onnx.external_data_helper.uses_external_data(t) for t in inits):
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        read = {t.name: numpy_helper.to_array(t) for t in inits}
        found = constant_ops.evaluate(nodes, {**read, **{k: v for k, v in computed.items() if k in needed}}, opset)
        if found is not None:
            return {name: found[name] for name in sorted(produced)}
    from onnx.reference import ReferenceEvaluator

    inits += [numpy_helper.from_array(v, k) for k, v in computed.items() if k in needed]
    outputs = [helper.make_empty_tensor_value_info(name) for name in sorted(produced)]
    sub = helper.make_graph(nodes, "constants", [], outputs, initializer=inits)
    sub_model = helper.make_model(sub, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    results = ReferenceEvaluator(sub_model).run(None, {})
    return {name: np.asarray(value) for name, value in zip(sorted(produced), results)}
