"""Seeded random inputs for a model: what accuracy and verification use when no representative data is given.

Each input's values follow what the graph says about it (docs/data.md, "Random inputs"):

- a floating input of rank 1 or more: uniform in [0, 1) (an image-like range);
- a floating scalar (rank 0): 1.0, a model parameter (a gain, a temperature, a threshold) for which a
  random fraction means nothing and 1.0 is the neutral value;
- a boolean input: True everywhere (a mask that keeps everything; all False masks everything out);
- an integer input that indexes a Gather's table (token ids into an embedding), directly or through
  Cast / Reshape / Unsqueeze / Squeeze / Flatten / Identity: uniform over the table's rows, the smallest
  table when it indexes several;
- any other integer input: uniform in [0, 4).

The generator is seeded once per call and draws in input order; a floating scalar still takes its draw, so
the values of the inputs after it do not depend on the rule.
"""

from __future__ import annotations

import numpy as np
import onnx

from accelbuild.util import onnx_graph as g

Feeds = dict[str, np.ndarray]

SCALAR_FLOAT = 1.0
SMALL_INTEGERS = 4  # other integer inputs: [0, 4)
# ops an index tensor passes through unchanged in value on its way to a Gather
_INDEX_PASSTHROUGH = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"}


def input_specs(model: onnx.ModelProto) -> list[tuple[str, list[int], np.dtype]]:
    specs = []
    for value in g.real_inputs(model.graph):
        tensor = value.type.tensor_type
        shape = [d.dim_value for d in tensor.shape.dim]
        specs.append((value.name, shape, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))))
    return specs


def random_inputs(model: onnx.ModelProto, samples: int, seed: int) -> list[Feeds]:
    """``samples`` feed dicts drawn by the rules of the module docstring from one generator seeded ``seed``."""
    rng = np.random.default_rng(seed)
    specs = input_specs(model)
    bounds = {name: index_bound(model.graph, name) for name, _, dtype in specs if np.issubdtype(dtype, np.integer)}
    result = []
    for _ in range(samples):
        feeds = {}
        for name, shape, dtype in specs:
            if np.issubdtype(dtype, np.floating):
                drawn = rng.random(shape, dtype=np.float32)
                feeds[name] = (np.full(shape, SCALAR_FLOAT) if not shape else drawn).astype(dtype)
            elif dtype == np.bool_:
                feeds[name] = np.ones(shape, dtype=dtype)
            else:
                feeds[name] = rng.integers(0, bounds.get(name) or SMALL_INTEGERS, shape).astype(dtype)
        result.append(feeds)
    return result


def describe_rule(model: onnx.ModelProto, name: str) -> str:
    """How ``random_inputs`` draws input ``name``, for messages: ``uniform in [0, 1)``, ``all True``..."""
    spec = next(((shape, dtype) for n, shape, dtype in input_specs(model) if n == name), None)
    if spec is None:
        return "not an input"
    shape, dtype = spec
    if np.issubdtype(dtype, np.floating):
        return f"{SCALAR_FLOAT}" if not shape else "uniform in [0, 1)"
    if dtype == np.bool_:
        return "all True"
    bound = index_bound(model.graph, name)
    return f"token ids in [0, {bound}) (the rows of the table it indexes)" if bound else f"integers in [0, {SMALL_INTEGERS})"


def index_bound(graph: onnx.GraphProto, name: str) -> int | None:
    """The number of rows of the smallest constant table that ``name`` indexes through Gather (its axis),
    following value-preserving ops; None when it indexes none (or only tables of unknown or zero size)."""
    consumers = g.consumers(graph)
    rows: list[int] = []
    seen: set[str] = set()
    pending = [name]
    while pending:
        tensor = pending.pop()
        if tensor in seen:
            continue
        seen.add(tensor)
        for node in consumers.get(tensor, []):
            if node.op_type in _INDEX_PASSTHROUGH and node.input[0] == tensor:
                pending.extend(node.output)
            elif node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == tensor:
                shape = _constant_shape(graph, node.input[0])
                axis = int(g.attribute(node, "axis", 0))
                if shape and -len(shape) <= axis < len(shape) and shape[axis] > 0:
                    rows.append(shape[axis])
    return min(rows) if rows else None


def _constant_shape(graph: onnx.GraphProto, name: str) -> list[int] | None:
    """The shape of an initializer or a Constant node's tensor."""
    for tensor in graph.initializer:
        if tensor.name == name:
            return list(tensor.dims)
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            value = next((a for a in node.attribute if a.name == "value"), None)
            return list(value.t.dims) if value is not None else None
    return None


def observed_shapes(model: onnx.ModelProto, names: list[str] | None = None) -> dict[str, tuple[int, list[int]]]:
    """The element type and shape of tensors ``names`` (default: the graph's outputs) in one onnxruntime run
    on the seeded random sample ``random_inputs(model, 1, 0)``: what shape inference cannot tell.
    {} when onnxruntime cannot run the model; a non-tensor value (a sequence) is left out."""
    from accelbuild.util.onnx_runtime import session

    wanted = [o.name for o in model.graph.output] if names is None else names
    probe = model
    if names is not None:
        probe = onnx.ModelProto()
        probe.CopyFrom(model)
        outputs = {o.name for o in probe.graph.output}
        probe.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names if name not in outputs)
    try:
        run = session(probe)
        given = {i.name for i in run.get_inputs()}
        values = run.run(wanted, {k: v for k, v in random_inputs(model, 1, 0)[0].items() if k in given})
    except Exception:  # noqa: BLE001  a model that does not run on random inputs: the caller keeps what it has
        return {}
    return {name: (onnx.helper.np_dtype_to_tensor_dtype(value.dtype), list(value.shape))
            for name, value in zip(wanted, values) if isinstance(value, np.ndarray)}
