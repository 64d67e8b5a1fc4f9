"""Check the writer: the int8 TFLite model, run in LiteRT, against the QDQ ONNX model it was written from,
run in onnxruntime, on the same float inputs. Both compute the same integer arithmetic up to rounding
of intermediate requantizations, so outputs must agree within ``max_steps`` quantization steps of the
output's scale. Inputs are quantized once with the TFLite input's parameters (what a device is fed),
and the ONNX model gets those dequantized values, so both see exactly the same input codes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from accelbuild.targets.ethos_u.tflite.layout import TO_NCHW, TO_NHWC


@dataclass(frozen=True)
class Agreement:
    max_steps: dict[str, float]   # per output: largest |tflite - onnx| / output scale over every frame
    frames: int
    within_one: float = 1.0       # share of all output values within one step

    @property
    def worst(self) -> float:
        return max(self.max_steps.values(), default=0.0)


def interpreter(data: bytes) -> object:
    return _interpreter(data)


def _interpreter(data: bytes, preserve: bool = False) -> object:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    # TFLite's builtin kernels without the XNNPACK delegate: the reference semantics TFLite Micro
    # (which runs Vela's CPU operators next to the NPU) follows
    interp = Interpreter(model_content=data, num_threads=1, experimental_preserve_all_tensors=preserve,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interp.allocate_tensors()
    return interp


def run_tflite(interp: object, feeds: Mapping[str, np.ndarray], nhwc: Mapping[str, bool],
               onnx_inputs: list[str], onnx_outputs: list[str]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Float ``feeds`` (ONNX layout) -> (the inputs as dequantized codes, ONNX layout; float outputs in
    ONNX layout), quantizing inputs and dequantizing outputs with the TFLite tensors' parameters."""
    details_in = interp.get_input_details()  # type: ignore[attr-defined]
    seen: dict[str, np.ndarray] = {}
    for name, detail in zip(onnx_inputs, details_in):
        value = np.asarray(feeds[name], dtype=np.float32)
        if nhwc.get(name):
            value = value.transpose(TO_NHWC)
        scale, zero = detail["quantization"]
        info = np.iinfo(detail["dtype"])
        codes = np.clip(np.rint(value / np.float32(scale)) + zero, info.min, info.max).astype(detail["dtype"])
        interp.set_tensor(detail["index"], codes)  # type: ignore[attr-defined]
        back = ((codes.astype(np.int32) - zero) * np.float32(scale)).astype(np.float32)
        seen[name] = back.transpose(TO_NCHW) if nhwc.get(name) else back
    interp.invoke()  # type: ignore[attr-defined]
    outputs = {}
    for name, detail in zip(onnx_outputs, interp.get_output_details()):  # type: ignore[attr-defined]
        codes = interp.get_tensor(detail["index"])  # type: ignore[attr-defined]
        scale, zero = detail["quantization"]
        value = ((codes.astype(np.int32) - zero) * np.float32(scale)).astype(np.float32)
        outputs[name] = value.transpose(TO_NCHW) if nhwc.get(name) else value
    return seen, outputs


def compare(data: bytes, qdq: onnx.ModelProto, feeds: Iterable[Mapping[str, np.ndarray]]) -> Agreement:
    """Largest output disagreement, in output quantization steps, over ``feeds``."""
    from accelbuild.targets.ethos_u.tflite.writer import io_layout

    nhwc = io_layout(qdq)
    session = reference_session(qdq)
    inputs = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    interp = interpreter(data)
    scales = {name: d["quantization"][0] for name, d in zip(outputs, interp.get_output_details())}  # type: ignore
    worst = {name: 0.0 for name in outputs}
    frames, values, close = 0, 0, 0
    for feed in feeds:
        seen, lite = run_tflite(interp, feed, nhwc, inputs, outputs)
        reference = session.run(outputs, seen)
        for name, ref in zip(outputs, reference):
            steps = np.abs(lite[name] - ref) / np.float32(scales[name])
            worst[name] = max(worst[name], round(float(steps.max()), 2) if ref.size else 0.0)  # whole steps
            values, close = values + steps.size, close + int(np.count_nonzero(steps <= 1.01))
        frames += 1
    return Agreement(worst, frames, round(close / values, 6) if values else 1.0)


