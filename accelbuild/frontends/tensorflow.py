"""Keras (.h5, .keras) and TensorFlow frozen-graph (.pb) models, through tf2onnx when it is installed.

These converters are an optional extra (``pip install 'accelbuild[tensorflow]'``): TensorFlow is a
large dependency most users of ONNX and TFLite models never need. Without it, the import stage stops
with an exit-2 error that names the extra.
"""

from __future__ import annotations

from pathlib import Path

import onnx

from accelbuild.errors import InputFileError
from accelbuild.passes.opset import TARGET_OPSET

EXTRA = "pip install 'accelbuild[tensorflow]'  (TensorFlow and tf2onnx)"


def load_tensorflow(path: Path) -> onnx.ModelProto:
    try:
        import tensorflow as tf
        import tf2onnx
    except ImportError:
        raise InputFileError(path, f"{path.suffix} models need the TensorFlow converter extra: {EXTRA}") from None
    try:
        if path.suffix.lower() in (".h5", ".keras"):
            keras_model = tf.keras.models.load_model(str(path), compile=False)
            model, _ = tf2onnx.convert.from_keras(keras_model, opset=TARGET_OPSET)
        else:
            graph_def = tf.compat.v1.GraphDef()
            graph_def.ParseFromString(path.read_bytes())
            inputs, outputs = _graph_boundary(graph_def)
            model, _ = tf2onnx.convert.from_graph_def(graph_def, input_names=inputs, output_names=outputs,
                                                      opset=TARGET_OPSET)
    except InputFileError:
        raise
    except Exception as exc:  # TensorFlow and tf2onnx raise many unrelated types for bad files
        raise InputFileError(path, f"TensorFlow conversion failed: {exc.__class__.__name__}: {exc}") from None
    return model


def _graph_boundary(graph_def: object) -> tuple[list[str], list[str]]:
    """Placeholders are the inputs; nodes nothing reads are the outputs (tensor names ``name:0``)."""
    nodes = list(graph_def.node)  # type: ignore[attr-defined]
    read = {i.split(":")[0].lstrip("^") for n in nodes for i in n.input}
    inputs = [f"{n.name}:0" for n in nodes if n.op == "Placeholder"]
    outputs = [f"{n.name}:0" for n in nodes if n.name not in read and n.op not in ("Placeholder", "NoOp", "Const")]
    return inputs, outputs
