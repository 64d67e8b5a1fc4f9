"""A TFLite model whose input is dynamic stores placeholder shapes; import converts it at the pipeline's
``input_shapes`` (openWakeWord's mel front end: stored [1, 1], run at [1, 1760]). Also BATCH_MATMUL."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from ai_edge_litert.interpreter import Interpreter

from accelbuild.testing.tflite_models import TFLiteBuilder

from conftest import run_cli, write


def _framed_projection(adj_y: bool) -> bytes:
    """``audio`` [1, n] (stored [1, 1], signature [-1, -1]) -> RESHAPE [1, -1, 4] -> BATCH_MATMUL with a
    constant [4, 3] (stored [3, 4] with ``adj_y``) -> ``features`` [1, n / 4, 3]; the intermediate shapes
    are stored at the placeholder, as TensorFlow's converter writes them."""
    b = TFLiteBuilder(0)
    x = b.add_tensor("audio", (1, 1), shape_signature=(-1, -1))
    frames = b.add_tensor("frames", (1, 1, 4))
    b.add_op("RESHAPE", [x, b.const("frames/shape", np.array([1, -1, 4], np.int32), "int32")], [frames],
             {"new_shape": [1, -1, 4]})
    weights = np.random.default_rng(1).standard_normal((3, 4) if adj_y else (4, 3)).astype(np.float32)
    y = b.add_tensor("features", (1, 1, 3))
    b.add_op("BATCH_MATMUL", [frames, b.const("projection", weights)], [y], {"adj_x": False, "adj_y": adj_y})
    return b.finish([x], [y])


def _litert(data: bytes, x: np.ndarray) -> np.ndarray:
    interp = Interpreter(model_content=data)
    index = interp.get_input_details()[0]["index"]
    interp.resize_tensor_input(index, list(x.shape))
    interp.allocate_tensors()
    interp.set_tensor(index, x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def _pipeline(folder: Path, shapes: str) -> None:
    write(folder / "p.yaml", "accelbuild: 1\nname: p\ntarget: {family: mx3}\nbenchmark: {frames: 10}\n"
                             f"models:\n  - name: m\n    path: m.tflite\n{shapes}")


def test_a_dynamic_input_is_converted_at_the_given_shape(tmp_path: Path) -> None:
    for adj_y in (False, True):
        data = _framed_projection(adj_y)
        (tmp_path / "m.tflite").write_bytes(data)
        _pipeline(tmp_path, "    input_shapes: {audio: [32]}\n")
        result = run_cli("run", "p.yaml", cwd=tmp_path)
        assert result.code == 0, result.stderr
        record = json.loads((tmp_path / "build/p/m/import.json").read_text())
        assert record["inputs"][0]["shape"] == [1, 32] and record["outputs"][0]["shape"] == [1, 8, 3]
        x = np.random.default_rng(2).standard_normal((1, 32)).astype(np.float32)
        session = ort.InferenceSession(str(tmp_path / "build/p/m/imported.onnx"), providers=["CPUExecutionProvider"])
        got = session.run(None, {"audio": x})[0]
        np.testing.assert_allclose(got, _litert(data, x), rtol=1e-5, atol=1e-5)


def test_without_input_shapes_the_placeholder_is_refused_with_the_operator(tmp_path: Path) -> None:
    """At the stored [1, 1] the RESHAPE cannot make rows of 4: a positioned exit 2, not a crash."""
    (tmp_path / "m.tflite").write_bytes(_framed_projection(False))
    _pipeline(tmp_path, "")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 2, result.stderr
    assert "p.yaml:7:11: m.tflite:" in result.stderr and "RESHAPE" in result.stderr
    assert "Traceback" not in result.stderr


def _placeholder_conv(frames: int) -> bytes:
    """``frames`` [1, t, 12, 3] (signature [1, -1, 12, 3], stored at t = ``frames``) -> CONV_2D 3x3 VALID ->
    MEAN over H and W. The convolution's output is stored at the placeholder [1, 1, 10, 4] (signature
    [1, -1, 10, 4]), as TensorFlow's converter writes a dynamic tensor, whatever the stored input gives."""
    b = TFLiteBuilder(0)
    x = b.add_tensor("frames", (1, frames, 12, 3), shape_signature=(1, -1, 12, 3))
    rng = np.random.default_rng(3)
    conv = b.add_tensor("conv", (1, 1, 10, 4), shape_signature=(1, -1, 10, 4))
    b.add_op("CONV_2D", [x, b.const("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
                         b.const("b", np.zeros(4, np.float32))], [conv],
             {"padding": "VALID", "stride_h": 1, "stride_w": 1})
    y = b.add_tensor("pooled", (1, 1, 1, 4))
    b.add_op("MEAN", [conv, b.const("axes", np.array([1, 2], np.int32), "int32")], [y], {"keep_dims": True})
    return b.finish([x], [y])


def test_placeholder_shapes_are_recomputed_by_litert_at_the_stored_input(tmp_path: Path) -> None:
    """No input_shapes: the stored input [1, 8, 12, 3] is real, the convolution's stored [1, 1, 10, 4] is a
    placeholder; LiteRT's [1, 6, 10, 4] is used, and the result matches LiteRT."""
    from accelbuild.errors import InputFileError
    from accelbuild.frontends.tflite import load_tflite
    from accelbuild.frontends.tflite.convert import convert
    from accelbuild.frontends.tflite.reader import read_model

    data = _placeholder_conv(8)
    (tmp_path / "m.tflite").write_bytes(data)
    with pytest.raises(InputFileError, match=r"output shape \[1, 1, 10, 4\] should be \[1, 6, 10, 4\]"):
        convert(read_model(tmp_path / "m.tflite"))  # the file's own shapes
    model = load_tflite(tmp_path / "m.tflite")
    x = np.random.default_rng(4).standard_normal((1, 8, 12, 3)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"frames": x})[0], _litert(data, x), rtol=1e-5, atol=1e-5)


