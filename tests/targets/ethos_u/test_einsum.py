"""einsum: Einsum of one or two operands as TRANSPOSE/RESHAPE/BATCH_MATMUL float operators, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

pytest.importorskip("ai_edge_litert")

from ethos_u_models import Net, _stem, feeds  # noqa: E402

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq  # noqa: E402
from accelbuild.targets.ethos_u.tflite import kernels, verify  # noqa: E402
from accelbuild.targets.ethos_u.tflite.verify import check  # noqa: E402
from accelbuild.targets.ethos_u.tflite.writer import UnsupportedOperatorsError, io_layout, write  # noqa: E402


def _heads(n: Net) -> tuple[str, str]:
    """Queries and keys, [1, 2, 64, 4] each (batch, heads, tokens, features), from the stem."""
    x = n.op("Reshape", [_stem(n), n.const("shape", [1, 2, 4, 64], np.int64)], "split_heads")
    q = n.op("Transpose", [x], "q", perm=[0, 1, 3, 2])
    return q, n.op("Relu", [q], "k")


@pytest.mark.parametrize(("equation", "shape"), [("bhid,bhjd->bhij", [1, 2, 64, 64]),  # Q.K^T
                                                 ("bhid,bhjd->bihj", [1, 64, 2, 64]),  # the output reordered
                                                 ("bhid,bhid->bhi", [1, 2, 64]),       # a dot product per row
                                                 ("bhid->bdhi", [1, 4, 2, 64])])       # one operand: a transpose
def test_einsum_matches_onnxruntime(equation: str, shape: list[int]) -> None:
    n = Net()
    q, k = _heads(n)
    model = n.model(n.op("Einsum", [q, k] if "," in equation else [q], "scores", equation=equation), shape)
    inputs = feeds()
    qdq = quantize_qdq(model, inputs, QdqConfig(conventions="tflite")).model
    data, written_float = write(qdq)
    assert [(e["node"], e["op"]) for e in written_float] == [("scores", "Einsum")]
    assert check(data, qdq, inputs).layers.max_steps <= 1  # the int8 tensors before it
    # the float output against numpy's einsum of the very codes LiteRT fed it
    interp = kernels.interpreter(data, preserve=True)
    out = verify.run_tflite(interp, inputs[0], io_layout(qdq), ["x"], ["scores"])[1]["scores"]
    by_name = {d["name"]: d for d in interp.get_tensor_details()}

    def real(name: str) -> np.ndarray:
        scale, zero = by_name[name]["quantization"]
        return (interp.get_tensor(by_name[name]["index"]).astype(np.float32) - zero) * np.float32(scale)

    expected = np.einsum(equation, *[real(name) for name in ([q, k] if "," in equation else [q])])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("equation", "why"), [("nchh->nch", "repeated letter"),
                                               ("...hw,...hw->...h", "ellipsis"),
                                               ("nchw,nc->nh", "summed within one operand")])
def test_einsum_without_a_batch_matmul_form_is_refused_naming_it(equation: str, why: str) -> None:
    node = helper.make_node("Einsum", ["x", "x"] if "," in equation and "nc->" not in equation else
                            ["x", "y"] if "," in equation else ["x"], ["scores"], name="scores", equation=equation)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8]),
                                            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedOperatorsError, match=f"Einsum \\(scores\\): .*{why}"):
        write(model)
