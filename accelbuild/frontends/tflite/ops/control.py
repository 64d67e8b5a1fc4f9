"""Operators that call other subgraphs of the file, and resource variables.

* ``STABLEHLO_COMPOSITE`` and ``CALL_ONCE``: the called subgraph (decomposition, variable initializer) is
  inlined. CALL_ONCE runs on LiteRT's first invocation only; the converted model computes that invocation.
* ``IF``: both branches are inlined and ``Where`` on the condition picks each output (a flat graph an
  accelerator can map; both branches are computed).
* ``WHILE``: an ONNX ``Loop`` whose body is the body subgraph followed by the condition subgraph (the
  condition of the next iteration); the first condition is computed before the loop.
* ``VAR_HANDLE``, ``READ_VARIABLE``, ``ASSIGN_VARIABLE``: a variable is the ONNX tensor last assigned to
  it, read where READ_VARIABLE reads it; what a model assigns for LiteRT's next invocation is not kept.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import onnx
from onnx import helper

from accelbuild.errors import InputFileError
from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import OK, Check, Result, fail, register
from accelbuild.frontends.tflite.reader import Model, Operator
from accelbuild.frontends.tflite.tensors import constant_values, onnx_type

log = logging.getLogger(__name__)

MAX_DEPTH = 8  # subgraph calls nested deeper (or a subgraph calling itself) are refused
VARIABLE_OPS = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"})


# --------------------------------------------------------------------------- checks


def _called(g: Graph, op: Operator, key: str) -> Model:
    return g.root.subgraph(int(op.options.get(key, 0)))


def _subgraph_problem(g: Graph, sub: Model, role: str, index: int) -> str | None:
    """Why subgraph ``index`` cannot be converted where ``op`` calls it, or None."""
    from accelbuild.frontends.tflite.supported import operator_problem  # supported imports the op tables

    if index <= 0 or sub is g.root:
        return f"{role} subgraph index {index} is the main graph"
    if g.depth >= MAX_DEPTH:
        return f"subgraph calls nested more than {MAX_DEPTH} deep"
    inner = Graph(sub, constant_values(sub))
    inner.root, inner.depth = g.root, g.depth + 1
    for inner_op in sub.operators:
        reason = operator_problem(inner, inner_op)
        if reason is not None:
            tensor = inner.names[inner_op.outputs[0]] if inner_op.outputs else f"operator {inner_op.index}"
            return f"{role} subgraph {index}: {inner_op.name} (tensor {tensor!r}): {reason}"
    return None


def _uses_variables(root: Model, sub: Model, depth: int = 0) -> bool:
    """``sub`` or a subgraph it calls (to :data:`MAX_DEPTH`) uses resource variables."""
    if any(o.name in VARIABLE_OPS for o in sub.operators):
        return True
    called = {value for o in sub.operators for key, value in o.options.items()
              if key.endswith("_subgraph_index") and isinstance(value, int) and 0 < value <= len(root.subgraphs)}
    return depth < MAX_DEPTH and any(_uses_variables(root, root.subgraph(k), depth + 1) for k in sorted(called))


def _signature(g: Graph, indices: Sequence[int]) -> list[tuple[str, tuple[int, ...]]]:
    return [(g.tensor(i).dtype, tuple(g.shape(i))) for i in indices]


def _takes(sub: Model, inner: Graph, passed: list[tuple[str, tuple[int, ...]]] | None = None) -> list:
    """The subgraph's input signature (or ``passed`` in its place), without the shapes of inputs nothing
    reads: LiteRT leaves those at the file's placeholder shape when it resizes the rest."""
    read = {i for o in sub.operators for i in o.inputs} | set(sub.outputs)
    signature = _signature(inner, sub.inputs) if passed is None else passed
    if len(signature) != len(sub.inputs):
        return [None]
    return [(dtype, shape if index in read else None) for index, (dtype, shape) in zip(sub.inputs, signature)]


def _gives(g: Graph, op: Operator, key: str, sub: Model, inner: Graph) -> tuple[list, list]:
    """What the subgraph gives and what the operator expects of it: a WHILE condition one bool, a WHILE body
    the loop-carried tensors, any other subgraph the operator's outputs."""
    have = _signature(inner, sub.outputs)
    if key == "cond_subgraph_index":
        return [(dtype, ()) for dtype, shape in have if all(d == 1 for d in shape[:1]) and len(shape) <= 1], \
            [("BOOL", ())]
    return have, _signature(g, op.inputs if key == "body_subgraph_index" else op.outputs)


