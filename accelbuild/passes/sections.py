"""Cut a model into pre / AI / post sections at given tensors, as standalone models.

Each section is the set of nodes between its boundary tensors, found by walking back from its outputs
and stopping at its inputs and at constants. The sections must not share nodes: if, say, the
post-processing also reads a tensor from inside the AI section, there is no clean cut, and the caller
falls back to one AI section. Models are cut with onnx's own ``Extractor``, taught to follow what the
subgraphs of If/Loop/Scan nodes read from the graph around them (weights a branch uses, say), which
onnx's walk of explicit inputs alone would drop.

The crop stage always writes ``pre.onnx`` and ``post.onnx``, so every stage can declare them as inputs. Where
there is no such section the file is the no-section form (``no_section``): a valid model that passes its
tensors through unchanged (no nodes; its inputs are its outputs), marked ``accelbuild.section = none``.
Readers use ``read_section``, which gives ``None`` for that form, exactly as if the file were missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnx.utils import Extractor

from accelbuild.errors import StageError
from accelbuild.util import onnx_graph as g

SECTION_KEY = "accelbuild.section"  # metadata_props key; the value NO_SECTION marks the no-section form
NO_SECTION = "none"


class NoCleanCut(Exception):
    """The requested points do not split the graph into non-overlapping sections.

    ``needed`` names the tensors one section still reads from another across the cut (adding them to the
    crop points, or moving the points, makes the cut clean)."""

    def __init__(self, message: str, needed: list[str] | None = None) -> None:
        super().__init__(message)
        self.needed = needed or []


@dataclass
class Section:
    name: str
    inputs: list[str]
    outputs: list[str]
    nodes: list[str] = field(default_factory=list)
    model: onnx.ModelProto | None = None

    def describe(self) -> dict[str, object]:
        return {"inputs": self.inputs, "outputs": self.outputs, "nodes": len(self.nodes)}


def cut(model: onnx.ModelProto, crop_inputs: list[str], crop_outputs: list[str]) -> dict[str, Section]:
    """Sections ``pre`` (if the AI part starts after the model inputs), ``ai``, ``post`` (if it ends
    before the model outputs). Raises ``NoCleanCut`` with the reason when the cut is not clean."""
    graph = model.graph
    model_inputs = [v.name for v in g.real_inputs(graph)]
    model_outputs = [v.name for v in graph.output]
    sections: dict[str, Section] = {}
    if set(crop_inputs) != set(model_inputs):
        sections["pre"] = _section(model, "pre", model_inputs, crop_inputs)
    sections["ai"] = _section(model, "ai", crop_inputs, crop_outputs)
    if set(crop_outputs) != set(model_outputs):
        sections["post"] = _section(model, "post", crop_outputs, model_outputs)
    _check_disjoint(model, sections)
    _extract(model, sections)
    return sections


def section_nodes(model: onnx.ModelProto, inputs: list[str], outputs: list[str]) -> list[str]:
    """Names of the nodes between ``inputs`` and ``outputs`` (in graph order)."""
    return _section(model, "ai", inputs, outputs).nodes


def ai_only(model: onnx.ModelProto, crop_inputs: list[str], crop_outputs: list[str]) -> dict[str, Section]:
    """Just the requested AI section (``crop.allow_partial``): no pre/post sections are made."""
    sections = {"ai": _section(model, "ai", crop_inputs, crop_outputs)}
    _extract(model, sections)
    return sections


class _SubgraphAwareExtractor(Extractor):
    """onnx's ``Extractor`` that counts the outer-scope values a node's subgraphs read as its inputs."""

    def _dfs_search_reachable_nodes(self, node_output_name: str, graph_input_names: set[str],
                                    reachable: set[int]) -> None:
        stack = [node_output_name]
        while stack:
            name = stack.pop()
            if name in graph_input_names or name not in self.outmap:
                continue
            index = self.outmap[name]
            if index not in reachable:
                reachable.add(index)
                stack += g.node_reads(self.graph.node[index])

    def _collect_reachable_tensors(self, nodes: list[onnx.NodeProto]) -> tuple[list, list]:
        super()._collect_reachable_tensors(nodes)  # onnx's own checks (no sparse initializers, ...)
        names = {name for node in nodes for name in (*g.node_reads(node), *node.output)}
        return ([self.initializers[t] for t in self.initializers if t in names],
                [self.value_infos[t] for t in self.value_infos if t in names])


def _extract(model: onnx.ModelProto, sections: dict[str, Section]) -> None:
    extractor = _SubgraphAwareExtractor(model)
    for section in sections.values():
        untyped = [t for t in (*section.inputs, *section.outputs) if t not in extractor.value_infos]
        if untyped:  # onnx's inference left them out (the import warned that strict inference failed)
            raise StageError(f"cannot cut the {section.name} section at {', '.join(map(repr, untyped))}: shape "
                             "inference gave no type or shape for them, so the section's inputs and outputs "
                             "cannot be declared; choose crop points with known shapes (`accelbuild tensors` "
                             "lists them)")
        section.model = extractor.extract_model(section.inputs, section.outputs)
        section.model.graph.name = f"{model.graph.name or 'model'}_{section.name}"


def _section(model: onnx.ModelProto, name: str, inputs: list[str], outputs: list[str]) -> Section:
    """The nodes between ``inputs`` and ``outputs``; model inputs it reaches become inputs too."""
    graph = model.graph
    producers = g.producers(graph)
    constants = set(g.initializers(graph))
    model_inputs = {v.name for v in graph.input}
    stop = set(inputs) | constants
    extra_inputs: list[str] = []
    seen_nodes: set[str] = set()  # node names: unique after import's name_nodes pass
    pending = list(outputs)
    visited: set[str] = set()
    while pending:
        tensor = pending.pop()
        if tensor in visited or tensor in stop or not tensor:
            continue
        visited.add(tensor)
        producer = producers.get(tensor)
        if producer is None:
            if tensor in model_inputs:
                extra_inputs.append(tensor)
                continue
            raise NoCleanCut(f"{name} section needs tensor {tensor!r}, which nothing produces")
        if producer.name not in seen_nodes:
            seen_nodes.add(producer.name)
            pending.extend(g.node_reads(producer))
    nodes = [n.name for n in graph.node if n.name in seen_nodes]
    return Section(name, list(inputs) + sorted(set(extra_inputs) - set(inputs)), list(outputs), nodes)


def _check_disjoint(model: onnx.ModelProto, sections: dict[str, Section]) -> None:
    names = list(sections)
    nodes = {n.name: n for n in model.graph.node}
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            shared = set(sections[first].nodes) & set(sections[second].nodes)
            if shared:
                made_by_shared = {t for name in shared for t in nodes[name].output}
                own = [nodes[name] for name in sections[second].nodes if name not in shared]
                needed = sorted({t for node in own for t in node.input if t in made_by_shared})
                if not needed:  # the section's own outputs are made inside the shared part
                    needed = sorted(t for t in sections[second].outputs if t in made_by_shared)
                raise NoCleanCut(
                    f"the {second} section still needs {', '.join(repr(t) for t in needed)} from inside the "
                    f"{first} section ({len(shared)} node(s) would run in both); add them to the crop points, "
                    f"or set crop.allow_partial: true to build the requested ai section alone", needed)


def no_section(name: str, ai: onnx.ModelProto, boundary: str) -> onnx.ModelProto:
    """The no-section form of section ``name`` (``pre`` or ``post``) around the AI section ``ai``: a model
    with no nodes whose outputs are its inputs, the AI section's inputs (``boundary="inputs"``) or outputs
    (``"outputs"``), with their types and shapes."""
    values = list(ai.graph.input if boundary == "inputs" else ai.graph.output)
    graph = onnx.helper.make_graph([], f"{ai.graph.name or 'model'}_no_{name}", values, values)
    opsets = [o for o in ai.opset_import if o.domain in ("", "ai.onnx")] or [onnx.helper.make_opsetid("", 13)]
    model = onnx.helper.make_model(graph, opset_imports=opsets)
    model.doc_string = f"no {name} section: this model passes its inputs through unchanged"
    onnx.helper.set_model_props(model, {SECTION_KEY: NO_SECTION})
    return model


def is_no_section(model: onnx.ModelProto) -> bool:
    return any(p.key == SECTION_KEY and p.value == NO_SECTION for p in model.metadata_props)


def read_section(path: Path) -> onnx.ModelProto | None:
    """A section file the crop stage wrote: the model, or ``None`` for the no-section form."""
    model = onnx.load(str(path))
    return None if is_no_section(model) else model
