"""util/onnx_graph.py: the topological order (waves, stable for ties) on generated graphs."""

from __future__ import annotations

import random

import onnx
import pytest
from onnx import TensorProto, helper

from accelbuild.util import onnx_graph as g


def _graph(edges: list[tuple[str, list[str]]]) -> onnx.GraphProto:
    """One Add/Identity per entry: ``(output, inputs)``; ``x`` is the graph input."""
    nodes = [helper.make_node("Add" if len(ins) == 2 else "Identity", ins, [out], name=out) for out, ins in edges]
    value = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    return helper.make_graph(nodes, "g", [value], [helper.make_tensor_value_info(edges[-1][0], TensorProto.FLOAT, [1])])


def _waves(graph: onnx.GraphProto) -> list[str]:
    """The order by definition: repeatedly, every waiting node whose inputs exist, in graph order."""
    available, pending, ordered = {"x"}, list(graph.node), []
    while pending:
        ready = [n for n in pending if all(i in available for i in n.input)]
        pending = [n for n in pending if n not in ready]
        ordered += [n.name for n in ready]
        available.update(o for n in ready for o in n.output)
    return ordered


def test_a_reversed_chain_comes_out_in_dependency_order() -> None:
    edges = [(f"t{i}", ["x" if i == 0 else f"t{i - 1}"]) for i in range(50)]
    graph = _graph(edges[::-1])
    assert [n.name for n in g.topological_order(graph)] == [f"t{i}" for i in range(50)]


def test_ties_keep_the_graph_order_wave_by_wave() -> None:
    graph = _graph([("b", ["a"]), ("c", ["x"]), ("a", ["x"]), ("d", ["b", "c"])])
    assert [n.name for n in g.topological_order(graph)] == ["c", "a", "b", "d"]


@pytest.mark.parametrize("seed", range(5))
def test_random_dags_match_the_definition(seed: int) -> None:
    rng = random.Random(seed)
    edges: list[tuple[str, list[str]]] = []
    for i in range(200):
        names = ["x", *(out for out, _ in edges)]
        edges.append((f"n{i}", rng.sample(names, min(len(names), rng.choice([1, 2])))))
    rng.shuffle(edges)
    graph = _graph(edges)
    assert [n.name for n in g.topological_order(graph)] == _waves(graph)


def test_a_cycle_is_named() -> None:
    graph = _graph([("a", ["x", "b"]), ("b", ["a"])])
    with pytest.raises(ValueError, match="graph has a cycle near: a, b"):
        g.topological_order(graph)
