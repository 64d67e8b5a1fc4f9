"""Bring older models up to one opset of the default domain, with onnx's own version converter.

Models older than ``TARGET_OPSET`` are upgraded to it (the quantize stage writes per-axis
DequantizeLinear, which needs it); below ``MIN_OPSET`` the upgrade is required, since later stages read
opset-11 forms (Clip/Pad/Resize bounds as inputs), so a failed upgrade refuses the model. A model newer
than the target keeps its opset: converting down would run onnx's older shape inference on the model,
which can disagree with what the model and onnxruntime compute (pooling with ``ceil_mode``, for one).
Like every pass, the upgrade is verified in onnxruntime by ``run_passes``.
"""

from __future__ import annotations

import logging

import onnx
from onnx import version_converter

from accelbuild.errors import UserError

log = logging.getLogger(__name__)

TARGET_OPSET = 21  # per-axis INT4/INT8/INT16 DequantizeLinear (the quantize stage) needs >= 21
MIN_OPSET = 11  # the oldest opset later stages read; older models must upgrade


class OpsetUpgradeError(UserError):
    """A model below ``MIN_OPSET`` that onnx's version converter cannot upgrade (the stage adds the file)."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def default_opset(model: onnx.ModelProto) -> int:
    return next((imp.version for imp in model.opset_import if imp.domain in ("", "ai.onnx")), 0)


def convert_opset(model: onnx.ModelProto) -> list[str]:
    current = default_opset(model)
    if current >= TARGET_OPSET:
        return []
    try:
        converted = version_converter.convert_version(model, TARGET_OPSET)
        onnx.checker.check_model(converted)
    # the converter raises bare RuntimeErrors and checker errors alike
    except Exception as exc:  # noqa: BLE001
        reason = _reason(exc)
        if current < MIN_OPSET:
            raise OpsetUpgradeError(
                f"opset {current} could not be upgraded to {TARGET_OPSET} with onnx's version converter "
                f"({reason}); export the model with opset {MIN_OPSET} or newer") from None
        log.warning("kept opset %d: onnx's version converter cannot take it to %d (%s)", current, TARGET_OPSET,
                    reason)
        return [f"kept opset {current}: {reason}"]
    model.CopyFrom(converted)
    return [f"opset {current} -> {TARGET_OPSET}"]


def _reason(exc: Exception) -> str:
    """The converter's message without its source file and assertion text, on one line."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else exc.__class__.__name__
    if "Assertion" in first and "failed:" in first:
        first = first.split("failed:", 1)[1].strip()
    return first[:200]
