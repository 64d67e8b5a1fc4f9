"""ONNX models as bytes and as onnxruntime sessions: the lowest layer every runner of a model shares.

``serialize`` gives deterministic bytes at the lowest IR version that carries the model (onnx's newest IR can
be ahead of what onnxruntime reads); ``session`` runs them single-threaded with onnxruntime's QDQ fusion off,
so figures are the same on every run and machine load.
"""

from __future__ import annotations

import onnx
from onnx import helper

from accelbuild.errors import UserError

# Element types that need a newer IR version than their opset alone implies.
_IR_FOR_TYPE: dict[int, int] = {
    onnx.TensorProto.INT4: 10,
    onnx.TensorProto.UINT4: 10,
    onnx.TensorProto.FLOAT8E4M3FN: 9,
    onnx.TensorProto.FLOAT8E4M3FNUZ: 9,
    onnx.TensorProto.FLOAT8E5M2: 9,
    onnx.TensorProto.FLOAT8E5M2FNUZ: 9,
}


def min_ir_version(model: onnx.ModelProto) -> int:
    """The lowest IR version that can carry this model's opsets and element types."""
    version = helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
    used = {t.data_type for t in model.graph.initializer}
    used |= {v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.output, *model.graph.value_info]}
    for elem_type in used:
        version = max(version, _IR_FOR_TYPE.get(elem_type, 0))
    return version


def serialize(model: onnx.ModelProto) -> bytes:
    """Deterministic bytes at the lowest sufficient IR version."""
    model.ir_version = min_ir_version(model)
    return model.SerializeToString(deterministic=True)


def session(model: onnx.ModelProto, optimized: bool = True):
    """An onnxruntime session of ``model``; ``optimized=False`` for a model run once or twice (a check): only
    onnxruntime's basic optimizations, which cost less to apply than the rest save there (tinydet: 7 ms a
    session against 10). Not none: constant folding is what lets some graphs load (a Range fed by a folded
    one-element shape: onnx's expanded AffineGrid)."""
    import onnxruntime as ort

    ort.set_default_logger_severity(4)  # failures are reported by us, once, not by onnxruntime's own logger
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.intra_op_num_threads = 1  # the same figures on every run and machine load
    options.log_severity_level = 4
    # onnxruntime would otherwise fuse DequantizeLinear -> Gemm/Conv into integer kernels that also
    # quantize the activations: not the arithmetic being measured (float activations, exact weights)
    options.add_session_config_entry("session.disable_quant_qdq", "1")
    try:
        return ort.InferenceSession(serialize(model), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own exception types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelRunError(f"onnxruntime cannot load the model ({first[:300]})") from None


class ModelRunError(UserError):
    """onnxruntime could not run a model on the accuracy inputs (often: an input needs real values)."""
