"""Subgraph calls (IF, WHILE, STABLEHLO_COMPOSITE, CALL_ONCE) and resource variables: what they become and
how a model that misuses them is refused (``accelbuild/frontends/tflite/ops/control.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from flatbuffers import flexbuffers

from accelbuild.errors import InputFileError
from accelbuild.frontends.tflite import load_tflite
from accelbuild.frontends.tflite.reader import read_model
from accelbuild.testing.tflite_op_cases import CASES, build, if_case, op, while_case
from accelbuild.util.tflite_builder import TFLiteBuilder


def _load(tmp_path: Path, data: bytes):
    (tmp_path / "m.tflite").write_bytes(data)
    return load_tflite(tmp_path / "m.tflite")


def _refusal(tmp_path: Path, data: bytes) -> str:
    (tmp_path / "m.tflite").write_bytes(data)
    with pytest.raises(InputFileError) as error:
        load_tflite(tmp_path / "m.tflite")
    return str(error.value)


def test_every_subgraph_is_read(tmp_path: Path) -> None:
    (tmp_path / "m.tflite").write_bytes(while_case().data)
    model = read_model(tmp_path / "m.tflite")
    assert [len(s.operators) for s in model.subgraphs] == [1, 4]
    assert model.subgraph(2) is model.subgraphs[1] and model.subgraph(0) is model
    with pytest.raises(IndexError):
        model.subgraph(3)


def test_if_is_both_branches_and_a_where(tmp_path: Path) -> None:
    model = _load(tmp_path, if_case(0.1, 3.0).data)
    kinds = [n.op_type for n in model.graph.node]
    assert "If" not in kinds and kinds.count("Where") == 1 and {"Mul", "Tanh"} <= set(kinds)


def test_while_is_a_loop_whose_body_ends_with_the_condition(tmp_path: Path) -> None:
    model = _load(tmp_path, while_case().data)
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    body = [n.op_type for n in loop.attribute[0].g.node]
    assert body.index("Less") > body.index("Tanh")  # the next iteration's condition on the new values


def _calling_if(then_index: int) -> bytes:
    def body(b: TFLiteBuilder, x: int, s: int) -> int:
        cond = op(b, "GREATER", [s, b.const("zero", np.zeros((1,), np.float32))], (1,), dtype="bool", name="cond")
        branch = b.subgraph()
        bx = branch.add_tensor("x", (2, 3))
        out = op(branch, "WHERE" if then_index == 1 else "TANH", [bx], (2, 3), name="out")
        index = b.add_subgraph(branch, [bx], [out], "branch")
        return op(b, "IF", [cond, x], (2, 3), {"then_subgraph_index": then_index, "else_subgraph_index": index})
    return build([(2, 3), (1,)], body).data


@pytest.mark.parametrize(("then_index", "reason"), [
    (0, "then subgraph index 0 is the main graph"),
    (7, "then subgraph: subgraph 7 does not exist (the file has 2)"),
    (1, "then subgraph 1: WHERE (tensor 'out'): not converted: its output size depends on the values"),
])
def test_a_bad_call_is_refused_with_the_subgraph_and_reason(tmp_path: Path, then_index: int, reason: str) -> None:
    message = _refusal(tmp_path, _calling_if(then_index))
    assert message.splitlines()[1].startswith(f"  IF (tensor 'y'): {reason}"), message


def test_reading_a_variable_never_assigned_is_refused(tmp_path: Path) -> None:
    def body(b: TFLiteBuilder, x: int) -> int:
        handle = op(b, "VAR_HANDLE", [], (), {"shared_name": "w"}, "resource", "w")
        return op(b, "ADD", [x, op(b, "READ_VARIABLE", [handle], (2, 3), name="value")], (2, 3), {})
    message = _refusal(tmp_path, build([(2, 3)], body).data)
    assert message.endswith("READ_VARIABLE (tensor 'value'): reads resource variable 'w' before any "
                            "ASSIGN_VARIABLE gives it a value")


def test_an_assigned_variable_warns_that_one_invocation_is_converted(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="accelbuild"):
        _load(tmp_path, CASES["ASSIGN_VARIABLE"][0]().data)
    assert [r.getMessage() for r in caplog.records] == [
        "m.tflite: the model assigns resource variable 'v', which LiteRT keeps for its next invocation: the "
        "converted model computes one invocation"]


def test_gather_with_an_implicit_index_vector_picks_clamped_rows(tmp_path: Path) -> None:
    """``index_vector_dim`` after the indices' last axis (``tf.gather``'s form): checked against numpy, as
    LiteRT 2.3's kernel reads past memory on it; out-of-range rows are clamped as StableHLO says."""
    import onnxruntime as ort

    from accelbuild.testing.tflite_op_cases import stablehlo_gather

    model = _load(tmp_path, stablehlo_gather(True, implicit=True).data)
    x = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    rows = np.array([[0, 3, -2], [7, 1, 2]], np.int32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"in0": x, "in1": rows})[0]
    np.testing.assert_array_equal(got, x[np.clip(rows, 0, 3)])


