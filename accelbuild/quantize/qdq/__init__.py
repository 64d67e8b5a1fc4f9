"""Post-training static quantization of a float ONNX model into a QDQ model that onnxruntime runs as it is.

Two steps, so that precision searches can rebuild many variants from one calibration pass:

    calibrated = calibrate(model, feeds, QdqConfig(method="percentile"))   # runs the float model
    result = build(calibrated, bits={"conv3": 16})                         # no model runs

``quantize_qdq(model, feeds, config)`` does both. The result holds the QDQ model (opset 19, or 21 with 16-bit tensors,
per-channel integer weights, int32 biases, per-tensor activation QuantizeLinear/DequantizeLinear),
a calibration record per activation tensor and the per-layer weight records. Rules (``rules.py``):
fused activations and MatMul biases, pass-through operators, bounded activations never clipped,
decomposed LayerNorm left float, shared Concat scales when asked, per-layer bits for a layer's weights
and output activation, and nodes left float; bias correction (``bias_correction.py``); with TFLite conventions,
graph outputs a Conv writes cover what it can reach from its calibrated input channels (``reach.py``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import onnx
import onnx.version_converter

from accelbuild.passes.cleanup import name_nodes
from accelbuild.passes.opset import TARGET_OPSET, convert_opset, default_opset
from accelbuild.quantize.calibration import (
    ACTIVATION_BITS,
    DEFAULT_BINS,
    METHODS,
    Method,
    QuantParams,
    TensorStats,
    choose_range,
    quant_params,
)
from accelbuild.quantize.qdq import equalization, reach, saturation
from accelbuild.quantize.qdq.bias_correction import input_axis, output_shift
from accelbuild.quantize.qdq.collect import channel_peaks, collect
from accelbuild.quantize.qdq.graph import Numbers, write_qdq
from accelbuild.quantize.qdq.integers import IntegerWeights, integer_weights
from accelbuild.quantize.qdq.plan import Plan, make_plan
from accelbuild.quantize.qdq.rules import CONVENTIONS, TFLITE_FIXED
from accelbuild.quantize.weights import weight_bytes
from accelbuild.util import onnx_graph as g
from accelbuild.util.shape_inference import infer_shapes

log = logging.getLogger(__name__)

WEIGHT_BITS = (8, 16)
Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class LayerBits:
    """A layer's weights and output activation at separate precisions (8 or 16; None: the default)."""

    weights: int | None = None
    activations: int | None = None


Bits = int | LayerBits  # a plain number sets a layer's weights and its output activation together


def weight_bits_of(value: Bits | None, default: int) -> int:
    if isinstance(value, LayerBits):
        return value.weights or default
    return default if value is None else value


def activation_bits_of(value: Bits | None, default: int) -> int:
    if isinstance(value, LayerBits):
        return value.activations or default
    return default if value is None else value


def _valid_bits(name: str, value: Bits) -> None:
    numbers = [value.weights, value.activations] if isinstance(value, LayerBits) else [value]
    for bits in numbers:
        if bits is not None and bits not in WEIGHT_BITS:
            raise ValueError(f"layer {name!r}: bits must be 8 or 16, not {bits}")


@dataclass(frozen=True)
class QdqConfig:
    """How to quantize.

    ``bits`` maps node names to 8 or 16: the layer's weights and its output activation (a graph
    input's name sets that input's quantization); a ``LayerBits`` sets them apart. ``float_nodes`` names nodes left float (host layers).
    ``share_concat_scales`` gives a Concat's inputs and output one scale. ``unsigned_nonnegative``
    (symmetric only) puts never-negative tensors on the unsigned grid. ``percentile`` is used by the
    percentile method. ``bias_correction`` takes the mean output shift that weight quantization causes
    off each layer's bias. ``saturation_ranges`` ends a tensor's range where every reader is flat
    (``saturation.py``: HardSwish below -3, SiLU and Sigmoid within half an output step of their limits).
    ``equalize_depthwise`` brings the output channels of a depthwise Conv that only a 1x1 Conv reads to one
    range first (``equalization.py``; the float function is unchanged, the calibration frames run once more).
    ``reachable_outputs`` (TFLite conventions) widens a graph output that a Conv writes to the interval the Conv
    can reach with each input channel within its calibrated minimum and maximum (``reach.py``).
    ``bins``: histogram bins per sign (calibration memory per tensor).
    ``conventions="tflite"`` follows TFLite's integer kernels (``rules.py``): signed activations (int16
    symmetric), fixed output parameters of Logistic/Softmax/Tanh, average pooling and resizing keep
    their input's quantization; ``accelbuild.targets.ethos_u`` writes such a model as int8 TFLite.
    """

    weight_bits: int = 8
    activation_bits: int = 8
    symmetric: bool = False
    method: Method = "percentile"
    percentile: float = 99.99
    share_concat_scales: bool = False
    unsigned_nonnegative: bool = True
    bits: Mapping[str, Bits] = field(default_factory=dict)
    float_nodes: frozenset[str] = frozenset()
    bias_correction: bool = True
    saturation_ranges: bool = True
    equalize_depthwise: bool = True
    reachable_outputs: bool = True
    bins: int = DEFAULT_BINS
    conventions: str = "onnx"

    def __post_init__(self) -> None:
        if self.weight_bits not in WEIGHT_BITS:
            raise ValueError(f"weight_bits must be 8 or 16, not {self.weight_bits}")
        if self.activation_bits not in ACTIVATION_BITS:
            raise ValueError(f"activation_bits must be 8 or 16, not {self.activation_bits}")
        if self.conventions not in CONVENTIONS:
            raise ValueError(f"conventions must be one of {', '.join(CONVENTIONS)}, not {self.conventions!r}")
        if self.method not in METHODS:
            raise ValueError(f"calibration must be one of {', '.join(METHODS)}, not {self.method!r}")
        for name, bits in self.bits.items():
            _valid_bits(name, bits)


