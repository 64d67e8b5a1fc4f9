"""StableHLO operators with a reduction body subgraph or general dimension numbers: STABLEHLO_REDUCE_WINDOW,
STABLEHLO_SCATTER and STABLEHLO_GATHER.

A body subgraph is read as the one binary function it applies (add, multiply, maximum, minimum; for
SCATTER also "take the update"). REDUCE_WINDOW pads with the init value and combines one strided Slice per
window position, so any rank, stride, dilation and padding maps exactly; SCATTER and GATHER convert the
dimension numbers that are ScatterND / GatherND over the leading operand axes (what ``tf.tensor_scatter_nd_*``,
``tf.gather`` and ``tf.gather_nd`` lower to).
"""

from __future__ import annotations

import math

import numpy as np

from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import OK, Check, Result, const_inputs, fail, input_count, register
from accelbuild.frontends.tflite.reader import Model, Operator

MAX_WINDOW = 64  # window positions, one Slice each
_FUNCTIONS = {"STABLEHLO_ADD": "Add", "ADD": "Add", "STABLEHLO_MULTIPLY": "Mul", "MUL": "Mul",
              "STABLEHLO_MAXIMUM": "Max", "MAXIMUM": "Max", "STABLEHLO_MINIMUM": "Min", "MINIMUM": "Min"}
_REDUCTIONS = {"Add": "add", "Mul": "mul", "Max": "max", "Min": "min", "Replace": "none"}


def body_function(g: Graph, op: Operator, key: str) -> str | None:
    """The ONNX op a body subgraph applies to its two scalars (``Replace``: it returns the second), or None."""
    try:
        sub: Model = g.root.subgraph(int(op.options.get(key, 0)))
    except IndexError:
        return None
    if sub is g.root or len(sub.inputs) != 2 or len(sub.outputs) != 1:
        return None
    if not sub.operators and sub.outputs[0] == sub.inputs[1]:
        return "Replace"
    if len(sub.operators) != 1:
        return None
    inner = sub.operators[0]
    plain = inner.options.get("fused_activation_function", 0) == 0
    same = sorted(inner.inputs) == sorted(sub.inputs) and tuple(inner.outputs) == tuple(sub.outputs)
    return _FUNCTIONS.get(inner.name) if plain and same else None


def _body(key: str, replace: bool) -> Check:
    allowed = "add, multiply, maximum or minimum of its two scalars" + (", or the update itself" if replace else "")

    def predicate(g: Graph, op: Operator) -> Result:
        function = body_function(g, op, key)
        if function is None or (function == "Replace" and not replace):
            return fail(f"its body subgraph {op.options.get(key)} is not one {allowed}")
        return OK
    return Check(f"the body subgraph is one {allowed}", predicate)


# --------------------------------------------------------------------------- REDUCE_WINDOW


def _window(g: Graph, op: Operator) -> dict[str, list[int]] | str:
    rank = len(g.shape(op.inputs[0]))
    o = op.options
    geometry = {"window": list(o.get("window_dimensions", ())), "strides": list(o.get("window_strides", ()) or [1] * rank),
                "base": list(o.get("base_dilations", ()) or [1] * rank),
                "dilations": list(o.get("window_dilations", ()) or [1] * rank)}
    pads = list(o.get("padding", ()) or [0] * (2 * rank))
    if any(len(v) != rank for v in geometry.values()) or len(pads) != 2 * rank:
        return f"window options of lengths {[len(v) for v in geometry.values()]} and padding {pads} for rank {rank}"
    if any(v < 1 for v in (*geometry["window"], *geometry["strides"], *geometry["dilations"])):
        return "window dimensions, strides and dilations must be >= 1"
    if any(b != 1 for b in geometry["base"]):
        return f"base dilations {geometry['base']} (only 1 converts)"
    if math.prod(geometry["window"]) > MAX_WINDOW:
        return f"window of {math.prod(geometry['window'])} positions (at most {MAX_WINDOW})"
    geometry["low"], geometry["high"] = pads[0::2], pads[1::2]
    return geometry


def _window_output(g: Graph, op: Operator, w: dict[str, list[int]]) -> list[int]:
    shape = g.shape(op.inputs[0])
    return [(s + lo + hi - (k - 1) * d - 1) // st + 1
            for s, lo, hi, k, d, st in zip(shape, w["low"], w["high"], w["window"], w["dilations"], w["strides"])]