def test_a_branch_whose_composite_assigns_a_variable_is_refused(tmp_path: Path) -> None:
    """Both branches are computed, so a variable assigned in one, even inside a composite it calls, would
    change unconditionally: refused."""
    def body(b: TFLiteBuilder, x: int, s: int) -> int:
        cond = op(b, "GREATER", [s, b.const("zero", np.zeros((1,), np.float32))], (1,), dtype="bool", name="cond")
        inner = b.subgraph()
        ix = inner.add_tensor("x", (2, 3))
        handle = op(inner, "VAR_HANDLE", [], (), {"shared_name": "v"}, "resource", "v")
        inner.add_op("ASSIGN_VARIABLE", [handle, ix], [])
        inner_out = op(inner, "TANH", [ix], (2, 3), name="t")
        decomposition = b.add_subgraph(inner, [ix], [inner_out], "decomposition")
        branch = b.subgraph()
        bx = branch.add_tensor("x", (2, 3))
        out = op(branch, "STABLEHLO_COMPOSITE", [bx], (2, 3), {
            "name": "n", "decomposition_subgraph_index": decomposition, "version": 1,
            "composite_attributes": bytes(flexbuffers.Dumps({}))}, name="out")
        index = b.add_subgraph(branch, [bx], [out], "branch")
        return op(b, "IF", [cond, x], (2, 3), {"then_subgraph_index": index, "else_subgraph_index": index})
    message = _refusal(tmp_path, build([(2, 3), (1,)], body).data)
    assert message.splitlines()[1] == ("  IF (tensor 'y'): then subgraph 2 uses resource variables (state changed "
                                       "inside a branch or loop)")


def test_tensorflow_s_while_loop_and_cond_match_litert(tmp_path: Path) -> None:
    """What TensorFlow's own converter writes for ``tf.while_loop`` and ``tf.cond`` (WHILE and IF over four
    subgraphs) converts and agrees with LiteRT on both branches."""
    tf = pytest.importorskip("tensorflow")
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32)])
    def looped(x: tf.Tensor) -> tf.Tensor:
        _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, tf.tanh(y) * 1.5 + y), [tf.constant(0), x])
        return tf.cond(tf.reduce_sum(x) > 0, lambda: y * 2.0, lambda: y - 1.0)

    data = tf.lite.TFLiteConverter.from_concrete_functions([looped.get_concrete_function()], looped).convert()
    model = _load(tmp_path, data)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    sums = []
    for seed in (0, 2):
        x = np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)
        interpreter = Interpreter(model_content=data)
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        want = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        np.testing.assert_allclose(session.run(None, {model.graph.input[0].name: x})[0], want, rtol=1e-5, atol=1e-5)
        sums.append(float(x.sum()) > 0)
    assert sums == [True, False]
