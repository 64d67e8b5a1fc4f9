"""The canonical ORT format: onnxruntime's own serializations of one model differ in bytes, their canonical
forms do not, and the canonical model runs like onnxruntime's."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from accelbuild.targets.cpu import ort_format, ort_schema
from accelbuild.targets.cpu.assemble_stage import optimize
from accelbuild.targets.cpu.session import choose

from conftest import EXAMPLE_MODELS


def test_sessions_differ_in_bytes_but_not_in_canonical_form() -> None:
    model = (EXAMPLE_MODELS / "tinycls.onnx").read_bytes()
    config = choose("float", 1, "extended", ort.__version__)
    raw = [optimize(model, config) for _ in range(4)]
    canonical = {ort_format.canonical(r) for r in raw}
    assert len(canonical) == 1
    data = canonical.pop()
    assert ort_format.canonical(data) == data  # a fixed point
    feed = {"input": np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)}
    want = ort.InferenceSession(raw[0], providers=["CPUExecutionProvider"]).run(None, feed)
    got = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feed)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_schema_comes_from_onnxruntime_bindings() -> None:
    node = {f.name: f for f in ort_schema.table("Node")}
    assert node["Inputs"].kind == "vector" and node["Inputs"].element == "string"
    assert ort_schema.table("Tensor")[-1].default == -1  # ExternalDataOffset
    assert ort_schema.struct("EdgeEnd") == ort_schema.Struct(size=12, alignment=4)


def test_not_an_ort_model_is_refused() -> None:
    with pytest.raises(ort_schema.SchemaError, match="not an ORT format model"):
        ort_format.canonical((EXAMPLE_MODELS / "tinycls.onnx").read_bytes())
