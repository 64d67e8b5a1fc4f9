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


def test_static_shapes_agrees_with_static_shape_name_by_name() -> None:
    """The one-pass index gives what the per-name lookup gives: an initializer first, then the first shaped
    description among inputs, value_info and outputs (a symbolic one: None; none at all: absent)."""
    shaped = helper.make_tensor_value_info
    graph = helper.make_graph(
        [], "g",
        [shaped("x", TensorProto.FLOAT, [1, 3]), shaped("w", TensorProto.FLOAT, [9]),
         helper.make_tensor_value_info("unshaped", TensorProto.FLOAT, None)],
        [shaped("y", TensorProto.FLOAT, ["n", 2]), shaped("v", TensorProto.FLOAT, [7])],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])],
        value_info=[shaped("v", TensorProto.FLOAT, [5, 5]), shaped("unshaped", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph)
    shapes = g.static_shapes(model)
    for name in ["x", "w", "y", "v", "unshaped", "missing"]:
        assert shapes.get(name) == g.static_shape(model, name), name
    assert shapes["w"] == [2] and shapes["v"] == [5, 5] and shapes["unshaped"] == [4] and shapes["y"] is None


def test_readers_are_the_nodes_whose_reads_name_the_tensor() -> None:
    """An input, an If branch reading an outer value, a branch defining its own value of that name, an
    empty optional input: readers agrees with node_reads, node by node."""
    outer = helper.make_graph([helper.make_node("Identity", ["w"], ["t"])], "then", [],
                              [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1])])
    own = helper.make_graph([helper.make_node("Constant", [], ["w"], value_float=1.0),
                             helper.make_node("Identity", ["w"], ["e"])], "else", [],
                            [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1])])
    nodes = [helper.make_node("Add", ["x", "w"], ["a"], name="add"),
             helper.make_node("If", ["c"], ["i"], name="if", then_branch=outer, else_branch=own),
             helper.make_node("Clip", ["a", "", "w"], ["clip"], name="clip"),
             helper.make_node("If", ["c"], ["j"], name="if_own", then_branch=own, else_branch=own)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("clip", TensorProto.FLOAT, [1])])
    for tensor in ["x", "w", "a", "c", "", "t", "missing"]:
        assert g.readers(graph, tensor) == [n for n in graph.node if tensor in g.node_reads(n)], tensor
    assert [n.name for n in g.readers(graph, "w")] == ["add", "if", "clip"]


def test_the_reader_index_answers_as_readers_before_and_after_edits() -> None:
    """One walk answers every tensor as ``readers`` does, subgraph reads included; ``update`` and ``forget``
    keep it so after a node's inputs change and after a node goes."""
    outer = helper.make_graph([helper.make_node("Identity", ["w"], ["t"])], "then", [],
                              [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1])])
    nodes = [helper.make_node("Add", ["x", "w"], ["a"], name="add"),
             helper.make_node("If", ["c"], ["i"], name="if", then_branch=outer, else_branch=outer),
             helper.make_node("Mul", ["a", "a"], ["m"], name="mul"),
             helper.make_node("Clip", ["m", "", "w"], ["clip"], name="clip")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("clip", TensorProto.FLOAT, [1])])
    tensors = ["x", "w", "a", "c", "m", "", "t", "w2", "missing", "clip"]

    def agrees(index: g.ReaderIndex) -> None:
        for tensor in tensors:
            assert sorted(n.name for n in index.of(tensor)) == sorted(n.name for n in g.readers(graph, tensor)), tensor
            assert index.sole_consumer(graph, tensor) is g.sole_consumer(graph, tensor), tensor

    index = g.ReaderIndex(graph)
    agrees(index)
    mul = graph.node[2]
    before = g.node_reads(mul)
    mul.input[1] = "w2"  # reads a once now, and w2
    index.update(mul, before)
    agrees(index)
    clip = graph.node[3]
    index.forget(clip, g.node_reads(clip))
    graph.node.remove(clip)
    agrees(index)


def test_set_initializers_is_set_initializer_for_each() -> None:
    """Replacing some initializers and adding others in one call gives the bytes one call per value gives."""
    import numpy as np

    def graph() -> onnx.GraphProto:
        made = _graph([("a", ["x"]), ("b", ["a"])])
        for name in ("w0", "w1", "w2"):
            made.initializer.append(onnx.numpy_helper.from_array(np.zeros(2, np.float32), name))
        return made

    values = {"w1": np.arange(3, dtype=np.float32), "new": np.array(7, np.int64), "w0": np.ones(1, np.float32),
              "new2": np.zeros((2, 2), np.float32)}
    one_by_one, batch = graph(), graph()
    for name, value in values.items():
        g.set_initializer(one_by_one, name, value)
    g.set_initializers(batch, values)
    assert batch.SerializeToString() == one_by_one.SerializeToString()
    assert [t.name for t in batch.initializer] == ["w0", "w1", "w2", "new", "new2"]