def _reduce_window_ok(g: Graph, op: Operator) -> Result:
    w = _window(g, op)
    if isinstance(w, str):
        return fail(w)
    if len(g.shape(op.inputs[1])) > 1 or math.prod(g.shape(op.inputs[1])) != 1:
        return fail(f"init value of shape {list(g.shape(op.inputs[1]))}, expected a scalar")
    want = _window_output(g, op, w)
    have = list(g.shape(op.outputs[0]))
    return OK if want == have and min(want) >= 1 else fail(f"output shape {have} should be {want}")


@register("STABLEHLO_REDUCE_WINDOW", "Pad with the init value, then the body's Add/Mul/Max/Min over one strided "
                                     "Slice per window position", input_count(2),
          Check("one operand and a scalar init value; base dilations 1; at most 64 window positions; output shape "
                "matches", _reduce_window_ok),
          _body("body_subgraph_index", replace=False))
def reduce_window(g: Graph, op: Operator) -> None:
    name, checked = g.name(op), _window(g, op)
    assert not isinstance(checked, str), checked  # _reduce_window_ok refused it before conversion
    w = checked
    shape, out = g.shape(op.inputs[0]), _window_output(g, op, w)
    function = body_function(g, op, "body_subgraph_index")
    assert function is not None  # the operator's check refused a body with no ONNX function
    init = g.fresh(f"{name}/init")
    g.node("Reshape", [g.value(op.inputs[1]), g.ints(f"{init}/shape", [])], [init], init)
    source = g.value(op.inputs[0])
    grow = [max(p, 0) for p in (*w["low"], *w["high"])]
    if any(grow):
        padded = g.fresh(f"{name}/padded")
        g.node("Pad", [source, g.ints(f"{padded}/pads", grow), init], [padded], padded, mode="constant")
        source = padded
    shift = [max(-p, 0) for p in w["low"]]  # a negative low padding drops leading elements
    axes = g.ints(f"{name}/axes", range(len(shape)))
    steps = g.ints(f"{name}/steps", w["strides"])
    total = init
    for position in np.ndindex(*w["window"]):
        starts = [int(p) * d + c for p, d, c in zip(position, w["dilations"], shift)]
        ends = [s + (n - 1) * st + 1 for s, n, st in zip(starts, out, w["strides"])]
        part = g.fresh(f"{name}/window")
        g.node("Slice", [source, g.ints(f"{part}/starts", starts), g.ints(f"{part}/ends", ends), axes, steps],
               [part], part)
        combined = g.fresh(f"{name}/sum")
        g.node(function, [total, part], [combined], combined)
        total = combined
    g.node("Identity", [total], [g.out(op)], name)


# --------------------------------------------------------------------------- GATHER and SCATTER


def _nd_form(operand: tuple[int, ...], indices: tuple[int, ...], index_dim: int, mapped: tuple[int, ...],
             collapsed: tuple[int, ...], window_dims: tuple[int, ...], result_rank: int) -> str | None:
    """Why these dimension numbers are not the GatherND / ScatterND form, or None: the index vector is the
    last axis of the indices (or an implicit one after it), it addresses operand axes 0..k-1 in order, those
    are the collapsed (inserted) axes, and the window axes are the trailing axes of the result."""
    k = len(mapped)
    if index_dim not in (len(indices) - 1, len(indices)):
        return f"index_vector_dim {index_dim} is not the last axis of the indices {list(indices)}"
    if index_dim == len(indices) - 1 and indices[-1] != k:
        return f"index vectors of {indices[-1]} entries for {k} mapped axes"
    if tuple(mapped) != tuple(range(k)) or tuple(collapsed) != tuple(range(k)) or not 0 < k <= len(operand):
        return f"indices address axes {list(mapped)} with {list(collapsed)} collapsed (only 0..k-1 in order converts)"
    if tuple(window_dims) != tuple(range(result_rank - (len(operand) - k), result_rank)):
        return f"window axes {list(window_dims)} are not the trailing axes of a rank-{result_rank} result"
    return None


def _gather_ok(g: Graph, op: Operator) -> Result:
    o, operand, indices = op.options, g.shape(op.inputs[0]), g.shape(op.inputs[1])
    mapped = tuple(o.get("start_index_map", ()))
    problem = _nd_form(operand, indices, o.get("index_vector_dim", 0), mapped, tuple(o.get("collapsed_slice_dims", ())),
                       tuple(o.get("offset_dims", ())), len(g.shape(op.outputs[0])))
    if problem:
        return fail(problem)
    k = len(mapped)
    if tuple(o.get("slice_sizes", ())) != (1,) * k + tuple(operand[k:]):
        return fail(f"slice sizes {list(o.get('slice_sizes', ()))} are not 1 on the indexed axes and whole elsewhere")
    batch = indices[:-1] if o.get("index_vector_dim") == len(indices) - 1 else indices
    want = (*batch, *operand[k:])
    return OK if tuple(g.shape(op.outputs[0])) == want else fail(
        f"output shape {list(g.shape(op.outputs[0]))} should be {list(want)}")


