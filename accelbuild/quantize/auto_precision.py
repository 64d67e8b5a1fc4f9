"""Automatic mixed precision: find the layers whose weights are sensitive, raise them to 16 bits.

Sensitivity of a layer = the model output's SQNR when only that layer is quantized (at the default
precision) and every other layer keeps float weights, on the accuracy inputs, activations in
bfloat16. Layers are raised to 16 bits most-sensitive first; each step is kept only while the whole
model's output SQNR improves by at least ``MIN_GAIN_DB``, and the raised layers may add at most
``BUDGET_FRACTION`` of the default-precision weight bytes (so auto precision cannot double the chip
count). All runs share one onnxruntime session: weights are fed as inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx

from accelbuild.quantize import measure
from accelbuild.quantize.weights import WeightedLayer, dequantize, quantize, weight_bytes

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
    for layer in sorted(layers, key=lambda l: (sensitivity[l.name], l.name)):
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
