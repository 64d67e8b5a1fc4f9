"""Check the writer: the int8 TFLite model, run in LiteRT, against the QDQ ONNX model it was written from,
run in onnxruntime, on the same float inputs. Both compute the same integer arithmetic up to rounding
of intermediate requantizations, so outputs must agree within ``max_steps`` quantization steps of the
output's scale. Inputs are quantized once with the TFLite input's parameters (what a device is fed),
and the ONNX model gets those dequantized values, so both see exactly the same input codes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from accelbuild.targets.ethos_u.tflite import kernels as kernels_module
from accelbuild.targets.ethos_u.tflite.kernels import OPTIMISED, REFERENCE
from accelbuild.targets.ethos_u.tflite.layout import TO_NCHW, TO_NHWC
from accelbuild.util import onnx_graph as g


@dataclass(frozen=True)
class Agreement:
    max_steps: dict[str, float]   # per output: largest |tflite - onnx| / output scale over every frame
    frames: int
    within_one: float = 1.0       # share of all output values within one step

    @property
    def worst(self) -> float:
        return max(self.max_steps.values(), default=0.0)


def interpreter(data: bytes, kernels: str = REFERENCE) -> object:
    return kernels_module.interpreter(data, kernels)


def _interpreter(data: bytes, preserve: bool = False, optimized: bool = False) -> object:
    """LiteRT on its reference kernels (the integer arithmetic TFLite Micro ports), or with ``optimized`` its
    optimised builtin kernels (``kernels.py`` says when and how far they differ)."""
    return kernels_module.interpreter(data, OPTIMISED if optimized else REFERENCE, preserve)


def input_codes(interp: object, feeds: Mapping[str, np.ndarray], nhwc: Mapping[str, bool],
                onnx_inputs: list[str]) -> tuple[dict[int, np.ndarray], dict[str, np.ndarray]]:
    """Float ``feeds`` (ONNX layout) -> (the TFLite input tensors' values by index; the inputs as the model
    sees them, ONNX layout). Quantized inputs are quantized with the TFLite tensor's parameters (and seen as
    their dequantized codes); float and integer inputs are passed as they are, in their own type."""
    codes: dict[int, np.ndarray] = {}
    seen: dict[str, np.ndarray] = {}
    for name, detail in zip(onnx_inputs, interp.get_input_details()):  # type: ignore[attr-defined]
        value = np.asarray(feeds[name])
        scale, zero = detail["quantization"]
        if not scale:
            codes[detail["index"]] = value.astype(detail["dtype"])
            seen[name] = value
            continue
        value = value.astype(np.float32)
        if nhwc.get(name):
            value = value.transpose(TO_NHWC)
        info = np.iinfo(detail["dtype"])
        # np.asarray: arithmetic on a rank-0 array gives a numpy scalar, which LiteRT and onnxruntime refuse
        q = np.asarray(np.clip(np.rint(value / np.float32(scale)) + zero, info.min, info.max), detail["dtype"])
        codes[detail["index"]] = q
        back = np.asarray((q.astype(np.int32) - zero) * np.float32(scale), np.float32)
        seen[name] = back.transpose(TO_NCHW) if nhwc.get(name) else back
    return codes, seen


def run_tflite(interp: object, feeds: Mapping[str, np.ndarray], nhwc: Mapping[str, bool],
               onnx_inputs: list[str], onnx_outputs: list[str],
               raw: Collection[str] = ()) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Float ``feeds`` (ONNX layout) -> (the inputs as the model sees them, ONNX layout; float outputs in
    ONNX layout), quantizing inputs and dequantizing outputs with the TFLite tensors' parameters; the
    outputs named in ``raw`` (integer outputs of the ONNX model: its own QuantizeLinear) keep their codes."""
    codes, seen = input_codes(interp, feeds, nhwc, onnx_inputs)
    for index, value in codes.items():
        interp.set_tensor(index, value)  # type: ignore[attr-defined]
    interp.invoke()  # type: ignore[attr-defined]
    outputs = {}
    for name, detail in zip(onnx_outputs, interp.get_output_details()):  # type: ignore[attr-defined]
        codes_out = np.asarray(interp.get_tensor(detail["index"]))  # type: ignore[attr-defined]
        scale, zero = detail["quantization"]
        if not scale or name in raw:
            outputs[name] = codes_out.copy()
            continue
        value = np.asarray((codes_out.astype(np.int32) - zero) * np.float32(scale), np.float32)
        outputs[name] = value.transpose(TO_NCHW) if nhwc.get(name) else value
    return seen, outputs


