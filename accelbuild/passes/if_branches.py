"""Inline an ``If`` whose other branch cannot run at the pipeline's input shapes.

onnxruntime infers the shapes of both branches of an ``If`` when it loads a model. A model that switches on
a scalar input between two front ends can be valid only where the input shapes fit the branch taken:
Silero VAD v5 picks a 16 kHz or an 8 kHz branch on its ``sr`` input, and at 512 samples the 8 kHz branch
hands its LSTM a rank-4 tensor. With symbolic shapes onnxruntime loads the model; at static ones it refuses
it, so no stage after import could run it.

At those shapes the refused branch cannot run on any input (onnxruntime fails there too), so replacing the
``If`` by the branch that loads changes no output the model can produce. The pass does that only when the
model does not load as it is and inlining exactly one branch of an ``If`` makes it load; the note names the
branch kept and why. Models that load are never touched.
"""

from __future__ import annotations

import logging

import onnx
from onnx import helper

from accelbuild.util import onnx_graph as g
from accelbuild.util import onnx_runtime

log = logging.getLogger(__name__)

_BRANCHES = ("then_branch", "else_branch")


def specialize_if(model: onnx.ModelProto) -> list[str]:
    if not any(node.op_type == "If" for node in model.graph.node):
        return []
    problem = _load_problem(model)
    if problem is None:
        return []
    for index, node in enumerate(model.graph.node):
        if node.op_type != "If":
            continue
        loading = []
        for branch in _BRANCHES:
            trial = _inlined(model, index, branch)
            if trial is not None and _load_problem(trial) is None:
                loading.append((branch, trial))
        if len(loading) == 1:
            branch, trial = loading[0]
            model.CopyFrom(trial)
            dropped = _BRANCHES[1 - _BRANCHES.index(branch)]
            notes = [f"If {node.name or node.output[0]}: kept its {branch}; the {dropped} cannot run at these "
                     f"input shapes ({problem})"]
            return notes + _drop_unread_inputs(model)
    return []


def _drop_unread_inputs(model: onnx.ModelProto) -> list[str]:
    """Remove graph inputs nothing reads any more (the If's condition input, once its Equal is pruned)."""
    g.prune(model.graph)
    read = {name for node in model.graph.node for name in g.node_reads(node)}
    read |= g.graph_output_names(model.graph)
    unread = [value for value in model.graph.input if value.name not in read]
    for value in unread:
        model.graph.input.remove(value)
    return [f"input {value.name} is no longer read: removed" for value in unread]


def _load_problem(model: onnx.ModelProto) -> str | None:
    """Why onnxruntime refuses to load ``model``, on one line; None when it loads."""
    try:
        onnx_runtime.session(model)
    except onnx_runtime.ModelRunError as exc:
        return str(exc)
    return None


def _inlined(model: onnx.ModelProto, index: int, branch_name: str) -> onnx.ModelProto | None:
    """``model`` with its node ``index`` (an If) replaced by the nodes of ``branch_name``; None on a name clash."""
    node = model.graph.node[index]
    branch = next(a.g for a in node.attribute if a.name == branch_name)
    taken = g.defined_names(model.graph)
    local = {out for n in branch.node for out in n.output} | {i.name for i in branch.initializer}
    if local & taken:
        log.debug("If %s: the %s reuses names of the main graph; not inlined", node.name, branch_name)
        return None
    trial = onnx.ModelProto()
    trial.CopyFrom(model)
    graph = trial.graph
    nodes = list(graph.node)
    bridge = [helper.make_node("Identity", [inner.name], [outer], name=f"{node.name or outer}/{branch_name}/{outer}")
              for inner, outer in zip(branch.output, node.output)]
    del graph.node[:]
    graph.node.extend(nodes[:index] + list(branch.node) + bridge + nodes[index + 1:])
    graph.initializer.extend(branch.initializer)
    return trial
