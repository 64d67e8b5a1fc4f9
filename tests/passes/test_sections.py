"""Sections: the no-section form the crop stage writes where nothing is cut off, ``read_section``, and
sections of models whose If/Loop branches read weights and values from the graph around them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.errors import StageError
from accelbuild.frontends.onnx_model import save_onnx
from accelbuild.passes import sections
from accelbuild.testing import models


def _ai_section() -> onnx.ModelProto:
    """The tiny detector cut at its heads: an AI section with one input and three outputs."""
    model = onnx.shape_inference.infer_shapes(models.tiny_detector(), data_prop=True)
    cut = sections.cut(model, ["images"], ["head.p3", "head.p4", "head.p5"])
    assert set(cut) == {"ai", "post"}
    return cut["ai"].model


def test_no_section_form_is_a_valid_identity_model(tmp_path: Path) -> None:
    ai = _ai_section()
    for name, boundary, values in (("pre", "inputs", ai.graph.input), ("post", "outputs", ai.graph.output)):
        model = sections.no_section(name, ai, boundary)
        onnx.checker.check_model(model, full_check=True)
        assert not model.graph.node and [v.name for v in model.graph.output] == [v.name for v in values]
        assert {p.key: p.value for p in model.metadata_props} == {"accelbuild.section": "none"}
        assert f"no {name} section" in model.doc_string
        path = tmp_path / f"{name}.onnx"
        save_onnx(model, path)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        feeds = {i.name: rng.random([d if isinstance(d, int) else 1 for d in i.shape], dtype=np.float32)
                 for i in session.get_inputs()}
        for out, got in zip(session.get_outputs(), session.run(None, feeds)):
            np.testing.assert_array_equal(got, feeds[out.name])  # passes its tensors through unchanged
        assert sections.read_section(path) is None


def test_read_section_gives_a_real_section(tmp_path: Path) -> None:
    ai = _ai_section()
    save_onnx(ai, tmp_path / "ai.onnx")
    read = sections.read_section(tmp_path / "ai.onnx")
    assert read is not None and len(read.graph.node) == len(ai.graph.node)


def test_no_section_bytes_are_deterministic(tmp_path: Path) -> None:
    ai = _ai_section()
    save_onnx(sections.no_section("pre", ai, "inputs"), tmp_path / "a.onnx")
    save_onnx(sections.no_section("pre", _ai_section(), "inputs"), tmp_path / "b.onnx")
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


def _if_model() -> onnx.ModelProto:
    """pre: Relu -> AI: If(cond) whose branches Conv with outer weights ``w_then`` / ``w_else`` and add an
    outer value ``bias_src`` -> post: Sigmoid."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((3, 2, 1, 1)).astype(np.float32), "w_then"),
             numpy_helper.from_array(rng.standard_normal((3, 2, 1, 1)).astype(np.float32), "w_else"),
             numpy_helper.from_array(np.array(True), "cond"),
             numpy_helper.from_array(np.full((1, 3, 1, 1), 0.5, np.float32), "b")]

    def branch(weight: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"{weight}_out", TensorProto.FLOAT, [1, 3, 4, 4])
        nodes = [helper.make_node("Conv", ["pre_out", weight], [f"{weight}_conv"], name=f"{weight}_conv"),
                 helper.make_node("Add", [f"{weight}_conv", "bias_src"], [f"{weight}_out"], name=f"{weight}_add")]
        return helper.make_graph(nodes, f"{weight}_branch", [], [out])

    nodes = [helper.make_node("Relu", ["x"], ["pre_out"], name="pre_relu"),
             helper.make_node("Mul", ["b", "b"], ["bias_src"], name="bias_mul"),
             helper.make_node("If", ["cond"], ["ai_out"], name="if", then_branch=branch("w_then"),
                              else_branch=branch("w_else")),
             helper.make_node("Sigmoid", ["ai_out"], ["y"], name="post_sigmoid")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_an_if_branch_keeps_the_outer_weights_and_values_it_reads() -> None:
    model = _if_model()
    cut = sections.cut(model, ["pre_out"], ["ai_out"])
    ai = cut["ai"].model
    assert ai is not None
    assert {"w_then", "w_else", "cond", "b"} <= {t.name for t in ai.graph.initializer}
    assert "bias_mul" in cut["ai"].nodes  # the producer of a value only a branch reads belongs to the section
    onnx.checker.check_model(ai, full_check=True)
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 4)).astype(np.float32)
    pre = _run(cut["pre"].model, {"x": x})[0]
    (mid,) = _run(ai, {"pre_out": pre})
    (out,) = _run(cut["post"].model, {"ai_out": mid})
    np.testing.assert_allclose(out, _run(model, {"x": x})[0], rtol=1e-6)


def test_a_crop_point_without_an_inferred_type_is_a_clear_stage_error() -> None:
    """Where onnx's lenient inference left a tensor without type or shape, onnx's Extractor failed with "names
    were not found in value_infos" (an internal error in crop); the cut now says which point and why."""
    model = _if_model()
    kept = [v for v in model.graph.value_info if v.name != "pre_out"]
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept)
    with pytest.raises(StageError, match=r"cannot cut the pre section at 'pre_out': shape inference gave no type"):
        sections.cut(model, ["pre_out"], ["ai_out"])