def outputs_per_frame(ai_session: Any, interp: object, layout: Mapping[str, bool],
                      feeds: Iterable[Mapping[str, np.ndarray]], qdq_session: Any = None) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]], list[list]]:
    """Per frame, in the float model's output order: the float model's outputs (``ai_session``), the TFLite
    model's dequantized (``interp``; ``layout``: which inputs/outputs are channel-last), and, with
    ``qdq_session``, quantized.onnx's fed the same input codes (else an empty list)."""
    inputs = [i.name for i in ai_session.get_inputs()]
    outputs = [o.name for o in ai_session.get_outputs()]
    raw = {o.name for o in ai_session.get_outputs() if o.type != "tensor(float)"}
    reference, lite, quantized = [], [], []
    for feed in feeds:
        seen, out = run_tflite(interp, feed, layout, inputs, outputs, raw)
        lite.append([out[o] for o in outputs])
        reference.append(ai_session.run(outputs, {k: feed[k] for k in inputs}))
        if qdq_session is not None:
            quantized.append(qdq_session.run(outputs, seen))
    return reference, lite, quantized


def reference_session(model: onnx.ModelProto) -> object:
    """onnxruntime without graph optimizations: QuantizeLinear/DequantizeLinear computed as the ONNX
    operators define them (its fused int16 MatMul path rounds differently, by many steps)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@dataclass(frozen=True)
class LayerAgreement:
    """Every quantized tensor of the TFLite model against the QDQ operator that makes it, fed with the
    TFLite model's own codes of that operator's inputs: the writer's check, free of the rounding
    differences that compound through a deep network."""

    max_steps: float                  # largest code difference over every tensor and frame
    worst_tensor: str
    tensors: int                      # tensors compared
    within_one: float                 # share of all compared codes within one step
    frames: int
    differing: dict[str, float] = field(default_factory=dict)  # per ONNX operator type: share of codes that differ


@dataclass(frozen=True)
class Check:
    """What one pass over the frames measured: per operator, end to end, and (with the float model) both
    models' outputs per frame for the accuracy record."""

    layers: LayerAgreement
    outputs: Agreement
    reference: list[list[np.ndarray]]  # per frame, the float model's outputs (empty without one)
    lite: list[list[np.ndarray]]       # per frame, int8.tflite's outputs, dequantized, ONNX layout


def layerwise(data: bytes, qdq: onnx.ModelProto, feeds: Iterable[Mapping[str, np.ndarray]]) -> LayerAgreement:
    return check(data, qdq, feeds).layers


def compare(data: bytes, qdq: onnx.ModelProto, feeds: Iterable[Mapping[str, np.ndarray]]) -> Agreement:
    """Largest output disagreement, in output quantization steps, over ``feeds``."""
    return check(data, qdq, feeds).outputs