@dataclass
class Calibrated:
    """A prepared model, its plan and the measured statistics: everything ``build`` needs."""

    model: onnx.ModelProto
    plan: Plan
    stats: dict[str, TensorStats]
    frames: int
    config: QdqConfig
    means: dict[str, np.ndarray] = field(default_factory=dict)  # per-channel means of weighted layers' inputs
    equalized: frozenset[str] = frozenset()  # layers whose weights equalization rescaled (float function kept)
    channel_ranges: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # inputs of output Convs
    weight_cache: dict[tuple[str, int, float], IntegerWeights] = field(default_factory=dict, repr=False)


@dataclass
class QdqResult:
    model: onnx.ModelProto
    tensors: dict[str, dict[str, Any]]   # calibration record per activation tensor
    layers: list[dict[str, Any]]         # per weighted layer: name, op, bits, weights, weight_bytes, sqnr_db
    params: dict[str, QuantParams]       # per activation tensor

    def calibration_record(self) -> dict[str, Any]:
        """The content of calibration.json."""
        return {"tensors": self.tensors, "layers": self.layers}


def quantize_qdq(model: onnx.ModelProto, feeds: Iterable[Feeds], config: QdqConfig = QdqConfig()) -> QdqResult:
    """Calibrate on ``feeds`` and build the QDQ model with ``config.bits``."""
    return build(calibrate(model, feeds, config))