def _index_tuples(g: Graph, op: Operator, k: int, prefix: str) -> str:
    """The indices as int64 tuples of ``k`` entries (a trailing axis added for an implicit index vector)."""
    name, index = g.name(op), op.inputs[1]
    wide = g.fresh(f"{name}/{prefix}")
    g.node("Cast", [g.value(index)], [wide], wide, to=7)  # INT64
    if op.options.get("index_vector_dim") == len(g.shape(index)):
        tuples = g.fresh(f"{name}/{prefix}_tuples")
        g.node("Unsqueeze", [wide, g.ints(f"{tuples}/axes", [-1])], [tuples], tuples)
        return tuples
    return wide


@register("STABLEHLO_GATHER", "GatherND of the start indices clamped into the operand (StableHLO clamps them)",
          input_count(2), Check("the GatherND form: index vectors on the last axis address operand axes 0..k-1, "
                                "which are collapsed with slice size 1; whole slices of the other axes, trailing",
                                _gather_ok))
def gather(g: Graph, op: Operator) -> None:
    name, operand = g.name(op), g.shape(op.inputs[0])
    k = len(op.options["start_index_map"])
    tuples = _index_tuples(g, op, k, "indices")
    low, high = g.fresh(f"{name}/at_least_0"), g.fresh(f"{name}/clamped")
    g.node("Max", [tuples, g.add_const(f"{name}/zero", np.zeros(k, np.int64))], [low], low)
    g.node("Min", [low, g.add_const(f"{name}/last", np.asarray(operand[:k], np.int64) - 1)], [high], high)
    g.node("GatherND", [g.value(op.inputs[0]), high], [g.out(op)], name)


def _scatter_ok(g: Graph, op: Operator) -> Result:
    o, operand, indices = op.options, g.shape(op.inputs[0]), g.shape(op.inputs[1])
    mapped = tuple(o.get("scatter_dims_to_operand_dims", ()))
    updates = g.shape(op.inputs[2])
    problem = _nd_form(operand, indices, o.get("index_vector_dim", 0), mapped, tuple(o.get("inserted_window_dims", ())),
                       tuple(o.get("update_window_dims", ())), len(updates))
    if problem:
        return fail(problem)
    k = len(mapped)
    batch = indices[:-1] if o.get("index_vector_dim") == len(indices) - 1 else indices
    if tuple(updates) != (*batch, *operand[k:]) or tuple(g.shape(op.outputs[0])) != tuple(operand):
        return fail(f"updates {list(updates)} and output {list(g.shape(op.outputs[0]))} for an operand "
                    f"{list(operand)} and indices {list(indices)}")
    rows = np.asarray(g.const_value(op.inputs[1])).reshape(-1, k)
    if np.any(rows < 0) or np.any(rows >= np.asarray(operand[:k])):
        return fail("an index is outside the operand (StableHLO skips such updates; ScatterND cannot)")
    if body_function(g, op, "update_computation_subgraph_index") == "Replace" and len(np.unique(rows, axis=0)) < len(rows):
        return fail("an index repeats with the body taking the update (which update wins is unspecified)")
    return OK


@register("STABLEHLO_SCATTER", "ScatterND with the body's reduction (none, add, mul, max, min)", input_count(3),
          const_inputs(1, what="input 1 (the indices)"),
          _body("update_computation_subgraph_index", replace=True),
          Check("the ScatterND form: index vectors on the last axis address operand axes 0..k-1, the inserted "
                "axes; the updates' trailing axes are whole windows; indices inside the operand, unique when the "
                "body takes the update", _scatter_ok))
def scatter(g: Graph, op: Operator) -> None:
    k = len(op.options["scatter_dims_to_operand_dims"])
    tuples = _index_tuples(g, op, k, "indices")
    function = body_function(g, op, "update_computation_subgraph_index")
    assert function is not None  # the operator's check refused a body with no ONNX function
    g.node("ScatterND", [g.value(op.inputs[0]), tuples, g.value(op.inputs[2])], [g.out(op)], g.name(op),
           reduction=_REDUCTIONS[function])