def outputs_per_frame(ai_session: Any, interp: object, layout: Mapping[str, bool],
                      feeds: Iterable[Mapping[str, np.ndarray]], qdq_session: Any = None) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]], list[list]]:
    """Per frame, in the float model's output order: the float model's outputs (``ai_session``), the TFLite
    model's dequantized (``interp``; ``layout``: which inputs/outputs are channel-last), and, with
    ``qdq_session``, quantized.onnx's fed the same input codes (else an empty list)."""
    inputs = [i.name for i in ai_session.get_inputs()]
    outputs = [o.name for o in ai_session.get_outputs()]
    reference, lite, quantized = [], [], []
    for feed in feeds:
        seen, out = run_tflite(interp, feed, layout, inputs, outputs)
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


def layerwise(data: bytes, qdq: onnx.ModelProto, feeds: Iterable[Mapping[str, np.ndarray]]) -> LayerAgreement:
    from onnx import helper

    from accelbuild.targets.ethos_u.tflite.qgraph import read_qdq
    from accelbuild.targets.ethos_u.tflite.writer import io_layout, tensor_layouts

    qg = read_qdq(qdq)
    nhwc = tensor_layouts(qdq)
    interp = _interpreter(data, preserve=True)
    by_name = {d["name"]: d for d in interp.get_tensor_details()}  # type: ignore[attr-defined]
    cut = onnx.ModelProto()
    cut.CopyFrom(qdq)
    graph = cut.graph
    checked: dict[str, tuple[str, dict]] = {}  # check output -> (Q output fed from TFLite, TFLite detail)
    for node in graph.node:
        if node.op_type != "QuantizeLinear" or node.output[0] not in qg.alias:
            continue
        key = qg.alias[node.output[0]]
        t = qg.tensors[key]
        detail = by_name.get(t.name)
        if detail is None or key in qg.inputs:
            continue
        fed, check = node.output[0], node.output[0] + "/check"
        node.output[0] = check
        elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype))
        graph.input.append(helper.make_tensor_value_info(fed, elem, list(t.shape)))
        graph.output.append(helper.make_tensor_value_info(check, elem, list(t.shape)))
        checked[check] = (fed, detail)
    session = reference_session(cut)
    names = [o.name for o in session.get_outputs()]  # type: ignore[attr-defined]
    worst, worst_name, values, close, frames = 0.0, "", 0, 0, 0
    layouts = io_layout(qdq)
    inputs = [v.name for v in qdq.graph.input if v.name in qg.alias]
    outputs = [v.name for v in qdq.graph.output]
    for feed in feeds:
        seen, _ = run_tflite(interp, feed, layouts, inputs, outputs)
        fed = dict(seen)
        for name, detail in checked.values():
            codes = interp.get_tensor(detail["index"])  # type: ignore[attr-defined]
            key = qg.alias[name]
            fed[name] = codes.transpose(TO_NCHW) if key in nhwc and codes.ndim == 4 else codes
        results = dict(zip(names, session.run(names, fed)))  # type: ignore[attr-defined]
        for check, (name, _) in checked.items():
            diff = np.abs(results[check].astype(np.int64) - fed[name].astype(np.int64))
            if diff.size and diff.max() > worst:
                worst, worst_name = float(diff.max()), qg.tensors[qg.alias[name]].name
            values, close = values + diff.size, close + int(np.count_nonzero(diff <= 1))
        frames += 1
    return LayerAgreement(worst, worst_name, len(checked), round(close / values, 6) if values else 1.0, frames)
