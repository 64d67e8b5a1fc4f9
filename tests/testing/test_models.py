"""Tests for the deterministic tiny-model builders in accelbuild.testing.models."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from accelbuild.testing import models

# builder name -> list of feed shapes (one dict per run)
RUN_SHAPES: dict[str, list[dict[str, tuple[int, ...]]]] = {
    "tinydet": [{"images": (1, 3, 320, 320)}, {"images": (2, 3, 256, 192)},
                {"images": (1, 3, 64, 64)}],
    "tinycls": [{"input": (1, 3, 32, 32)}],
    "nhwc": [{"input_1": (1, 32, 32, 3)}, {"input_1": (2, 17, 23, 3)}],
    "multi_input": [{"image": (1, 3, 16, 16), "meta": (1, 4)},
                    {"image": (3, 3, 16, 16), "meta": (3, 4)}],
    "mlp": [{"x": (1, 16)}],
}
EXPECTED_OUTPUTS: dict[str, tuple[str, ...]] = {
    "tinydet": ("output0",), "tinycls": ("probs",), "nhwc": ("out",),
    "multi_input": ("y",), "mlp": ("y",),
}


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _feeds(shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(123)
    return {name: rng.random(shape, dtype=np.float32) for name, shape in shapes.items()}


@pytest.fixture(scope="module", params=sorted(models.BUILDERS))
def built(request: pytest.FixtureRequest) -> tuple[str, onnx.ModelProto]:
    return request.param, models.BUILDERS[request.param]()


def test_builders_cover_expected_names() -> None:
    assert set(models.BUILDERS) == set(RUN_SHAPES)


def test_checker_and_metadata(built: tuple[str, onnx.ModelProto]) -> None:
    name, model = built
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == 8
    assert model.producer_name == "accelbuild-testing"
    assert all(node.name for node in model.graph.node)
    assert len({node.name for node in model.graph.node}) == len(model.graph.node)
    assert tuple(o.name for o in model.graph.output) == EXPECTED_OUTPUTS[name]
    assert model.ByteSize() < 300_000


def test_runs_in_onnxruntime(built: tuple[str, onnx.ModelProto]) -> None:
    name, model = built
    session = _session(model)
    for shapes in RUN_SHAPES[name]:
        outputs = session.run(None, _feeds(shapes))
        assert all(np.isfinite(o).all() for o in outputs)


@pytest.mark.parametrize("name", sorted(models.BUILDERS))
def test_deterministic_bytes(name: str) -> None:
    build = models.BUILDERS[name]
    first = build().SerializeToString(deterministic=True)
    assert build().SerializeToString(deterministic=True) == first


def test_seed_changes_weights() -> None:
    assert models.tiny_detector(seed=0).SerializeToString() != \
        models.tiny_detector(seed=1).SerializeToString()


@pytest.mark.parametrize("opset", [13, 14, 18])
def test_opset_variants(opset: int) -> None:
    for model in (models.tiny_detector(opset=opset), models.tiny_classifier(opset=opset)):
        onnx.checker.check_model(model, full_check=True)
        assert model.opset_import[0].version == opset
    cls = models.tiny_classifier(opset=opset)
    hard_op = "HardSwish" if opset >= 14 else "HardSigmoid"
    assert any(n.op_type == hard_op for n in cls.graph.node)
    probs = _session(cls).run(None, _feeds(RUN_SHAPES["tinycls"][0]))[0]
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)


def test_unsupported_opset_rejected() -> None:
    with pytest.raises(ValueError):
        models.tiny_detector(opset=12)


def test_small_model_shapes() -> None:
    out = _session(models.nhwc_input_model()).run(None, _feeds({"input_1": (2, 17, 23, 3)}))[0]
    assert out.shape == (2, 17, 23, 8)
    feeds = _feeds({"image": (3, 3, 16, 16), "meta": (3, 4)})
    assert _session(models.multi_input_model()).run(None, feeds)[0].shape == (3, 2)
    assert _session(models.static_mlp()).run(None, _feeds({"x": (1, 16)}))[0].shape == (1, 8)


# --------------------------------------------------------------- detector decode


def _with_head_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """Copy of the detector that also exposes the raw heads as outputs."""
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    for head in ("head.p3", "head.p4", "head.p5"):
        exposed.graph.output.append(onnx.helper.make_empty_tensor_value_info(head))
        exposed.graph.output[-1].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    return exposed


def _reference_decode(heads: list[np.ndarray], strides: tuple[int, ...]) -> np.ndarray:
    """NumPy version of the ultralytics decode (DFL + dist2bbox + sigmoid)."""
    batch = heads[0].shape[0]
    points, stride_list = [], []
    for head, stride in zip(heads, strides):
        h, w = head.shape[2:]
        ys, xs = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
        points.append(np.stack([xs.ravel(), ys.ravel()]))
        stride_list.append(np.full((1, h * w), stride))
    flat = np.concatenate([hd.reshape(batch, 19, -1) for hd in heads], axis=2)
    box, cls = flat[:, :16], flat[:, 16:]
    bins = box.reshape(batch, 4, 4, -1)
    prob = np.exp(bins - bins.max(axis=2, keepdims=True))
    prob /= prob.sum(axis=2, keepdims=True)
    dist = (prob * np.arange(4).reshape(1, 1, 4, 1)).sum(axis=2)
    anchors = np.concatenate(points, axis=1)
    x1y1, x2y2 = anchors - dist[:, :2], anchors + dist[:, 2:]
    xywh = np.concatenate([(x1y1 + x2y2) / 2, x2y2 - x1y1], axis=1)
    boxes = xywh * np.concatenate(stride_list, axis=1)
    return np.concatenate([boxes, 1 / (1 + np.exp(-cls))], axis=1)


@pytest.mark.parametrize("shape", [(1, 3, 320, 320), (2, 3, 256, 192)])
def test_detector_decode_matches_reference(shape: tuple[int, ...]) -> None:
    session = _session(_with_head_outputs(models.tiny_detector()))
    output0, p3, p4, p5 = session.run(None, _feeds({"images": shape}))
    batch, _, height, width = shape
    n = sum((height // s) * (width // s) for s in (8, 16, 32))
    assert output0.shape == (batch, 7, n)
    assert p3.shape == (batch, 19, height // 8, width // 8)
    assert p5.shape == (batch, 19, height // 32, width // 32)
    expected = _reference_decode([p3, p4, p5], (8, 16, 32))
    np.testing.assert_allclose(output0, expected, rtol=1e-4, atol=1e-3)
    assert ((output0[:, 4:] > 0) & (output0[:, 4:] < 1)).all()


def test_detector_output_shape_320() -> None:
    out = _session(models.tiny_detector()).run(None, _feeds({"images": (1, 3, 320, 320)}))[0]
    assert out.shape == (1, 7, 2100)
