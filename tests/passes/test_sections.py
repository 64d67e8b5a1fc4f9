"""Sections: the no-section form the crop stage writes where nothing is cut off, and ``read_section``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

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