def calls(*roles: tuple[str, str], no_variables: bool = False) -> Check:
    """Each called subgraph (``roles``: option key and its name) exists, converts, and takes and gives what
    the operator passes and expects; with ``no_variables`` it uses no resource variables."""
    def predicate(g: Graph, op: Operator) -> Result:
        for key, role in roles:
            index = int(op.options.get(key, 0))
            try:
                sub = _called(g, op, key)
            except IndexError as exc:
                return fail(f"{role} subgraph: {exc}")
            problem = _subgraph_problem(g, sub, role, index)
            if problem:
                return fail(problem)
            inner = Graph(sub, {})
            if no_variables and _uses_variables(g.root, sub):
                return fail(f"{role} subgraph {index} uses resource variables (state changed inside a branch or loop)")
            passed = _signature(g, [i for i in op.inputs[1 if op.name == "IF" else 0:] if i >= 0])
            if _takes(sub, inner) != _takes(sub, inner, passed):
                return fail(f"{role} subgraph {index} takes {_signature(inner, sub.inputs)}, the operator passes "
                            f"{passed}")
            have, want = _gives(g, op, key, sub, inner)
            if have != want:
                return fail(f"{role} subgraph {index} gives {_signature(inner, sub.outputs)}, expected {want}")
        return OK
    return Check("the called subgraphs convert and take and give the operator's tensor types and shapes", predicate)


def _scalar_bool(g: Graph, op: Operator) -> Result:
    cond = g.tensor(op.inputs[0])
    if cond.dtype != "BOOL" or any(d != 1 for d in cond.shape):
        return fail(f"condition {g.names[op.inputs[0]]!r} is {cond.dtype} {list(cond.shape)}, not one bool")
    return OK


# --------------------------------------------------------------------------- inlining


def inline(g: Graph, op: Operator, sub: Model, role: str, inputs: Sequence[str], into: Graph | None = None
           ) -> list[str]:
    """Convert ``sub`` into ``into`` (default ``g``) with its inputs bound to ``inputs``; its outputs' tensors."""
    from accelbuild.frontends.tflite.ops.base import spec_for

    host = into or g
    prefix = f"{g.name(op)}/{role}" if op.outputs else role
    child = host.called(sub, constant_values(sub), prefix, inputs)
    for inner in sub.operators:
        spec = spec_for(inner)
        assert spec is not None, inner.name  # the call's check refused a subgraph with an operator it cannot convert
        spec.convert(child, inner)
    return [child.value(i) for i in sub.outputs]


def _identities(g: Graph, sources: Sequence[str], targets: Sequence[str]) -> None:
    for source, target in zip(sources, targets):
        g.node("Identity", [source], [target], target)


@register("STABLEHLO_COMPOSITE", "the decomposition subgraph, inlined",
          calls(("decomposition_subgraph_index", "decomposition")))
def composite(g: Graph, op: Operator) -> None:
    sub = _called(g, op, "decomposition_subgraph_index")
    results = inline(g, op, sub, "decomposition", [g.value(i) for i in op.inputs if i >= 0])
    _identities(g, results, [g.out(op, k) for k in range(len(op.outputs))])


@register("IF", "both branch subgraphs inlined, then Where on the condition for each output",
          Check("the condition is one bool", _scalar_bool),
          calls(("then_subgraph_index", "then"), ("else_subgraph_index", "else"), no_variables=True))
def if_(g: Graph, op: Operator) -> None:
    args = [g.value(i) for i in op.inputs[1:] if i >= 0]
    taken = inline(g, op, _called(g, op, "then_subgraph_index"), "then", args)
    other = inline(g, op, _called(g, op, "else_subgraph_index"), "else", args)
    cond = g.fresh(f"{g.name(op)}/cond")
    g.node("Reshape", [g.value(op.inputs[0]), g.ints(f"{cond}/shape", [])], [cond], cond)
    for k, (a, b) in enumerate(zip(taken, other)):
        g.node("Where", [cond, a, b], [g.out(op, k)], g.name(op, k))


def _scalar_cond(g: Graph, op: Operator, name: str, source: str) -> str:
    cond = g.fresh(f"{g.name(op)}/{name}")
    g.node("Reshape", [source, g.ints(f"{cond}/shape", [])], [cond], cond)
    return cond


@register("WHILE", "Loop: the body subgraph, then the condition subgraph for the next iteration; the first "
                   "condition computed before it",
          calls(("cond_subgraph_index", "cond"), ("body_subgraph_index", "body"), no_variables=True),
          Check("loop-carried tensors keep their types and shapes",
                lambda g, op: OK if _signature(g, op.inputs) == _signature(g, op.outputs)
                else fail(f"outputs {_signature(g, op.outputs)} differ from inputs {_signature(g, op.inputs)}")))
