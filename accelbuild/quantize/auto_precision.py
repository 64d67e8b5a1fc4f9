"""Automatic mixed precision: find the layers whose quantization hurts the output most, raise them.

``raise_to_target`` (every family) raises layers until the output cosine reaches a target, given a
function that measures the cosine of a bits assignment (see ``precision_measures`` for the mx3 weight-only
and the QDQ measurements). ``choose_bits`` is the phase-1 rule of the mx3 family:

Sensitivity of a layer = the model output's SQNR when only that layer is quantized (at the default
precision) and every other layer keeps float weights, on the accuracy inputs, activations in
bfloat16. Layers are raised to 16 bits most-sensitive first; each step is kept only while the whole
model's output SQNR improves by at least ``MIN_GAIN_DB``, and the raised layers may add at most
``BUDGET_FRACTION`` of the default-precision weight bytes (so auto precision cannot double the chip
count). All runs share one onnxruntime session: weights are fed as inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx

from accelbuild.quantize import measure
from accelbuild.quantize.weights import (
    WeightedLayer,
    dequantize,
    quantize,
    weight_bytes,
)

MIN_GAIN_DB = 0.5
BUDGET_FRACTION = 0.5
MAX_STALLS = 2  # stop after this many raised layers in a row that did not help


@dataclass
class Decision:
    bits: dict[str, int]
    record: dict[str, object] = field(default_factory=dict)


def choose_bits(model: onnx.ModelProto, layers: list[WeightedLayer], default_bits: int,
                samples: list[measure.Feeds]) -> Decision:
    weights = {layer.name: _weight(model, layer) for layer in layers}
    float_feeds = {layer.weight: weights[layer.name] for layer in layers}
    dq = {(layer.name, bits): dequantize(*quantize(weights[layer.name], bits, layer.axis), layer.axis)
          for layer in layers for bits in {default_bits, 16}}
    probe = measure.with_bf16_activations(measure.weights_as_inputs(model, float_feeds))
    sess = measure.session(probe)
    reference = measure.run_all(measure.session(model), samples)

    def output_sqnr(bits_of: dict[str, int]) -> float:
        feeds = {layer.weight: dq[(layer.name, bits_of[layer.name])] if layer.name in bits_of
                 else float_feeds[layer.weight] for layer in layers}
        return float(measure.compare(reference, measure.run_all(sess, samples, feeds))["sqnr_db"])

    sensitivity = {layer.name: output_sqnr({layer.name: default_bits}) for layer in layers}
    bits = {layer.name: default_bits for layer in layers}
    base_bytes = sum(weight_bytes(layer.count, default_bits) for layer in layers)
    budget = int(base_bytes * BUDGET_FRACTION)
    current = output_sqnr(bits)
    steps, extra, stalls = [], 0, 0
    for layer in sorted(layers, key=lambda layer: (sensitivity[layer.name], layer.name)):
        if default_bits == 16 or stalls >= MAX_STALLS:
            break
        cost = weight_bytes(layer.count, 16) - weight_bytes(layer.count, default_bits)
        if extra + cost > budget:
            steps.append({"layer": layer.name, "kept": False, "reason": "over the weight-memory budget"})
            continue
        trial = dict(bits, **{layer.name: 16})
        gained = output_sqnr(trial) - current
        kept = gained >= MIN_GAIN_DB
        steps.append({"layer": layer.name, "gain_db": round(gained, 3), "kept": kept})
        if kept:
            bits, current, extra, stalls = trial, current + gained, extra + cost, 0
        else:
            stalls += 1
    return Decision(bits, {
        "min_gain_db": MIN_GAIN_DB,
        "budget_bytes": budget,
        "extra_bytes": extra,
        "output_sqnr_db": round(current, 3),
        "sensitivity_sqnr_db": {name: round(v, 3) for name, v in sorted(sensitivity.items())},
        "steps": steps,
        "raised": sorted(name for name, b in bits.items() if b == 16 and default_bits != 16),
    })


def _weight(model: onnx.ModelProto, layer: WeightedLayer) -> np.ndarray:
    from accelbuild.passes import graph as g

    value = g.constant(model.graph, layer.weight)
    assert value is not None
    return value


# --- auto precision with a target (every family) ------------------------------------------------------

DEFAULT_MIN_COSINE = 0.99  # what `auto_precision: true` aims for


@dataclass(frozen=True)
class Candidate:
    """A layer that can be raised from ``low`` to ``high`` bits, costing ``extra_bytes`` more memory."""

    name: str
    extra_bytes: int
    low: int = 8
    high: int = 16


@dataclass
class TargetDecision:
    bits: dict[str, int]
    reached: bool
    cosine: float
    extra_bytes: int
    record: dict[str, object] = field(default_factory=dict)


def raise_to_target(candidates: list[Candidate], cosine_of: Callable[[dict[str, int]], float],
                    min_cosine: float = DEFAULT_MIN_COSINE, max_extra_bytes: int | None = None) -> TargetDecision:
    """Raise the most sensitive layers until the output cosine reaches ``min_cosine``.

    ``cosine_of(bits)`` measures the model output's cosine against float for a bits assignment of every
    candidate. One evaluation of the starting point, one per layer for sensitivities (the cosine with
    only that layer at its low precision, every other raised: its own share of the output noise),
    then one per greedy step, most sensitive first: ``1 + layers + steps`` evaluations in all. A
    raise that does not fit ``max_extra_bytes`` is skipped (smaller ones may still fit). Stops when the
    target is reached or nothing is left; the record says which, and why a target was missed.
    """
    low = {c.name: c.low for c in candidates}
    evaluations = 0

    def measure(bits: dict[str, int]) -> float:
        nonlocal evaluations
        evaluations += 1
        return float(cosine_of(bits))

    bits = dict(low)
    current = measure(bits)
    record: dict[str, object] = {"min_cosine": min_cosine, "max_extra_bytes": max_extra_bytes,
                                 "start_cosine": round(current, 6)}
    if current >= min_cosine or not candidates:
        return _decision(bits, current, 0, record, evaluations, [], min_cosine,
                         "target reached" if current >= min_cosine else "nothing to raise")
    raised_all = {c.name: c.high for c in candidates}
    sensitivity = {c.name: measure({**raised_all, c.name: c.low}) for c in candidates}
    order = sorted(candidates, key=lambda c: (sensitivity[c.name], c.name))  # lowest cosine: most sensitive
    steps: list[dict[str, object]] = []
    extra, skipped = 0, []
    for c in order:
        if current >= min_cosine:
            break
        if max_extra_bytes is not None and extra + c.extra_bytes > max_extra_bytes:
            skipped.append(c.name)
            steps.append({"layer": c.name, "raised": False, "extra_bytes": c.extra_bytes,
                          "reason": "over max_extra_bytes"})
            continue
        bits[c.name] = c.high
        extra += c.extra_bytes
        current = measure(bits)
        steps.append({"layer": c.name, "raised": True, "bits": c.high, "extra_bytes": c.extra_bytes,
                      "total_extra_bytes": extra, "cosine": round(current, 6)})
    record["sensitivity_cosine"] = {name: round(v, 6) for name, v in sorted(sensitivity.items())}
    record["order"] = [c.name for c in order]
    if current >= min_cosine:
        reason = "target reached"
    elif skipped:
        reason = f"max_extra_bytes binds: {len(skipped)} layer(s) left unraised ({', '.join(skipped[:5])}" \
                 f"{', ...' if len(skipped) > 5 else ''})"
    else:
        reason = "every layer raised and the target is still not reached"
    return _decision(bits, current, extra, record, evaluations, steps, min_cosine, reason)


def _decision(bits: dict[str, int], cosine: float, extra: int, record: dict[str, object], evaluations: int,
              steps: list[dict[str, object]], min_cosine: float, reason: str) -> TargetDecision:
    reached = cosine >= min_cosine
    record.update({"steps": steps, "raised": [s["layer"] for s in steps if s["raised"]], "reached": reached,
                   "reason": reason, "cosine": round(cosine, 6), "extra_bytes": extra, "evaluations": evaluations})
    return TargetDecision(bits, reached, cosine, extra, record)
