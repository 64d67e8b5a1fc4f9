"""Bring every model to one opset of the default domain, with onnx's own version converter."""

from __future__ import annotations

import logging

import onnx
from onnx import version_converter

log = logging.getLogger(__name__)

TARGET_OPSET = 21  # per-axis INT4/INT8/INT16 DequantizeLinear (the quantize stage) needs >= 21


def default_opset(model: onnx.ModelProto) -> int:
    return next((imp.version for imp in model.opset_import if imp.domain in ("", "ai.onnx")), 0)


def convert_opset(model: onnx.ModelProto) -> list[str]:
    current = default_opset(model)
    if current == TARGET_OPSET:
        return []
    try:
        converted = version_converter.convert_version(model, TARGET_OPSET)
        onnx.checker.check_model(converted)
    except Exception as exc:  # the converter raises bare RuntimeErrors and checker errors alike
        log.warning("could not convert opset %d to %d (%s); keeping opset %d",
                    current, TARGET_OPSET, str(exc).splitlines()[0] if str(exc) else exc, current)
        return [f"kept opset {current}: converter failed"]
    model.CopyFrom(converted)
    return [f"opset {current} -> {TARGET_OPSET}"]