def while_(g: Graph, op: Operator) -> None:
    cond_sub, body_sub = _called(g, op, "cond_subgraph_index"), _called(g, op, "body_subgraph_index")
    name = g.name(op)
    first = _scalar_cond(g, op, "cond", inline(g, op, cond_sub, "cond", [g.value(i) for i in op.inputs])[0])
    carried = [g.fresh(f"{name}/body/in{k}") for k in range(len(op.inputs))]
    iteration, cond_in = g.fresh(f"{name}/body/iteration"), g.fresh(f"{name}/body/cond_in")
    # the Loop body: a graph of its own nodes and initializers (no tensors of its own: the subgraphs fill it)
    body = g.called(Model(g.model.path, g.model.version, (), (), (), ()), {}, f"{name}/loop", [], own_nodes=True)
    results = inline(g, op, body_sub, "body", carried, into=body)
    again = inline(g, op, cond_sub, "next", results, into=body)[0]
    outs = [body.fresh(f"{name}/body/out{k}") for k in range(len(results))]
    cond_out = body.fresh(f"{name}/body/cond_out")
    body.node("Reshape", [again, body.ints(f"{cond_out}/shape", [])], [cond_out], cond_out)
    _identities(body, results, outs)
    graph = helper.make_graph(
        body.nodes, f"{name}/body",
        [helper.make_tensor_value_info(iteration, onnx.TensorProto.INT64, []),
         helper.make_tensor_value_info(cond_in, onnx.TensorProto.BOOL, []),
         *(_info(g, i, n) for i, n in zip(op.inputs, carried))],
        [helper.make_tensor_value_info(cond_out, onnx.TensorProto.BOOL, []),
         *(_info(g, i, n) for i, n in zip(op.outputs, outs))],
        initializer=list(body.initializers.values()))
    g.node("Loop", ["", first, *(g.value(i) for i in op.inputs)], [g.out(op, k) for k in range(len(op.outputs))],
           name, body=graph)


def _info(g: Graph, index: int, name: str) -> onnx.ValueInfoProto:
    elem_type = onnx_type(g.tensor(index))
    assert elem_type is not None, name  # the loop's check refused tensors ONNX cannot represent
    return helper.make_tensor_value_info(name, elem_type, list(g.shape(index)))


# --------------------------------------------------------------------------- resource variables


def _handle_ok(g: Graph, op: Operator) -> Result:
    if op.inputs or len(op.outputs) != 1 or g.tensor(op.outputs[0]).dtype != "RESOURCE":
        return fail("expected no inputs and one RESOURCE output")
    return OK


def _reads_a_handle(count: int) -> Check:
    def predicate(g: Graph, op: Operator) -> Result:
        if len(op.inputs) != count or op.inputs[0] < 0 or g.tensor(op.inputs[0]).dtype != "RESOURCE":
            return fail(f"expected {count} inputs, the first a RESOURCE handle")
        producers = [o for o in g.model.operators if op.inputs[0] in o.outputs]
        if not producers or producers[0].name != "VAR_HANDLE":
            return fail("its handle is not made by a VAR_HANDLE of the same subgraph")
        return OK
    return Check("the handle is a VAR_HANDLE of the same subgraph", predicate)


@register("VAR_HANDLE", "nothing (names the variable that READ_VARIABLE and ASSIGN_VARIABLE use)",
          Check("no inputs, one RESOURCE output", _handle_ok))
def var_handle(g: Graph, op: Operator) -> None:
    g.handles[op.outputs[0]] = f"{op.options.get('container', '')}/{op.options.get('shared_name', '')}"


@register("ASSIGN_VARIABLE", "nothing (the variable is the assigned tensor from here on)", _reads_a_handle(2))
def assign_variable(g: Graph, op: Operator) -> None:
    key = g.handles[op.inputs[0]]
    if g.depth == 0 and key in g.variables:
        log.warning("%s: the model assigns resource variable %r, which LiteRT keeps for its next invocation: the "
                    "converted model computes one invocation", g.model.path.name, key.lstrip("/"))
    g.variables[key] = g.value(op.inputs[1])


@register("READ_VARIABLE", "Identity of the tensor last assigned to the variable", _reads_a_handle(1))
def read_variable(g: Graph, op: Operator) -> None:
    key = g.handles[op.inputs[0]]
    if key not in g.variables:
        raise InputFileError(g.model.path, f"READ_VARIABLE (tensor {g.name(op)!r}): reads resource variable "
                                           f"{key.lstrip('/')!r} before any ASSIGN_VARIABLE gives it a value")
    g.node("Identity", [g.variables[key]], [g.out(op)], g.name(op))


@register("CALL_ONCE", "the initializer subgraph, inlined (LiteRT runs it on the first invocation only)",
          calls(("init_subgraph_index", "init")))
def call_once(g: Graph, op: Operator) -> None:
    inline(g, op, _called(g, op, "init_subgraph_index"), f"init{op.index}", [])
