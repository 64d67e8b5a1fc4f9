"""Index-driven operators: EMBEDDING_LOOKUP, GATHER_ND, SCATTER_ND, the segment reductions, ONE_HOT,
TOPK_V2, ARG_MAX, ARG_MIN, SPARSE_TO_DENSE, DYNAMIC_UPDATE_SLICE and EMBEDDING_LOOKUP_SPARSE.

Indices are cast to int64 for ONNX; index results are cast back to the TFLite output's integer type. The
segment reductions are ScatterND with a reduction onto a tensor holding the reduction's identity (TFLite's
value for an empty segment: 0 for sums, 1 for products, the type's lowest / highest for max / min).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import (
    OK,
    Check,
    Result,
    const_inputs,
    fail,
    input_count,
    register,
)
from accelbuild.frontends.tflite.ops.shape import _axis, _ints, _output_shape_is
from accelbuild.frontends.tflite.reader import Operator
from accelbuild.frontends.tflite.tensors import onnx_type

_INDEX_TYPES = {"INT32": TensorProto.INT32, "INT64": TensorProto.INT64}
_NUMPY = {TensorProto.FLOAT: np.float32, TensorProto.INT32: np.int32, TensorProto.INT64: np.int64}


def _int64(g: Graph, op: Operator, k: int, role: str) -> str:
    """Input ``k`` (int32 or int64 indices) as int64."""
    cast = g.fresh(f"{g.name(op)}/{role}")
    g.node("Cast", [g.value(op.inputs[k])], [cast], cast, to=TensorProto.INT64)
    return cast


def _index_input(k: int) -> Check:
    def predicate(g: Graph, op: Operator) -> Result:
        dtype = g.tensor(op.inputs[k]).dtype
        return OK if dtype in _INDEX_TYPES else fail(f"indices are {dtype}, not int32 or int64")
    return Check(f"input {k} holds int32 or int64 indices", predicate)


# --------------------------------------------------------------------------- EMBEDDING_LOOKUP, GATHER_ND


def _lookup_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    ids, table = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    return (*ids, *table[1:]) if len(ids) == 1 and table else "ids are not 1-D or the table is a scalar"


@register("EMBEDDING_LOOKUP", "Gather along axis 0 of the table", input_count(2), _index_input(0),
          _output_shape_is(_lookup_shape, "1-D ids; output [ids, table row]"))
def embedding_lookup(g: Graph, op: Operator) -> None:
    g.emit(op, "Gather", [g.value(op.inputs[1]), _int64(g, op, 0, "ids")], axis=0)


def _gather_nd_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    params, indices = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    if not indices or indices[-1] > len(params):
        return f"indices {list(indices)} do not index params {list(params)}"
    return (*indices[:-1], *params[indices[-1]:])


@register("GATHER_ND", "GatherND (batch_dims 0)", input_count(2), _index_input(1),
          _output_shape_is(_gather_nd_shape, "the last indices axis indexes params; output shape matches"))
def gather_nd(g: Graph, op: Operator) -> None:
    g.emit(op, "GatherND", [g.value(op.inputs[0]), _int64(g, op, 1, "indices")])


# --------------------------------------------------------------------------- SCATTER_ND, segment reductions


def _scatter_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape = g.const_value(op.inputs[2])
    indices, updates = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    want = tuple(int(d) for d in shape.reshape(-1))
    if not indices or indices[:-1] + want[indices[-1]:] != updates:
        return f"updates {list(updates)} do not match indices {list(indices)} into {list(want)}"
    return want


@register("SCATTER_ND", "ScatterND (reduction add, as TFLite sums repeated indices) into zeros",
          input_count(3), _index_input(0), const_inputs(2, what="shape"),
          _output_shape_is(_scatter_shape, "updates match indices and shape; output shape is the shape input"))
def scatter_nd(g: Graph, op: Operator) -> None:
    out = g.shape(op.outputs[0])
    zeros = g.add_const(f"{g.name(op)}/zeros", np.zeros(out, _NUMPY[onnx_type(g.tensor(op.outputs[0]))]))
    g.emit(op, "ScatterND", [zeros, _int64(g, op, 0, "indices"), g.value(op.inputs[1])], reduction="add")


_SEGMENTS = {"SEGMENT_SUM": "add", "UNSORTED_SEGMENT_SUM": "add", "UNSORTED_SEGMENT_PROD": "mul",
             "UNSORTED_SEGMENT_MAX": "max", "UNSORTED_SEGMENT_MIN": "min"}


def _identity(reduction: str, dtype: type) -> float | int:
    if reduction in ("add", "mul"):
        return 0 if reduction == "add" else 1
    info = np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)
    return info.min if reduction == "max" else info.max


def _segment_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    data, ids = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    if not ids or data[:len(ids)] != ids:
        return f"segment ids {list(ids)} do not lead the data {list(data)}"
    out = g.shape(op.outputs[0])
    return (out[0], *data[len(ids):]) if out else "output is a scalar"


def _segment(name: str) -> None:
    reduction = _SEGMENTS[name]

    def convert(g: Graph, op: Operator) -> None:
        out = g.shape(op.outputs[0])
        dtype = _NUMPY[onnx_type(g.tensor(op.outputs[0]))]
        start = g.add_const(f"{g.name(op)}/identity", np.full(out, _identity(reduction, dtype), dtype))
        ids = _int64(g, op, 1, "ids")
        indices = g.fresh(f"{g.name(op)}/indices")
        g.node("Unsqueeze", [ids, g.ints(f"{g.name(op)}/axes", [-1])], [indices], indices)
        g.emit(op, "ScatterND", [start, indices, g.value(op.inputs[0])], reduction=reduction)
    convert.__doc__ = f"{name} -> ScatterND reduction {reduction}."
    register(name, f"ScatterND (reduction {reduction}) onto the reduction's identity; segment ids in range",
             input_count(2, 3), _index_input(1),
             _output_shape_is(_segment_shape, "segment ids lead the data; output [segments, rest of the data]"))(
        convert)


for _name in _SEGMENTS:
    _segment(_name)


# --------------------------------------------------------------------------- ONE_HOT, TOPK_V2, ARG_MAX/MIN


def _one_hot_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    indices, depth = g.shape(op.inputs[0]), int(g.const_value(op.inputs[1]).reshape(-1)[0])
    axis = _axis(op.options.get("axis", -1), len(indices) + 1)
    if axis is None:
        return "axis out of range"
    return (*indices[:axis], depth, *indices[axis:])


@register("ONE_HOT", "OneHot with [off, on] values", input_count(4), _index_input(0),
          const_inputs(1, what="depth"), _output_shape_is(_one_hot_shape, "constant depth; output shape matches"))
def one_hot(g: Graph, op: Operator) -> None:
    values = g.fresh(f"{g.name(op)}/values")
    g.node("Concat", [_vector(g, op, 3), _vector(g, op, 2)], [values], values, axis=0)
    axis = _axis(op.options.get("axis", -1), len(g.shape(op.inputs[0])) + 1)
    g.emit(op, "OneHot", [_int64(g, op, 0, "indices"), g.value(op.inputs[1]), values], axis=axis)


def _vector(g: Graph, op: Operator, k: int) -> str:
    out = g.fresh(f"{g.name(op)}/in{k}")
    g.node("Reshape", [g.value(op.inputs[k]), g.ints(f"{out}/shape", [1])], [out], out)
    return out


def _topk_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape, k = g.shape(op.inputs[0]), int(g.const_value(op.inputs[1]).reshape(-1)[0])
    if not shape or not 0 < k <= shape[-1] or len(op.outputs) != 2:
        return f"k {k} for an input {list(shape)} (or not two outputs)"
    if g.tensor(op.outputs[1]).dtype not in _INDEX_TYPES:
        return f"indices output is {g.tensor(op.outputs[1]).dtype}"
    return (*shape[:-1], k)


@register("TOPK_V2", "TopK over the last axis (largest, sorted), indices cast to the output type", input_count(2),
          const_inputs(1, what="k"), _output_shape_is(_topk_shape, "constant k within the last axis; two outputs"))
def topk_v2(g: Graph, op: Operator) -> None:
    base = g.name(op)
    k = g.ints(f"{base}/k", [int(g.const_value(op.inputs[1]).reshape(-1)[0])])
    indices = g.fresh(f"{base}/indices")
    g.node("TopK", [g.value(op.inputs[0]), k], [g.out(op, 0), indices], base, axis=-1, largest=1, sorted=1)
    g.node("Cast", [indices], [g.out(op, 1)], g.fresh(f"{base}/cast"), to=_INDEX_TYPES[g.tensor(op.outputs[1]).dtype])


def _arg_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    shape = g.shape(op.inputs[0])
    axis = _axis(_ints(g, op.inputs[1])[0], len(shape))
    if axis is None or g.tensor(op.outputs[0]).dtype not in _INDEX_TYPES:
        return "axis out of range or an output that is not int32/int64"
    return shape[:axis] + shape[axis + 1:]


def _arg(name: str, onnx_op: str) -> None:
    def convert(g: Graph, op: Operator) -> None:
        axis = _axis(_ints(g, op.inputs[1])[0], len(g.shape(op.inputs[0])))
        index = g.fresh(f"{g.name(op)}/index")
        g.node(onnx_op, [g.value(op.inputs[0])], [index], index, axis=axis, keepdims=0, select_last_index=0)
        g.emit(op, "Cast", [index], to=_INDEX_TYPES[g.tensor(op.outputs[0]).dtype])
    convert.__doc__ = f"{name} -> {onnx_op}, first index of ties."
    register(name, f"{onnx_op} (first index of ties), cast to the output type", input_count(2),
             const_inputs(1, what="axis"), _output_shape_is(_arg_shape, "axis in range; int32/int64 output"))(convert)


_arg("ARG_MAX", "ArgMax")
_arg("ARG_MIN", "ArgMin")


# --------------------------------------------------------------------------- SPARSE_TO_DENSE, DYNAMIC_UPDATE_SLICE


def _sparse_inputs(g: Graph, op: Operator) -> Result:
    indices, out = g.shape(op.inputs[0]), g.shape(op.outputs[0])
    shape = g.const_value(op.inputs[1])
    if tuple(int(d) for d in shape.reshape(-1)) != out:
        return fail(f"output_shape {shape.tolist()} differs from the output {list(out)}")
    width = indices[1] if len(indices) == 2 else 1
    count = indices[0] if indices else 1
    if len(indices) > 2 or width != len(out) or g.shape(op.inputs[2]) not in ((), (count,)):
        return fail(f"indices {list(indices)} and values {list(g.shape(op.inputs[2]))} for an output {list(out)}")
    return OK if g.shape(op.inputs[3]) in ((), (1,)) else fail("default_value is not a scalar")


@register("SPARSE_TO_DENSE", "ScatterND of the values into the default value expanded to the output shape",
          input_count(4), _index_input(0), const_inputs(1, what="output_shape"),
          Check("[N, rank] (or [N] for a 1-D output) indices, N values or one, a scalar default", _sparse_inputs))
def sparse_to_dense(g: Graph, op: Operator) -> None:
    name, out = g.name(op), g.shape(op.outputs[0])
    indices = g.shape(op.inputs[0])
    count = indices[0] if indices else 1
    base, points, values, flat = (g.fresh(f"{name}/{role}") for role in ("base", "points", "values", "default"))
    g.node("Reshape", [g.value(op.inputs[3]), g.ints(f"{name}/scalar", [])], [flat], flat)
    g.node("Expand", [flat, g.ints(f"{name}/shape", out)], [base], base)
    g.node("Reshape", [_int64(g, op, 0, "indices"), g.ints(f"{name}/point_shape", [count, len(out)])], [points],
           points)
    g.node("Expand", [g.value(op.inputs[2]), g.ints(f"{name}/value_shape", [count])], [values], values)
    g.emit(op, "ScatterND", [base, points, values])


def _update_fits(g: Graph, op: Operator) -> Result:
    operand, update, starts = g.shape(op.inputs[0]), g.shape(op.inputs[1]), g.shape(op.inputs[2])
    if len(update) != len(operand) or any(u > d for u, d in zip(update, operand)) or starts != (len(operand),):
        return fail(f"update {list(update)} with starts {list(starts)} into {list(operand)}")
    return OK if g.shape(op.outputs[0]) == operand else fail("output shape differs from the operand's")


@register("DYNAMIC_UPDATE_SLICE", "ScatterND at the clamped start plus every position of the update",
          input_count(3), _index_input(2), Check("an update no larger than the operand, one start per axis",
                                                 _update_fits))
def dynamic_update_slice(g: Graph, op: Operator) -> None:
    """TFLite clamps each start to ``[0, dim - update dim]``, as ``Max`` then ``Min`` do here."""
    name = g.name(op)
    operand, update = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    grid = np.stack(np.indices(update), axis=-1).astype(np.int64) if update else np.zeros((0,), np.int64)
    low, clamped, positions = (g.fresh(f"{name}/{role}") for role in ("low", "clamped", "positions"))
    g.node("Max", [_int64(g, op, 2, "starts"), g.add_const(f"{name}/zero", np.zeros(len(operand), np.int64))],
           [low], low)
    g.node("Min", [low, g.add_const(f"{name}/last", np.subtract(operand, update).astype(np.int64))], [clamped],
           clamped)
    g.node("Add", [g.add_const(f"{name}/grid", grid), clamped], [positions], positions)
    g.emit(op, "ScatterND", [g.value(op.inputs[0]), positions, g.value(op.inputs[1])])


_COMBINERS = {0: "SUM", 1: "MEAN", 2: "SQRTN"}


def _sparse_buckets(g: Graph, op: Operator) -> tuple[np.ndarray, int] | str:
    """Each lookup's output row (its sparse index without the last entry, flattened over ``dense_shape``)
    and the number of rows; or why the lookups do not form rows in order."""
    indices = np.asarray(g.const_value(op.inputs[1]), np.int64)
    dense = [int(d) for d in np.asarray(g.const_value(op.inputs[2])).reshape(-1)]
    if indices.ndim != 2 or indices.shape[1] != len(dense) or len(dense) < 2 or min(dense) < 1:
        return f"sparse indices {list(indices.shape)} for dense shape {dense}"
    if np.any(indices < 0) or np.any(indices >= np.asarray(dense)):
        return "a sparse index lies outside the dense shape"
    rows = np.ravel_multi_index(indices[:, :-1].T, dense[:-1]) if len(indices) else np.zeros(0, np.int64)
    if np.any(np.diff(rows) < 0):
        return "the sparse indices are not in row order (LiteRT combines each run of one row on its own)"
    return rows.astype(np.int64), int(np.prod(dense[:-1]))


def _lookup_sparse_ok(g: Graph, op: Operator) -> Result:
    buckets = _sparse_buckets(g, op)
    if isinstance(buckets, str):
        return fail(buckets)
    ids, weights, table = (g.shape(op.inputs[k]) for k in (0, 3, 4))
    dense = np.asarray(g.const_value(op.inputs[2])).reshape(-1)
    if len(ids) != 1 or tuple(weights) != tuple(ids) or ids[0] != len(buckets[0]) or len(table) < 2:
        return fail(f"ids {list(ids)}, weights {list(weights)}, table {list(table)} for {len(buckets[0])} lookups")
    if op.options.get("combiner", 0) not in _COMBINERS:
        return fail(f"unknown combiner {op.options.get('combiner')}")
    want = (*(int(d) for d in dense[:-1]), *table[1:])
    have = tuple(g.shape(op.outputs[0]))
    return OK if have == want else fail(f"output shape {list(have)} should be {list(want)}")


@register("EMBEDDING_LOOKUP_SPARSE", "Gather of the table rows, times the weights, ScatterND (add) into each "
                                     "output row, divided by the weights' sum (MEAN) or root sum of squares (SQRTN)",
          input_count(5), _index_input(0), const_inputs(1, 2, what="sparse indices and dense shape"),
          Check("1-D ids and weights, one per sparse index; sparse indices in row order inside the dense shape; "
                "output [dense shape without its last entry, table row]", _lookup_sparse_ok))
def embedding_lookup_sparse(g: Graph, op: Operator) -> None:
    name, table = g.name(op), g.shape(op.inputs[4])
    rows, n_rows = _sparse_buckets(g, op)
    width = int(np.prod(table[1:]))
    picked, flat, weighted = g.fresh(f"{name}/rows"), g.fresh(f"{name}/flat"), g.fresh(f"{name}/weighted")
    g.node("Gather", [g.value(op.inputs[4]), _int64(g, op, 0, "ids")], [picked], picked, axis=0)
    g.node("Reshape", [picked, g.ints(f"{flat}/shape", [len(rows), width])], [flat], flat)
    column = g.fresh(f"{name}/weight_column")
    g.node("Unsqueeze", [g.value(op.inputs[3]), g.ints(f"{column}/axes", [1])], [column], column)
    g.node("Mul", [flat, column], [weighted], weighted)
    targets = g.add_const(f"{name}/targets", rows.reshape(-1, 1))
    summed = g.fresh(f"{name}/sum")
    g.node("ScatterND", [g.add_const(f"{name}/zeros", np.zeros((n_rows, width), np.float32)), targets, weighted],
           [summed], summed, reduction="add")
    combiner = _COMBINERS[op.options.get("combiner", 0)]
    if combiner != "SUM":
        weights = g.value(op.inputs[3])
        if combiner == "SQRTN":
            squares = g.fresh(f"{name}/squares")
            g.node("Mul", [weights, weights], [squares], squares)
            weights = squares
        total = g.fresh(f"{name}/total")
        g.node("ScatterND", [g.add_const(f"{name}/no_weight", np.zeros(n_rows, np.float32)), targets, weights],
               [total], total, reduction="add")
        if combiner == "SQRTN":
            root = g.fresh(f"{name}/root")
            g.node("Sqrt", [total], [root], root)
            total = root
        # a row no lookup falls in stays zero (LiteRT does not divide it)
        filled = np.isin(np.arange(n_rows), rows)
        divisor, column = g.fresh(f"{name}/divisor"), g.fresh(f"{name}/divisor_column")
        g.node("Where", [g.add_const(f"{name}/filled", filled), total, g.scalar(1.0)], [divisor], divisor)
        g.node("Unsqueeze", [divisor, g.ints(f"{column}/axes", [1])], [column], column)
        combined = g.fresh(f"{name}/combined")
        g.node("Div", [summed, column], [combined], combined)
        summed = combined
    g.node("Reshape", [summed, g.ints(f"{name}/shape", g.shape(op.outputs[0]))], [g.out(op)], name)