def test_a_placeholder_input_litert_cannot_run_asks_for_input_shapes(tmp_path: Path) -> None:
    """Stored at t = 1, the 3x3 VALID convolution has no output row: the error names the dynamic input and
    the YAML key that sets its shape (exit 2, no traceback)."""
    (tmp_path / "m.tflite").write_bytes(_placeholder_conv(1))
    _pipeline(tmp_path, "")
    result = run_cli("run", "p.yaml", "--until", "import", cwd=tmp_path)
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert "CONV_2D (tensor 'conv')" in result.stderr
    assert "'frames' (signature [1, -1, 12, 3], stored [1, 1, 12, 3])" in result.stderr
    assert "input_shapes" in result.stderr


def _loop_over_a_dynamic_input() -> bytes:
    """WHILE i < 2: x = tanh(x) + x, over ``x`` stored [1, 1] (signature [1, -1]); the loop body's tensors are
    stored at the placeholder too."""
    b = TFLiteBuilder(0)
    x = b.add_tensor("x", (1, 1), shape_signature=(1, -1))
    cond = b.subgraph()
    ci, cx = cond.add_tensor("i", (), "int32"), cond.add_tensor("x", (1, 1), shape_signature=(1, -1))
    more = cond.add_tensor("more", (), "bool")
    cond.add_op("LESS", [ci, cond.const("n", np.int32(2), "int32")], [more])
    body = b.subgraph()
    bi, bx = body.add_tensor("i", (), "int32"), body.add_tensor("x", (1, 1), shape_signature=(1, -1))
    ni, t, nx = body.add_tensor("next_i", (), "int32"), body.add_tensor("t", (1, 1)), body.add_tensor("next_x", (1, 1))
    body.add_op("ADD", [bi, body.const("one", np.int32(1), "int32")], [ni], {})
    body.add_op("TANH", [bx], [t])
    body.add_op("ADD", [t, bx], [nx], {})
    options = {"cond_subgraph_index": b.add_subgraph(cond, [ci, cx], [more], "cond"),
               "body_subgraph_index": b.add_subgraph(body, [bi, bx], [ni, nx], "body")}
    count, y = b.add_tensor("count", (), "int32"), b.add_tensor("y", (1, 1), shape_signature=(1, -1))
    b.add_op("WHILE", [b.const("start", np.int32(0), "int32"), x], [count, y], options)
    return b.finish([x], [y])


def test_the_shapes_of_a_loop_body_are_recomputed_too(tmp_path: Path) -> None:
    """LiteRT's shapes at the given input replace the placeholders in the subgraphs WHILE calls as well."""
    from accelbuild.frontends.tflite import load_tflite

    data = _loop_over_a_dynamic_input()
    (tmp_path / "m.tflite").write_bytes(data)
    model = load_tflite(tmp_path / "m.tflite", {"x": [6]})
    x = np.random.default_rng(3).standard_normal((1, 6)).astype(np.float32)
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, _litert(data, x), rtol=1e-5, atol=1e-6)
