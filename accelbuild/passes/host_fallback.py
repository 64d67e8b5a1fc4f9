"""Operators a chip cannot run at the ends of the ai section move to the host's pre and post sections.

A family whose chip runs a fixed operator set (mx3) gives the crop stage that set. Nodes the chip cannot
run that sit between the ai section's inputs and the first node it can run (a prefix), or after the last
(a suffix), move to the host: the crop points move past them. One in the middle has chip work on both
sides and cannot move; it stays (``Fallback.kept``), and the crop stage names it so the user can crop
around it. Refusing it would refuse models that build today: in the corpus (docs/corpus.md) 11 of the 29
models mx3 builds have such a node (an LSTM, a Pow, a Log).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx

from accelbuild.passes import sections
from accelbuild.util import onnx_graph as g


@dataclass
class Fallback:
    """The crop points after the move, what moved where (``to``: "pre" or "post"), and the nodes the chip
    cannot run that stay, with chip work before and after them (or with none at all)."""

    inputs: list[str]
    outputs: list[str]
    moved: list[dict[str, str]] = field(default_factory=list)
    kept: list[dict[str, str]] = field(default_factory=list)
    idle: bool = False  # the chip runs no node of the ai section: nothing moves, every node is kept

    def record(self, chip: str) -> dict[str, object]:
        ops = sorted({m["op"] for m in self.moved + self.kept})
        return {"chip": chip, "reason": f"{', '.join(ops)} not among the operators {chip} runs",
                "moved": self.moved, "kept": self.kept}


def runs_on_chip(node: onnx.NodeProto, chip_ops: frozenset[str]) -> bool:
    return node.domain in ("", "ai.onnx") and node.op_type in chip_ops


def move_to_host(model: onnx.ModelProto, inputs: list[str], outputs: list[str],
                 chip_ops: frozenset[str]) -> Fallback:
    """The crop points ``inputs``/``outputs`` moved past the unsupported prefix and suffix of the ai section
    between them; unsupported nodes with chip work on both sides are listed as ``kept``."""
    names = set(sections.section_nodes(model, inputs, outputs))
    order = [n for n in g.topological_order(model.graph) if n.name in names]
    unsupported = {n.name for n in order if not runs_on_chip(n, chip_ops)}
    if not unsupported:
        return Fallback(list(inputs), list(outputs))
    if unsupported == names:  # moving them all would leave the chip nothing
        return Fallback(list(inputs), list(outputs), kept=_nodes(order), idle=True)
    made_by = {out: n.name for n in order for out in n.output if out}
    prefix: set[str] = set()
    for node in order:
        if node.name in unsupported and all(made_by.get(t) in prefix for t in g.node_reads(node) if t in made_by):
            prefix.add(node.name)
    read_by: dict[str, list[str]] = {}
    for node in order:
        for tensor in g.node_reads(node):
            read_by.setdefault(tensor, []).append(node.name)
    suffix: set[str] = set()
    for node in reversed(order):
        if node.name in unsupported and node.name not in prefix and all(
                reader in suffix for out in node.output for reader in read_by.get(out, [])):
            suffix.add(node.name)
    kept = _nodes([n for n in order if n.name in unsupported - prefix - suffix])
    remaining = [n for n in order if n.name not in prefix | suffix]
    new_inputs = _ordered([t for n in remaining for t in g.node_reads(n)
                           if t in inputs or made_by.get(t) in prefix], inputs)
    new_outputs = _ordered([t for t in outputs if made_by.get(t) not in suffix]
                           + [t for n in order if n.name in suffix for t in g.node_reads(n)
                              if t in inputs or (t in made_by and made_by[t] not in prefix | suffix)], outputs)
    moved = [{"node": n.name, "op": n.op_type, "to": "pre" if n.name in prefix else "post"}
             for n in order if n.name in prefix | suffix]
    return Fallback(new_inputs, new_outputs, moved, kept)


def _ordered(tensors: list[str], first: list[str]) -> list[str]:
    """``tensors`` without repeats: those of ``first`` in its order, then the others as they came."""
    unique = list(dict.fromkeys(tensors))
    return [t for t in first if t in unique] + [t for t in unique if t not in first]


def _nodes(nodes: list[onnx.NodeProto]) -> list[dict[str, str]]:
    return [{"node": n.name, "op": n.op_type} for n in nodes]


def listed(nodes: list[dict[str, str]], limit: int = 5) -> str:
    """``Op (node), ...`` for a message, the first ``limit`` of them."""
    shown = ", ".join(f"{n['op']} ({n['node']})" for n in nodes[:limit])
    return shown + (f" and {len(nodes) - limit} more" if len(nodes) > limit else "")