def check(data: bytes, qdq: onnx.ModelProto, feeds: Iterable[Mapping[str, np.ndarray]],
          ai_session: Any = None, kernels: str = REFERENCE) -> Check:
    """Run int8.tflite once per frame on ``kernels`` (every tensor kept) and compare it with quantized.onnx two ways: each
    QDQ operator fed LiteRT's codes of its inputs (``layers``), and the whole QDQ model fed the same input
    codes (``outputs``). With ``ai_session`` (the float model) also collect both models' outputs."""
    from accelbuild.targets.ethos_u.tflite.qgraph import read_qdq
    from accelbuild.targets.ethos_u.tflite.writer import io_layout, tensor_layouts

    qg = read_qdq(qdq)
    nhwc = tensor_layouts(qdq)
    interp = kernels_module.interpreter(data, kernels, preserve=True)
    by_name = {d["name"]: d for d in interp.get_tensor_details()}
    cut, checked = _fed_from_tflite(qdq, qg, by_name)
    local_session, whole_session = reference_session(cut), reference_session(qdq)
    names = [o.name for o in local_session.get_outputs()]  # type: ignore[attr-defined]
    layouts = io_layout(qdq)
    inputs = [v.name for v in g.real_inputs(qdq.graph)]
    outputs = [v.name for v in qdq.graph.output]
    # a float output (written by a float CPU operator) is compared in its own units
    raw = integer_outputs(qdq)  # int8 codes the model itself outputs: compared as codes
    out_scales = {name: 1.0 if name in raw else d["quantization"][0] or 1.0
                  for name, d in zip(outputs, interp.get_output_details())}
    out_worst = {name: 0.0 for name in outputs}
    worst, worst_name, values, close, out_values, out_close, frames = 0.0, "", 0, 0, 0, 0, 0
    producers = {o: n.op_type for n in qdq.graph.node for o in n.output}
    by_type: dict[str, list[int]] = {}  # operator type -> [codes compared, codes that differ]
    reference, lite = [], []
    for feed in feeds:
        seen, lite_out = run_tflite(interp, feed, layouts, inputs, outputs, raw)
        fed = dict(seen)
        for name, detail in checked.values():
            codes = np.asarray(interp.get_tensor(detail["index"]))  # a rank-0 tensor comes back as a numpy scalar
            fed[name] = codes.transpose(TO_NCHW) if qg.alias[name] in nhwc and codes.ndim == 4 else codes
        results = dict(zip(names, local_session.run(names, fed)))  # type: ignore[attr-defined]
        for name_check, (name, _) in checked.items():
            diff = np.abs(results[name_check].astype(np.int64) - fed[name].astype(np.int64))
            if diff.size and diff.max() > worst:
                worst, worst_name = float(diff.max()), qg.tensors[qg.alias[name]].name
            values, close = values + diff.size, close + int(np.count_nonzero(diff <= 1))
            tally = by_type.setdefault(producers.get(qg.alias[name], "?"), [0, 0])
            tally[0], tally[1] = tally[0] + diff.size, tally[1] + int(np.count_nonzero(diff))
        for name, ref in zip(outputs, whole_session.run(outputs, seen)):  # type: ignore[attr-defined]
            steps = np.abs(lite_out[name].astype(np.float64) - ref) / np.float32(out_scales[name])
            out_worst[name] = max(out_worst[name], round(float(steps.max()), 2) if ref.size else 0.0)
            out_values, out_close = out_values + steps.size, out_close + int(np.count_nonzero(steps <= 1.01))
        if ai_session is not None:
            ai_outputs = [o.name for o in ai_session.get_outputs()]
            ai_inputs = [i.name for i in ai_session.get_inputs()]
            reference.append(ai_session.run(ai_outputs, {k: feed[k] for k in ai_inputs}))
            lite.append([lite_out[o] for o in outputs])  # the same outputs, in the same order
        frames += 1
    differing = {op: round(bad / count, 6) for op, (count, bad) in sorted(by_type.items()) if count}
    layers = LayerAgreement(worst, worst_name, len(checked), round(close / values, 6) if values else 1.0, frames,
                            differing)
    agreement = Agreement(out_worst, frames, round(out_close / out_values, 6) if out_values else 1.0)
    return Check(layers, agreement, reference, lite)


def integer_outputs(model: onnx.ModelProto) -> set[str]:
    """Graph outputs of an integer type (a model ending in its own QuantizeLinear)."""
    return {v.name for v in model.graph.output if v.type.tensor_type.elem_type != onnx.TensorProto.FLOAT}


def _fed_from_tflite(qdq: onnx.ModelProto, qg: Any, by_name: Mapping[str, dict]) -> tuple[onnx.ModelProto, dict]:
    """A copy of ``qdq`` in which every quantized tensor the TFLite model has too is an input (fed LiteRT's
    codes) and the QuantizeLinear that made it writes an extra output instead (``check -> (input, detail)``)."""
    from onnx import helper

    cut = onnx.ModelProto()
    cut.CopyFrom(qdq)
    graph = cut.graph
    checked: dict[str, tuple[str, dict]] = {}
    for node in graph.node:
        if node.op_type != "QuantizeLinear" or node.output[0] not in qg.alias:
            continue
        key = qg.alias[node.output[0]]
        t = qg.tensors[key]
        detail = by_name.get(t.name)
        if detail is None or key in qg.inputs:
            continue
        fed, name_check = node.output[0], node.output[0] + "/check"
        node.output[0] = name_check
        elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype))
        graph.input.append(helper.make_tensor_value_info(fed, elem, list(t.shape)))
        graph.output.append(helper.make_tensor_value_info(name_check, elem, list(t.shape)))
        checked[name_check] = (fed, detail)
    return cut, checked
