"""The quantize stage for families that quantize activations (npu, ethos-u): QDQ model, calibration
record, held-out accuracy, host nodes left float, precision errors, auto_precision with a target.

A small family of this module (registered for the test) stands in for npu / ethos-u, so the stage is
tested on its own; the families' own tests run it through the CLI."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from accelbuild import families
from accelbuild.config.spec import AutoPrecision
from accelbuild.config.yaml_source import parse_yaml
from accelbuild.errors import ConfigError
from accelbuild.passes import sections
from accelbuild.stages import quantize
from accelbuild.stages.context import Locator, StageContext
from accelbuild.stages.params import AccuracyInputs, ActivationParams, PrecisionRules, QuantizeParams
from accelbuild.testing.models import tiny_classifier

FAMILY = "integer-test"
HOST: frozenset[str] = frozenset()


class _IntegerTarget:
    family = FAMILY

    def quantize_record(self, ai: onnx.ModelProto, params: Any) -> dict[str, Any]:
        return {"family_field": params}

    def host_nodes(self, ai: onnx.ModelProto, params: Any) -> frozenset[str]:
        return HOST


TARGET = _IntegerTarget()
YAML = parse_yaml("models:\n  - quantize: {activation_bits: 16, bits: {nope: 16}}\n", "p.yaml")


@pytest.fixture(autouse=True)
def _family(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(families.registered(), FAMILY, families.Family(FAMILY, __name__, None))


def _params(**changes: Any) -> QuantizeParams:
    params = QuantizeParams(
        model="cls", family=FAMILY, weight_bits=8, bits={}, bits_file=None, auto_precision=None,
        accuracy=AccuracyInputs(None, 20, 0), data=None,
        precision=PrecisionRules((8, 16), "integer", (8, 16), symmetric=False, share_concat_scales=True),
        activations=ActivationParams(8, "percentile", 16), target="t")
    return replace(params, **changes)


def _logits_model() -> onnx.ModelProto:
    """tiny_classifier without its Softmax: probabilities of a random network are nearly uniform, so
    their cosine would say little about quantization error."""
    model = tiny_classifier()
    softmax = next(n for n in model.graph.node if n.op_type == "Softmax")
    model.graph.node.remove(softmax)
    model.graph.output[0].name = softmax.input[0]
    return model


def _run(tmp_path: Path, params: QuantizeParams) -> dict[str, Any]:
    ai, pre = tmp_path / "ai.onnx", tmp_path / "pre.onnx"
    model = _logits_model()
    onnx.save(model, str(ai))
    onnx.save(sections.no_section("pre", model, "inputs"), str(pre))  # as the crop stage writes it
    outputs = {name: tmp_path / name for name in ("quantized.onnx", "quantize.json", "calibration.json")}
    quantize.run(StageContext(params, {"ai": ai, "pre": pre}, outputs, Locator(YAML, ("models", 0))))
    return {name: json.loads(path.read_text()) for name, path in outputs.items() if name.endswith(".json")}


def test_writes_a_qdq_model_onnxruntime_runs_and_its_records(tmp_path: Path) -> None:
    records = _run(tmp_path, _params())
    model = onnx.load(str(tmp_path / "quantized.onnx"))
    ops = {n.op_type for n in model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    out = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"input": np.zeros((1, 3, 32, 32), np.float32)})[0]
    assert out.shape == (1, 10)
    calibration = records["calibration.json"]
    assert calibration["method"] == "percentile" and calibration["frames"] == 16
    tensor = calibration["tensors"]["input"]
    assert {"range", "scale", "zero_point", "bits"} <= set(tensor) and tensor["bits"] == 8
    q = records["quantize.json"]
    assert q["activation_bits"] == 8 and q["activations"] == "integer"
    assert q["output"]["measured_on"] == "held-out" and q["output"]["samples"] == 4  # 20 inputs - 16
    assert q["output"]["cosine"] > 0.99
    assert q["calibration"]["samples"] == 16 and q["family_field"] == "t"
    assert q["weight_bytes"] == sum(layer["weight_bytes"] for layer in q["layers"])


def test_too_few_inputs_measure_on_the_calibration_frames_and_say_so(tmp_path: Path) -> None:
    q = _run(tmp_path, _params(activations=ActivationParams(8, "minmax", 32)))["quantize.json"]
    assert q["output"]["measured_on"] == "calibration" and q["output"]["samples"] == 20


def test_host_nodes_stay_float(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "HOST", frozenset({"pw.conv"}))
    records = _run(tmp_path, _params())
    assert records["quantize.json"]["host_nodes"] == ["pw.conv"]
    assert "pw.conv" not in {layer["name"] for layer in records["quantize.json"]["layers"]}
    model = onnx.load(str(tmp_path / "quantized.onnx"))
    conv = next(n for n in model.graph.node if n.name == "pw.conv")
    weight = next(t for t in model.graph.initializer if t.name == conv.input[1])
    assert weight.data_type == onnx.TensorProto.FLOAT


def test_per_layer_bits_set_weights_and_output_activation(tmp_path: Path) -> None:
    records = _run(tmp_path, _params(bits={"pw.conv": 16}))
    layers = {layer["name"]: layer["bits"] for layer in records["quantize.json"]["layers"]}
    assert layers["pw.conv"] == 16 and layers["stem.conv"] == 8
    sixteen = [t for t, r in records["calibration.json"]["tensors"].items() if r["bits"] == 16]
    assert sixteen  # the layer's output activation


def test_weights_and_activations_set_apart_on_a_family_that_allows_it(tmp_path: Path) -> None:
    """npu's form {weights, activations} (TIDL's 16-bit layer lists, Horizon's int16 nodes): each part
    alone, recorded per layer in quantize.json."""
    split = replace(_params().precision, split_layer_bits=True)
    records = _run(tmp_path, _params(precision=split, bits={"pw.conv": {"weights": 16},
                                                            "stem.conv": {"activations": 16}}))
    layers = {layer["name"]: (layer["bits"], layer["activation_bits"]) for layer in records["quantize.json"]["layers"]}
    assert layers["pw.conv"] == (16, 8) and layers["stem.conv"] == (8, 16)
    weights = {t.name: t.data_type for t in onnx.load(str(tmp_path / "quantized.onnx")).graph.initializer}
    assert weights["pw.conv/weight_quantized"] == onnx.TensorProto.INT16
    assert weights["stem.conv/weight_quantized"] == onnx.TensorProto.INT8


def test_split_bits_on_a_family_without_them_are_a_positioned_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not separate weights/activations bits"):
        _run(tmp_path, _params(bits={"nope": {"weights": 16}}))


def test_unknown_layer_and_unsupported_activation_bits_are_positioned(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no layer named 'nope' in model 'cls'") as exc:
        _run(tmp_path, _params(bits={"nope": 16}))
    assert str(exc.value).startswith("p.yaml:2:")
    rules = PrecisionRules((8, 16), "integer", (8,))
    with pytest.raises(ConfigError, match="16-bit activations are not computed by this target"):
        _run(tmp_path, _params(precision=rules, activations=ActivationParams(16, "minmax", 16)))


def test_auto_precision_reaches_a_target_and_reports_an_unreachable_one(tmp_path: Path) -> None:
    base_cosine = _run(tmp_path, _params())["quantize.json"]["output"]["cosine"]
    goal = min(0.99999, 1 - (1 - base_cosine) / 4)  # a quarter of the error
    q = _run(tmp_path, _params(auto_precision=AutoPrecision(goal, None)))["quantize.json"]
    record = q["auto_precision"]
    assert record["reached"] and record["raised"] and record["cosine"] >= goal
    assert q["output"]["cosine"] >= goal - 1e-6  # the shipped model measures what the search measured
    q = _run(tmp_path, _params(auto_precision=AutoPrecision(0.999999999, max_extra_bytes=0)))["quantize.json"]
    record = q["auto_precision"]
    assert not record["reached"] and "max_extra_bytes binds" in record["reason"]
