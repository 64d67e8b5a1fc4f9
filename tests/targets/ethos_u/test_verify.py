"""verify: the writer's check runs int8.tflite in LiteRT's reference kernels, once per frame."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from ethos_u_models import Net, _stem, feeds  # noqa: E402

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq  # noqa: E402
from accelbuild.targets.ethos_u.tflite import verify  # noqa: E402
from accelbuild.targets.ethos_u.tflite.writer import write_int8_tflite  # noqa: E402


def _float_model() -> object:
    n = Net()
    return n.model(n.op("ReduceMean", [_stem(n)], "mean", axes=[2, 3], keepdims=1), [1, 8, 1, 1])


def _mean_model() -> tuple[bytes, object, list]:
    inputs = feeds(count=16)
    q = quantize_qdq(_float_model(), inputs, QdqConfig(conventions="tflite", activation_bits=8))
    return write_int8_tflite(q.model), q.model, inputs


def _outputs(interp: object, qdq: object, inputs: list) -> np.ndarray:
    names = [v.name for v in qdq.graph.output]  # type: ignore[attr-defined]
    return np.stack([verify.run_tflite(interp, f, {"x": True}, ["x"], names)[1][names[0]] for f in inputs])


def test_check_runs_the_reference_kernels_tflite_micro_ports() -> None:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    data, qdq, inputs = _mean_model()

    def explicit(kernels: OpResolverType) -> object:
        interp = Interpreter(model_content=data, experimental_op_resolver_type=kernels)
        interp.allocate_tensors()
        return interp

    used = _outputs(verify.interpreter(data), qdq, inputs)
    reference = _outputs(explicit(OpResolverType.BUILTIN_REF), qdq, inputs)
    optimized = _outputs(explicit(OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES), qdq, inputs)
    np.testing.assert_array_equal(used, reference)
    assert not np.array_equal(reference, optimized)  # the two kernel sets round this MEAN differently


def test_check_measures_each_operator_and_the_outputs_in_one_pass() -> None:
    data, qdq, inputs = _mean_model()
    checked = verify.check(data, qdq, inputs, verify.reference_session(_float_model()))
    assert checked.layers.frames == checked.outputs.frames == len(inputs)
    assert checked.layers.max_steps <= 1 and checked.layers.tensors == 2
    assert set(checked.layers.differing) == {"Conv", "ReduceMean"}
    assert all(0 <= share < 0.5 for share in checked.layers.differing.values())
    assert len(checked.reference) == len(checked.lite) == len(inputs)
    for float_out, lite_out in zip(checked.reference, checked.lite):
        assert float_out[0].shape == lite_out[0].shape == (1, 8, 1, 1)
        np.testing.assert_allclose(lite_out[0], float_out[0], atol=0.1)  # int8 means of a small range
    assert verify.check(data, qdq, inputs[:2]).reference == []  # without the float model: no outputs kept


def test_a_scalar_input_is_fed_and_compared_as_an_array() -> None:
    """y = x * gain with gain of rank 0: its codes were a numpy scalar, which onnxruntime refused."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Mul", ["x", "gain"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8]),
                               helper.make_tensor_value_info("gain", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(0)
    inputs = [{"x": rng.random((1, 8), dtype=np.float32), "gain": np.array(1.0, np.float32)} for _ in range(4)]
    q = quantize_qdq(model, inputs, QdqConfig(conventions="tflite", activation_bits=8))
    checked = verify.check(write_int8_tflite(q.model), q.model, inputs, verify.reference_session(model))
    assert checked.outputs.frames == 4 and checked.lite[0][0].shape == (1, 8)
    np.testing.assert_allclose(checked.lite[0][0], checked.reference[0][0], atol=0.02)
