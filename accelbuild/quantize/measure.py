"""Measure a model the way the chip computes it: activations rounded to bfloat16 after every layer.

The measurement copy of a model gets a Cast to bfloat16 and back after every float tensor a node
produces (onnxruntime's casts round to nearest even, exactly like ``ml_dtypes.bfloat16``; a test holds
that). Weights can be turned into graph inputs so that many weight variants run through one session.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx
from onnx import TensorProto, helper

from accelbuild.quantize.weights import cosine_similarity, max_abs_err, sqnr_db
from accelbuild.util.onnx_runtime import ModelRunError, serialize, session  # noqa: F401  (measure.session, ...)
from accelbuild.util.shape_inference import infer_shapes

Feeds = dict[str, np.ndarray]


def with_bf16_activations(model: onnx.ModelProto, skip: Iterable[str] = ()) -> onnx.ModelProto:
    """A copy that rounds every float node output to bfloat16 (except tensors in ``skip``)."""
    result = onnx.ModelProto()
    result.CopyFrom(model)
    inferred = infer_shapes(result)
    float_tensors = {v.name for v in [*inferred.graph.value_info, *inferred.graph.output]
                     if v.type.tensor_type.elem_type == TensorProto.FLOAT}
    skipped = set(skip)
    graph = result.graph
    rounded_nodes = []
    for node in graph.node:
        rounded_nodes.append(node)
        if node.op_type == "DequantizeLinear":
            continue  # a weight path: the chip keeps dequantized weights exact per channel
        for i, name in enumerate(node.output):
            if name not in float_tensors or name in skipped:
                continue
            raw = f"{name}/fp32"
            node.output[i] = raw
            rounded_nodes.append(helper.make_node("Cast", [raw], [f"{name}/bf16"], name=f"{name}/to_bf16",
                                                  to=TensorProto.BFLOAT16))
            rounded_nodes.append(helper.make_node("Cast", [f"{name}/bf16"], [name], name=f"{name}/from_bf16",
                                                  to=TensorProto.FLOAT))
    del graph.node[:]
    graph.node.extend(rounded_nodes)
    del graph.value_info[:]
    return result


def bf16_outputs(model: onnx.ModelProto, samples: list[Feeds]) -> list[list[np.ndarray]]:
    """The outputs of ``model`` with bfloat16 activations: mx3's arithmetic as the quantize stage measures
    it (the one measure behind its headline, its auto_precision decisions and the simulator's cross-check)."""
    return run_all(session(with_bf16_activations(model)), samples)


def weights_as_inputs(model: onnx.ModelProto, names: Iterable[str]) -> onnx.ModelProto:
    """A copy whose listed initializers are graph inputs, to be fed per run."""
    result = onnx.ModelProto()
    result.CopyFrom(model)
    wanted = set(names)
    for tensor in [t for t in result.graph.initializer if t.name in wanted]:
        result.graph.initializer.remove(tensor)
        result.graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    return result


def run_all(sess, samples: list[Feeds], extra: Feeds | None = None) -> list[list[np.ndarray]]:
    names = {i.name for i in sess.get_inputs()}
    try:
        return [sess.run(None, {k: v for k, v in {**sample, **(extra or {})}.items() if k in names})
                for sample in samples]
    except Exception as exc:  # onnxruntime raises its own exception types for bad inputs and graphs
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelRunError(
            f"onnxruntime cannot run the model on the accuracy inputs ({first[:300]}); if an input needs "
            "particular values (a sample rate, a mask), give real inputs in benchmark.accuracy.data"
        ) from None


def compare(reference: list[list[np.ndarray]], measured: list[list[np.ndarray]]) -> dict[str, float]:
    """cosine, sqnr_db and max_abs_err of all outputs of all samples, flattened together."""
    want = np.concatenate([o.astype(np.float64).ravel() for outs in reference for o in outs])
    got = np.concatenate([o.astype(np.float64).ravel() for outs in measured for o in outs])
    cosine = cosine_similarity(want, got)
    return {
        "cosine": round(cosine, 6),
        "sqnr_db": round(sqnr_db(want, got), 3),
        "max_abs_err": float(f"{max_abs_err(want, got):.3g}"),
    }
