"""auto_precision with a target: planted sensitivities, unreachable targets, the byte bound, and the
number of evaluations (one pass of sensitivities, then one per step)."""

from __future__ import annotations

import numpy as np
import pytest

from accelbuild.quantize import frames, measure
from accelbuild.quantize.auto_precision import Candidate, raise_to_target
from accelbuild.quantize.precision_measures import (
    qdq_candidates,
    qdq_cosine,
    weight_candidates,
    weight_cosine,
)
from accelbuild.quantize.qdq import QdqConfig, calibrate
from accelbuild.quantize.rewrite import quantize_layers, quantized_model
from accelbuild.quantize.weights import weighted_layers
from accelbuild.testing import models

# Planted per-layer output noise at 8 bits; 16 bits remove it. Output cosine = 1 - floor - sum(noise).
NOISE = {"a": 0.0004, "b": 0.006, "c": 0.0001, "d": 0.003, "e": 0.0002, "f": 0.0015}
BYTES = {"a": 100, "b": 4000, "c": 50, "d": 300, "e": 10, "f": 200}


class Planted:
    def __init__(self, floor: float = 0.0) -> None:
        self.floor, self.calls = floor, 0

    def __call__(self, bits: dict[str, int]) -> float:
        self.calls += 1
        return 1.0 - self.floor - sum(NOISE[name] for name, b in bits.items() if b == 8)


def candidates() -> list[Candidate]:
    return [Candidate(name, BYTES[name]) for name in NOISE]


def test_reaches_a_planted_target_raising_the_most_sensitive_first() -> None:
    measure = Planted()
    decision = raise_to_target(candidates(), measure, min_cosine=0.997)
    assert decision.reached and decision.cosine >= 0.997
    assert decision.record["order"] == ["b", "d", "f", "a", "e", "c"]
    assert decision.record["raised"] == ["b", "d"]  # 1 - 0.0022 after two raises
    assert decision.bits == {"a": 8, "b": 16, "c": 8, "d": 16, "e": 8, "f": 8}
    assert decision.extra_bytes == 4300 and decision.record["reason"] == "target reached"
    assert [s["cosine"] for s in decision.record["steps"]] == [pytest.approx(0.9948), pytest.approx(0.9978)]
    assert measure.calls == decision.record["evaluations"] == 1 + len(NOISE) + 2


def test_an_unreachable_target_is_reported_honestly() -> None:
    measure = Planted(floor=0.02)
    decision = raise_to_target(candidates(), measure, min_cosine=0.99)
    assert not decision.reached and decision.record["reached"] is False
    assert decision.record["reason"] == "every layer raised and the target is still not reached"
    assert decision.cosine == pytest.approx(0.98) and len(decision.record["raised"]) == len(NOISE)
    assert measure.calls == 1 + 2 * len(NOISE)


def test_held_out_frames_decide_when_to_stop_never_the_order() -> None:
    calibration, held_out = Planted(), Planted(floor=0.0015)  # held-out frames: noisier, same ranking
    decision = raise_to_target(candidates(), calibration, min_cosine=0.997, held_out_cosine_of=held_out)
    # calibration reaches 0.997 after b, d (0.9978), the held-out frames only after f too (0.9978 - 0.0015 +
    # 0.0015): raising goes on in the calibration order
    assert decision.record["order"] == ["b", "d", "f", "a", "e", "c"]
    assert decision.record["raised"] == ["b", "d", "f"] and decision.reached
    assert decision.record["held_out_cosine"] == pytest.approx(0.9978)
    assert decision.record["stops_on"] == "calibration and held-out frames"
    steps = decision.record["steps"]
    assert "held_out_cosine" not in steps[0] and steps[1]["held_out_cosine"] == pytest.approx(0.9963)
    assert held_out.calls == 2  # only from the step where the calibration frames reach the target


def test_a_target_missed_on_held_out_frames_is_not_reached() -> None:
    decision = raise_to_target(candidates(), Planted(), min_cosine=0.999,
                               held_out_cosine_of=Planted(floor=0.002))
    assert not decision.reached and len(decision.record["raised"]) == len(NOISE)
    assert decision.cosine == pytest.approx(1.0) and decision.record["held_out_cosine"] == pytest.approx(0.998)


