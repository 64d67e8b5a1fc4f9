"""constant_ops: the same arrays as onnx's reference evaluator, byte for byte, or None."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from accelbuild.passes import constant_ops
from accelbuild.passes.fold_constants import fold_constants

OPSET = 21


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


# (op type, attributes, inputs): the shape arithmetic exporters write, and the corner cases of each operator
CASES = [
    ("Gather", {}, [_i64(1, 19, 10, 10), np.array(2, dtype=np.int64)]),  # a rank-0 index keeps rank 0
    ("Gather", {"axis": 1}, [np.arange(12, dtype=np.float32).reshape(3, 4), _i64(-1, 0)]),
    ("Unsqueeze", {}, [np.array(7, dtype=np.int64), _i64(0)]),
    ("Unsqueeze", {}, [np.ones((2, 3), np.float32), _i64(-1, 0)]),
    ("Squeeze", {}, [np.ones((1, 3, 1), np.float32), _i64(2)]),
    ("Squeeze", {}, [np.ones((1, 3, 1), np.float32)]),
    ("Range", {}, [np.array(0, np.int64), np.array(10, np.int64), np.array(3, np.int64)]),
    ("Range", {}, [np.array(0.5, np.float32), np.array(2.0, np.float32), np.array(0.25, np.float32)]),
    ("Concat", {"axis": 0}, [_i64(1), _i64(-1, 4)]),
    ("Concat", {"axis": -1}, [np.ones((2, 1), np.float32), np.zeros((2, 2), np.float32)]),
    ("Cast", {"to": TensorProto.FLOAT}, [_i64(3, -2, 40)]),
    ("Cast", {"to": TensorProto.INT32}, [np.array([1.7, -2.5, 3.5], np.float32)]),
    ("Expand", {}, [np.arange(3, dtype=np.float32).reshape(3, 1), _i64(2, 3, 4)]),
    ("Add", {}, [np.array([0.1, 0.2], np.float32), np.array([[0.3], [1e-8]], np.float32)]),
    ("Sub", {}, [_i64(10, 20), _i64(1)]),
    ("Mul", {}, [np.array([1.1, 3.3], np.float32), np.array(0.7, np.float32)]),
    ("Reshape", {}, [np.arange(24, dtype=np.float32).reshape(2, 3, 4), _i64(0, -1)]),
    ("Reshape", {"allowzero": 1}, [np.zeros((0, 3), np.float32), _i64(3, 0)]),
    ("Slice", {}, [np.arange(20, dtype=np.int64), _i64(-3), _i64(100)]),
    ("Slice", {}, [np.arange(24, dtype=np.float32).reshape(4, 6), _i64(1, 5), _i64(3, 0), _i64(0, 1), _i64(1, -2)]),
    ("Transpose", {"perm": [1, 0, 2]}, [np.arange(24, dtype=np.float32).reshape(2, 3, 4)]),
    ("Transpose", {}, [np.arange(6, dtype=np.int64).reshape(2, 3)]),
    ("Identity", {}, [_i64(5, 6)]),
]


def _reference(node: onnx.NodeProto, inputs: list[np.ndarray]) -> np.ndarray:
    names = [name for name in node.input if name]
    graph = helper.make_graph([node], "c", [], [helper.make_empty_tensor_value_info(node.output[0])],
                              initializer=[numpy_helper.from_array(v, n) for n, v in zip(names, inputs)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    return np.asarray(ReferenceEvaluator(model).run(None, {})[0])


@pytest.mark.parametrize(("op", "attributes", "inputs"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_operator_gives_the_reference_bytes(op: str, attributes: dict, inputs: list[np.ndarray]) -> None:
    names = [f"in{i}" for i in range(len(inputs))]
    node = helper.make_node(op, names, ["out"], **attributes)
    got = constant_ops.evaluate([node], dict(zip(names, inputs)), OPSET)
    assert got is not None
    want = _reference(node, inputs)
    assert (got["out"].dtype, got["out"].shape) == (want.dtype, want.shape)
    assert got["out"].tobytes() == want.tobytes()


def test_a_chain_reads_the_values_it_computes() -> None:
    nodes = [helper.make_node("Gather", ["shape", "two"], ["h"]), helper.make_node("Unsqueeze", ["h", "zero"], ["h1"]),
             helper.make_node("Concat", ["h1", "minus"], ["new"], axis=0)]
    values = {"shape": _i64(1, 3, 8, 8), "two": np.array(2, np.int64), "zero": _i64(0), "minus": _i64(-1)}
    got = constant_ops.evaluate(nodes, values, OPSET)
    assert got is not None and got["new"].tolist() == [8, -1] and set(got) == {"h", "h1", "new"}


@pytest.mark.parametrize(("nodes", "opset"), [
    ([helper.make_node("Div", ["a", "b"], ["c"])], OPSET),  # not in the table
    ([helper.make_node("Unsqueeze", ["a"], ["c"], axes=[0])], 11),  # the attribute form of older opsets
    ([helper.make_node("Add", ["a", "i"], ["c"])], OPSET),  # element types differ: the reference's error
    ([helper.make_node("Concat", ["s", "s"], ["c"], axis=0)], OPSET),  # rank 0: the reference's error
    ([helper.make_node("Cast", ["a"], ["c"], to=TensorProto.FLOAT8E4M3FN)], OPSET),  # saturating cast
    ([helper.make_node("Gather", ["a", "i"], ["c"], axis=3)], OPSET),  # numpy refuses the axis
])
def test_what_it_does_not_do_the_same_way_is_left_to_the_reference(nodes: list[onnx.NodeProto], opset: int) -> None:
    values = {"a": np.ones((2, 2), np.float32), "b": np.ones((2, 2), np.float32), "i": _i64(0),
              "s": np.array(1, np.int64)}
    assert constant_ops.evaluate(nodes, values, opset) is None


def test_folding_falls_back_to_the_reference_for_other_operators() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])
    nodes = [helper.make_node("Div", ["six", "two"], ["three"]), helper.make_node("Mul", ["x", "three"], ["y"])]
    inits = [numpy_helper.from_array(np.array([6.0, 1.0], np.float32), "six"),
             numpy_helper.from_array(np.array([2.0, 3.0], np.float32), "two")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], initializer=inits),
                              opset_imports=[helper.make_opsetid("", OPSET)])
    assert fold_constants(model) == ["Div three"]
    folded = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert folded["three"].tolist() == pytest.approx([3.0, 1 / 3])
    assert [n.op_type for n in model.graph.node] == ["Mul"]


def test_folding_a_detector_head_does_not_load_the_reference_evaluator() -> None:
    """The point of the table: the shape arithmetic of a YOLO-style head folds without onnx.reference."""
    code = (
        "import sys\n"
        "from accelbuild.testing import models\n"
        "from accelbuild.frontends.input_shapes import ResolvedInput, apply_input_shapes\n"
        "from accelbuild.passes.fold_constants import fold_constants\n"
        "from accelbuild.passes.opset import convert_opset\n"
        "m = models.tiny_detector(opset=17)\n"
        "convert_opset(m)\n"
        "apply_input_shapes(m, [ResolvedInput('images', (1, 3, 64, 64), 'NCHW')])\n"
        "notes = fold_constants(m)\n"
        "assert any(n.startswith('Gather') for n in notes), notes\n"
        "print('onnx.reference' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
