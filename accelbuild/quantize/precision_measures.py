"""Measurements for ``auto_precision.raise_to_target``: candidates and a cosine-of-a-bits-assignment
function, for the mx3 family (weights only, activations in bfloat16) and for QDQ models (npu, ethos-u:
weights and output activation of a layer together).

Both measure what the accuracy records' headline is (``frames``): the worst frame with signal against
the float model, without rounding (sensitivities are ranked on small differences).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from accelbuild.quantize import frames, measure
from accelbuild.quantize.auto_precision import Candidate
from accelbuild.quantize.qdq import Calibrated, build
from accelbuild.quantize.rewrite import QuantizedLayer, quantize_layers, quantized_model
from accelbuild.quantize.weights import WeightedLayer, weight_bytes
from accelbuild.util import onnx_graph as g

CosineOf = Callable[[dict[str, int]], float]


def cosine(reference: list[list[np.ndarray]], measured: list[list[np.ndarray]]) -> float:
    return frames.worst_cosine(reference, measured)


def weight_candidates(layers: list[WeightedLayer], default_bits: int) -> list[Candidate]:
    """Every weighted layer, raised from ``default_bits`` to 16 at the cost of its extra weight bytes."""
    return [Candidate(layer.name, weight_bytes(layer.count, 16) - weight_bytes(layer.count, default_bits),
                      default_bits, 16) for layer in layers]


def weight_cosine(model: onnx.ModelProto, layers: list[WeightedLayer],
                  samples: list[measure.Feeds]) -> CosineOf:
    """mx3: output cosine with the layers' weights at the given bits (others float), activations bf16.

    Each assignment is measured on the model the stage would write for it (``quantized_model``, constant
    weights), in the same kind of session as ``quantize.json``'s headline: onnxruntime picks other
    convolution kernels for constant weights (NCHWc) than for weights fed as inputs, and with bfloat16
    rounding after every layer the two differ by up to 1e-3 in cosine on a real detector, enough to call
    a target reached that the written model misses.
    """
    base = quantized_model(model, [])  # the opset conversion, once
    cache: dict[tuple[str, int], QuantizedLayer] = {}

    def layer_at(layer: WeightedLayer, bits: int) -> QuantizedLayer:
        if (layer.name, bits) not in cache:
            cache[(layer.name, bits)] = quantize_layers(model, [layer], {layer.name: bits})[0]
        return cache[(layer.name, bits)]

    reference = measure.run_all(measure.session(model), samples)

    def cosine_of(bits: dict[str, int]) -> float:
        chosen = [layer_at(layer, bits[layer.name]) for layer in layers if layer.name in bits]
        return cosine(reference, measure.bf16_outputs(quantized_model(base, chosen), samples))

    return cosine_of


def qdq_candidates(calibrated: Calibrated) -> list[Candidate]:
    """Layers of a QDQ plan that can be raised to 16 bits: every weighted layer (its weights and output
    activation; extra bytes = its extra weight bytes) and one producer (or graph input) per other
    quantized activation, without extra weight bytes. Tensors sharing one quantization are one candidate."""
    plan, low = calibrated.plan, calibrated.config.weight_bits
    producers = g.producers(calibrated.model.graph)
    found = [Candidate(wp.layer.name, weight_bytes(wp.layer.count, 16) - weight_bytes(wp.layer.count, low), low, 16)
             for wp in plan.weights]
    weighted = {c.name for c in found}
    for group in plan.groups.values():
        if group.layers & weighted:
            continue
        owners = [producers[t].name if t in producers else t for t in group.sources]
        if owners:
            found.append(Candidate(owners[0], 0, calibrated.config.activation_bits, 16))
    return [c for c in found if c.low < c.high]


def qdq_cosine(calibrated: Calibrated, samples: list[measure.Feeds]) -> CosineOf:
    """npu / ethos-u: output cosine of the QDQ model built with the given per-layer bits (no new
    calibration run; one session per assignment)."""
    reference = measure.run_all(measure.session(calibrated.model), samples)

    def cosine_of(bits: dict[str, int]) -> float:
        raised = {name: b for name, b in bits.items() if b == 16}  # a layer at its low bits keeps the defaults
        model = build(calibrated, {**calibrated.config.bits, **raised}).model
        return cosine(reference, measure.run_all(measure.session(model), samples))

    return cosine_of
