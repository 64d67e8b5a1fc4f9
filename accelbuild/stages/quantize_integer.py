"""The quantize stage for families that quantize activations too (``PrecisionRules.integer``).

Post-training static quantization (``accelbuild.quantize.qdq``): activation ranges are calibrated on the
first ``calibration_frames`` inputs; the remaining inputs measure the output's accuracy against float
(when there are none left, the calibration inputs do, and the record says so). Layers the target will
run on the host (``Target.host_nodes``) stay float in ``quantized.onnx``. Outputs: ``quantized.onnx``
(QDQ; onnxruntime runs it as it is), ``calibration.json`` (per tensor: range, scale, zero point, bits;
the method and frames used) and ``quantize.json``.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import onnx

from accelbuild import accuracy
from accelbuild.families import get_target
from accelbuild.frontends.onnx_model import save_onnx
from accelbuild.quantize import auto_precision, frames, measure, precision_measures, qdq
from accelbuild.stages.context import StageContext
from accelbuild.stages.params import QuantizeParams
from accelbuild.util import onnx_graph as g
from accelbuild.util.files import write_json_atomic

log = logging.getLogger(__name__)


def split_frames(samples: list[measure.Feeds], calibration_frames: int) -> tuple[list[measure.Feeds],
                                                                               list[measure.Feeds]]:
    """Calibration inputs, and the inputs the headline accuracy is measured on: the held-out ones, or the
    calibration inputs when there are none beyond them (the record's ``measured_on`` says which)."""
    calibration = samples[:calibration_frames]
    return calibration, samples[calibration_frames:] or calibration


def quantize(ctx: StageContext, ai: onnx.ModelProto, samples: list[measure.Feeds], bits: dict[str, qdq.Bits | dict],
             names: list[str], random: bool, reference: list[list[np.ndarray]]) -> None:
    """Calibrate, choose per-layer precisions (``bits`` given, or auto_precision), write the outputs.
    ``names``: each sample's file (``random #i`` when ``random``); ``reference``: the float model's outputs
    on every sample."""
    q: QuantizeParams = ctx.params
    assert q.activations is not None  # the quantize stage sends only integer families here
    target = get_target(q.family)
    host = frozenset(target.host_nodes(ai, q.target))
    calibration, measured_on = split_frames(samples, q.activations.calibration_frames)
    bits = {name: qdq.LayerBits(b.get("weights"), b.get("activations")) if isinstance(b, dict) else b
            for name, b in bits.items()}
    config = qdq.QdqConfig(weight_bits=q.weight_bits, activation_bits=q.activations.bits,
                           symmetric=q.precision.symmetric, method=q.activations.calibration,
                           share_concat_scales=q.precision.share_concat_scales, bits=bits, float_nodes=host,
                           conventions=q.precision.conventions)
    calibrated = qdq.calibrate(ai, calibration, config)
    auto_record = None
    if q.auto_precision is not None and q.precision.whole_model_bits:
        calibrated, auto_record = _whole_model_choice(ai, calibration, calibrated, q)
        config = calibrated.config
    elif q.auto_precision is not None:
        goal = q.auto_precision
        candidates = precision_measures.qdq_candidates(calibrated)
        # ranked on the calibration frames; the target applies to the headline, so when there are held-out
        # frames it must hold on them too (they decide when to stop, never the order or the scales)
        held_out = precision_measures.qdq_cosine(calibrated, measured_on) if measured_on is not calibration else None
        decision = auto_precision.raise_to_target(candidates, precision_measures.qdq_cosine(calibrated, calibration),
                                                  goal.min_cosine, goal.max_extra_bytes, held_out)
        # only the raised layers: naming a layer at its low bits would also set its output activation
        bits = {**bits, **{name: b for name, b in decision.bits.items() if b == 16}}
        auto_record = {**decision.record, "ranked_on": "calibration"}
        log.info("%s: auto precision raised %d layer(s) to 16 bits; cosine %.5f (%s)", q.model,
                 len(decision.record["raised"]), decision.cosine,
                 "target reached" if decision.reached else "target not reached")
    result = qdq.build(calibrated, bits)
    for layer in result.layers:
        if layer["raised_for_bias"]:
            log.warning("%s: %s: raised the weight scale of %d channel(s) so the int32 bias fits", q.model,
                        layer["name"], layer["raised_for_bias"])
    save_onnx(result.model, ctx.outputs["quantized.onnx"])
    measured = measure.run_all(measure.session(result.model), samples)
    labels = frames.labelled(names, len(calibration), random)
    settings = {"method": q.activations.calibration, "activation_bits": config.activation_bits,
                "symmetric": q.precision.symmetric, "frames": len(calibration)}
    write_json_atomic(ctx.outputs["calibration.json"], {**settings, **result.calibration_record()})
    output = {**accuracy.describe_inputs(q.accuracy, q.data, len(measured_on)),
              **frames.record(reference, measured, labels, [o.name for o in ai.graph.output])}
    goal = q.auto_precision
    if auto_record is not None and goal is not None and output["measured_on"] == "held-out" \
            and output["cosine"] < goal.min_cosine:
        if auto_record["reached"]:  # chosen on the calibration frames only (the whole-model choice)
            auto_record.update({"held_out_cosine": output["cosine"], "reached_on_calibration": True, "reached": False})
        log.warning("%s: auto_precision: cosine %.5f (%s), below min_cosine %g (%s)", q.model, output["cosine"],
                    frames.said(output), goal.min_cosine,
                    auto_record.get("reason", "chosen on the calibration frames"))
    write_json_atomic(ctx.outputs["quantize.json"], {
        "weight_bits": q.weight_bits,
        "activation_bits": config.activation_bits,
        "calibration": {**settings, **accuracy.describe_inputs(q.accuracy, q.data, len(calibration))},
        "weights": sum(r["weights"] for r in result.layers),
        "weight_bytes": sum(r["weight_bytes"] for r in result.layers),
        "layers": result.layers,
        "activations": "integer",
        "host_nodes": sorted(host),
        "output": output,
        "auto_precision": auto_record,
        **target.quantize_record(ai, q.target),
    })


def _whole_model_choice(ai: onnx.ModelProto, calibration: list[measure.Feeds], eight: qdq.Calibrated,
                        q: QuantizeParams) -> tuple[qdq.Calibrated, dict]:
    """``PrecisionRules.whole_model_bits``: int8 when it reaches ``min_cosine`` on the worst calibration frame with signal, else int16x8
    when that does better (16-bit activations, 8-bit weights: slower on the NPU, TFLite's int16x8 kernels).
    Chosen on the calibration frames, so the held-out frames check the choice."""
    goal = q.auto_precision
    assert goal is not None

    def worst(calibrated: qdq.Calibrated) -> float:
        return precision_measures.qdq_cosine(calibrated, calibration)({})  # the model as calibrated

    cosines = {8: worst(eight)}
    chosen = eight
    if cosines[8] < goal.min_cosine:
        sixteen = qdq.calibrate(ai, calibration, replace(eight.config, activation_bits=16))
        cosines[16] = worst(sixteen)
        if cosines[16] > cosines[8]:
            chosen = sixteen
    bits = chosen.config.activation_bits
    reached = cosines[bits] >= goal.min_cosine
    if bits == 8 and reached:
        reason = f"int8 reaches {cosines[8]:.5f} >= {goal.min_cosine}"
    elif bits == 16:
        reason = (f"int8 gives {cosines[8]:.5f} < {goal.min_cosine}; int16x8 gives {cosines[16]:.5f}"
                  + ("" if reached else ", still below the target"))
    else:
        reason = f"int8 gives {cosines[8]:.5f} < {goal.min_cosine} and int16x8 does no better ({cosines[16]:.5f})"
    log.info("%s: auto precision chose %s: %s", q.model, "int8" if bits == 8 else "int16x8", reason)
    return chosen, {"choice": "int8" if bits == 8 else "int16x8", "min_cosine": goal.min_cosine,
                    "int8_cosine": round(cosines[8], 6),
                    "int16x8_cosine": round(cosines[16], 6) if 16 in cosines else None,
                    "reached": reached, "reason": reason, "measured_on": "calibration"}


def layer_names(ai: onnx.ModelProto) -> list[str]:
    """What per-layer ``bits`` may name here: any node (its weights and output activation) or graph input."""
    return [n.name for n in ai.graph.node] + [i.name for i in g.real_inputs(ai.graph)]