def test_max_extra_bytes_binds() -> None:
    decision = raise_to_target(candidates(), Planted(), min_cosine=0.999, max_extra_bytes=1000)
    assert not decision.reached and decision.extra_bytes <= 1000
    assert "b" not in decision.record["raised"] and decision.bits["b"] == 8
    assert decision.record["reason"].startswith("max_extra_bytes binds: 1 layer(s) left unraised (b")
    assert {"layer": "b", "raised": False, "extra_bytes": 4000, "reason": "over max_extra_bytes"} \
        in decision.record["steps"]
    assert decision.record["raised"] == ["d", "f", "a", "e", "c"]  # smaller raises still fit


def test_nothing_to_do_costs_one_evaluation() -> None:
    measure = Planted()
    decision = raise_to_target(candidates(), measure, min_cosine=0.9)
    assert decision.reached and decision.record["raised"] == [] and measure.calls == 1


@pytest.mark.parametrize("layers", [8, 40])
def test_evaluations_grow_with_layers_plus_steps_not_their_product(layers: int) -> None:
    rng = np.random.default_rng(layers)
    noise = dict(zip([f"l{i}" for i in range(layers)], rng.uniform(0, 0.002, layers)))
    calls = []

    def cosine_of(bits: dict[str, int]) -> float:
        calls.append(1)
        return 1.0 - sum(noise[n] for n, b in bits.items() if b == 8)

    target = 1.0 - sum(noise.values()) / 3  # two thirds of the noise must go
    decision = raise_to_target([Candidate(n, 1) for n in noise], cosine_of, min_cosine=target)
    steps = len(decision.record["steps"])
    assert decision.reached and 0 < steps < layers
    assert len(calls) == 1 + layers + steps <= 2 * layers + 1


def test_weight_only_measure_on_a_real_graph() -> None:
    model = models.tiny_classifier()
    layers = weighted_layers(model)
    rng = np.random.default_rng(0)
    samples = [{"input": rng.random((1, 3, 32, 32), dtype=np.float32)} for _ in range(2)]
    cosine_of = weight_cosine(model, layers, samples)
    start = cosine_of({layer.name: 4 for layer in layers})
    target = 1.0 - (1.0 - start) / 4  # three quarters of the noise must go
    decision = raise_to_target(weight_candidates(layers, 4), cosine_of, min_cosine=target)
    assert decision.reached and 0 < len(decision.record["raised"]) < len(layers)
    assert decision.record["start_cosine"] == pytest.approx(start, abs=1e-6)


def test_qdq_measure_raises_weights_and_activations_together() -> None:
    model = models.static_mlp()  # x -> Gemm+Relu (fc1) -> MatMul+Add (fc2, bias fused) -> Sigmoid -> y
    rng = np.random.default_rng(1)
    samples = [{"x": rng.standard_normal((1, 16)).astype(np.float32)} for _ in range(16)]
    calibrated = calibrate(model, samples, QdqConfig(method="minmax"))  # measured on the same: no clipping
    cosine_of = qdq_cosine(calibrated, samples)
    candidates = {c.name: c for c in qdq_candidates(calibrated)}
    assert set(candidates) == {"fc1", "fc2.matmul", "sigmoid", "x"}  # x: the graph input
    assert candidates["fc1"].extra_bytes == 16 * 32 and candidates["sigmoid"].extra_bytes == 0
    start = cosine_of({name: 8 for name in candidates})
    target = 1.0 - (1.0 - start) / 10
    decision = raise_to_target(list(candidates.values()), cosine_of, min_cosine=target)
    assert decision.reached and decision.cosine > start
    assert decision.record["evaluations"] == 1 + len(candidates) + len(decision.record["steps"])


def test_weight_measure_is_the_written_models_headline() -> None:
    """The cosine auto_precision stops on is, to the last bit, the one quantize.json reports for the model
    written with its choice (constant weights: onnxruntime's NCHWc kernels round differently than for
    weights fed as inputs, and bfloat16 activations carry that to the output)."""
    model = models.tiny_detector(width=16)
    layers = weighted_layers(model)
    rng = np.random.default_rng(2)
    samples = [{"images": rng.random((1, 3, 64, 64), dtype=np.float32)} for _ in range(3)]
    cosine_of = weight_cosine(model, layers, samples)
    reference = measure.run_all(measure.session(model), samples)
    for bits in ({layer.name: 8 for layer in layers}, {layer.name: 16 if i % 3 else 8 for i, layer in enumerate(layers)}):
        written = quantized_model(model, quantize_layers(model, layers, bits))
        assert cosine_of(bits) == frames.worst_cosine(reference, measure.bf16_outputs(written, samples))