def prepare(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy at opset >= 21 (int16 QuantizeLinear), every node named, nodes in topological order,
    shapes and types inferred."""
    result = onnx.ModelProto()
    result.CopyFrom(model)
    if default_opset(result) < TARGET_OPSET:
        convert_opset(result)
        if default_opset(result) < TARGET_OPSET:
            raise ValueError(f"QDQ models need opset {TARGET_OPSET}; the model could not be converted")
    name_nodes(result)
    ordered = g.topological_order(result.graph)
    del result.graph.node[:]
    result.graph.node.extend(ordered)
    return infer_shapes(result)


def calibrate(model: onnx.ModelProto, feeds: Iterable[Feeds], config: QdqConfig = QdqConfig()) -> Calibrated:
    """Plan the model and measure the planned tensors over ``feeds`` (streamed, one frame at a time)."""
    prepared = prepare(model)
    _check_names(prepared, config)
    found = equalization.pairs(prepared, config.float_nodes) if config.equalize_depthwise else []
    equalized: list[str] = []
    if found:  # the frames run twice: the ranges to equalize, then the statistics of the equalized model
        feeds = list(feeds)
        peaks = channel_peaks(prepared, [pair.output for pair in found], feeds)
        equalized = equalization.equalize(prepared, found, peaks)
    plan = make_plan(prepared, config.float_nodes, config.share_concat_scales, config.conventions)
    counted = _Counted(feeds)
    nodes = {n.name: n for n in prepared.graph.node}
    axes = {wp.activation: input_axis(nodes[wp.layer.name]) for wp in plan.weights} if config.bias_correction else {}
    heads = reach.heads(prepared.graph, plan) if config.conventions == "tflite" and config.reachable_outputs else []
    stats, means, ranges = collect(prepared, plan.sources(), counted, histogram=config.method != "minmax",
                                   bins=config.bins, mean_axes={t: axis for t, axis in axes.items() if axis is not None},
                                   channel_ranges=sorted({head.input for head in heads}))
    return Calibrated(prepared, plan, stats, counted.count, config, means, frozenset(equalized), ranges)


def build(calibrated: Calibrated, bits: Mapping[str, Bits] | None = None) -> QdqResult:
    """The QDQ model for per-layer ``bits`` (default: the config's), without running the model."""
    config = calibrated.config
    overrides = dict(config.bits if bits is None else bits)
    _check_names(calibrated.model, config, overrides)
    plan, graph = calibrated.plan, calibrated.model.graph
    groups = {gid: _group_params(calibrated, gid, overrides) for gid in plan.groups}
    flat: dict[int, tuple[float, float]] = {}
    reached: dict[int, tuple[float, float]] = {}
    if calibrated.channel_ranges:  # TFLite conventions: outputs written by a Conv cover what it can reach
        groups, reached = reach.widen(graph, plan, groups, reach.heads(graph, plan), calibrated.channel_ranges,
                                      lambda low, high, b: quant_params(low, high, b, *_grid(config, b)))
    if config.saturation_ranges:
        fixed = {gid for gid, group in plan.groups.items() if group.fixed is not None and config.conventions == "tflite"}
        groups, flat = saturation.narrow(graph, plan, groups,
                                         lambda low, high, b: quant_params(low, high, b, *_grid(config, b)), fixed)
    weights: dict[str, IntegerWeights] = {}
    layer_records = []
    nodes = {n.name: n for n in graph.node}
    for wp in plan.weights:
        layer = wp.layer
        layer_bits = weight_bits_of(overrides.get(layer.name), config.weight_bits)
        input_scale = groups[plan.group_of[wp.activation]].scale
        mean = calibrated.means.get(wp.activation)
        shift = output_shift(nodes[layer.name], layer, mean) if mean is not None and (
            wp.bias is not None or wp.can_add_bias) else None
        key = (layer.name, layer_bits, input_scale)
        if key not in calibrated.weight_cache:  # precision searches rebuild with the same weights often
            bias = g.constant(graph, wp.bias) if wp.bias else None
            ints = integer_weights(g.constant(graph, layer.weight), layer.axis, layer_bits, input_scale,
                                   None if bias is None else bias.reshape(-1), layer.name, shift)
            if bias is not None and ints.bias_codes is not None:  # a MatMul's Add may hold [1, N]
                ints = replace(ints, bias_codes=ints.bias_codes.reshape(bias.shape))
            calibrated.weight_cache[key] = ints
        ints = calibrated.weight_cache[key]
        weights[layer.name] = ints
        out_group = plan.group_of.get(nodes[layer.name].output[0])
        out_bits = groups[out_group].bits if out_group is not None else \
            activation_bits_of(overrides.get(layer.name), config.activation_bits)  # fused: as requested
        layer_records.append({"name": layer.name, "op": layer.op, "bits": layer_bits, "activation_bits": out_bits,
                              "weights": layer.count,
                              "weight_bytes": weight_bytes(layer.count, layer_bits), "channels": int(ints.scales.size),
                              "axis": layer.axis, "sqnr_db": round(ints.sqnr_db, 3),
                              "int32_bias": ints.bias_codes is not None, "bias_corrected": shift is not None,
                              "raised_for_bias": ints.raised_for_bias,
                              "equalized": layer.name in calibrated.equalized})
    constants = {}
    for const in plan.constants:
        value = g.constant(graph, const.tensor)
        const_bits = activation_bits_of(overrides.get(const.node), config.activation_bits)
        low, high = (float(value.min()), float(value.max())) if value.size else (0.0, 0.0)  # empty: no values
        params = groups[const.group] if const.group is not None else quant_params(
            low, high, const_bits, *_grid(config, const_bits))
        constants[(const.node, const.index)] = (params.quantize(value), params)
    model = eight_bit_opset(write_qdq(calibrated.model, plan, Numbers(groups, weights, constants)))
    params = {t: groups[gid] for t, gid in plan.group_of.items()}
    return QdqResult(model, _tensor_records(calibrated, params, flat, reached), layer_records, params)


EIGHT_BIT_OPSET = 19  # QuantizeLinear without output_dtype; int8/uint8 only


def eight_bit_opset(model: onnx.ModelProto) -> onnx.ModelProto:
    """A QDQ model with no 16-bit tensor, at opset 19 when it converts cleanly (else as it is).

    onnxruntime (1.32) cannot load some opset-21 QDQ models with its default optimisations: QDQ
    propagation through a float MaxPool inserts a QuantizeLinear with ``output_dtype`` INT8, and the
    S8->U8 transformer then changes its zero point to uint8 but not the attribute ("output_dtype INT8
    does not match y_zero_point type UINT8"). Opset 19 has no such attribute; int16 needs opset 21.
    """
    sixteen = {onnx.TensorProto.INT16, onnx.TensorProto.UINT16}
    if any(t.data_type in sixteen for t in model.graph.initializer):
        return model
    try:
        lowered = onnx.version_converter.convert_version(model, EIGHT_BIT_OPSET)
        onnx.checker.check_model(lowered)
    except Exception as exc:  # the converter raises bare RuntimeErrors for ops it cannot lower
        log.debug("QDQ model kept at its opset: %s", exc)
        return model
    return lowered


def _group_params(calibrated: Calibrated, gid: int, overrides: Mapping[str, Bits]) -> QuantParams:
    config, plan = calibrated.config, calibrated.plan
    group = plan.groups[gid]
    requested = [activation_bits_of(overrides[name], config.activation_bits) for name in sorted(group.layers)
                 if name in overrides]
    bits = max(requested) if requested else config.activation_bits
    parts = [calibrated.stats[s] for s in group.sources]
    for name in group.constants:  # a shared Concat's constant inputs must fit the shared range too
        extra = TensorStats(config.bins, histogram=parts[0].counts is not None)
        extra.add(g.constant(calibrated.model.graph, name))
        parts.append(extra)
    stats = parts[0] if len(parts) == 1 else TensorStats.merged(parts)
    if config.conventions == "tflite" and group.fixed is not None:
        scale, zero = TFLITE_FIXED[group.fixed][bits]
        return _fixed_params(scale, zero, bits)
    symmetric, unsigned = _grid(config, bits)
    method = "minmax" if group.bounded else config.method
    low, high = choose_range(stats, method, bits, symmetric, config.percentile, unsigned)
    return quant_params(low, high, bits, symmetric, unsigned)


def _grid(config: QdqConfig, bits: int) -> tuple[bool, bool]:
    """(symmetric, unsigned_nonnegative) for activations of ``bits``: TFLite conventions use signed
    grids only, and int16 activations are symmetric there."""
    if config.conventions == "tflite":
        return config.symmetric or bits == 16, False
    return config.symmetric, config.unsigned_nonnegative


def _fixed_params(scale: float, zero: int, bits: int) -> QuantParams:
    qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return QuantParams((qmin - zero) * scale, (qmax - zero) * scale, scale, zero, bits, signed=True)


def _tensor_records(calibrated: Calibrated, params: dict[str, QuantParams], flat: Mapping[int, tuple[float, float]],
                    reached: Mapping[int, tuple[float, float]]) -> dict[str, dict[str, Any]]:
    plan, config = calibrated.plan, calibrated.config
    records = {}
    for tensor, p in params.items():
        group = plan.groups[plan.group_of[tensor]]
        record: dict[str, Any] = {
            "range": [float(np.float32(p.low)), float(np.float32(p.high))],
            "scale": p.scale, "zero_point": p.zero_point, "bits": p.bits, "dtype": p.dtype.name,
            "symmetric": _grid(config, p.bits)[0], "method": "minmax" if group.bounded else config.method,
            "frames": calibrated.frames,
        }
        if group.id in flat:  # the calibrated range, cut where every reader is flat
            record["readers_flat_outside"] = [float(np.float32(x)) if math.isfinite(x) else None
                                              for x in flat[group.id]]
        if group.id in reached:  # the calibrated range, widened to what the Conv writing it can reach
            record["reachable_from_inputs"] = [float(np.float32(x)) for x in reached[group.id]]
        if len(group.members) > 1:
            record["shared_with"] = [m for m in group.members if m != tensor]
        records[tensor] = record
    return records


def _check_names(model: onnx.ModelProto, config: QdqConfig, bits: Mapping[str, Bits] | None = None) -> None:
    nodes = {n.name for n in model.graph.node}
    inputs = {v.name for v in g.real_inputs(model.graph)}
    for what, given, names in (("bits", bits if bits is not None else config.bits, nodes | inputs),
                               ("float_nodes", config.float_nodes, nodes)):
        unknown = sorted(set(given) - names)
        if unknown:
            raise ValueError(f"{what}: no node named {', '.join(map(repr, unknown))} in the model")
    if bits is not None:
        for name, value in bits.items():
            _valid_bits(name, value)


class _Counted:
    """Iterate over feeds once, counting them."""

    def __init__(self, feeds: Iterable[Feeds]) -> None:
        self.feeds, self.count = feeds, 0

    def __iter__(self):
        for feed in self.feeds:
            self.count += 1
            yield feed


__all__ = ["Bits", "Calibrated", "LayerBits", "QdqConfig", "QdqResult", "build", "calibrate", "prepare",
           "quantize_qdq"]
