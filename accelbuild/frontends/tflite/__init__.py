"""TFLite frontend: a ``.tflite`` flatbuffer -> an equivalent ONNX ModelProto.

``load_tflite`` reads and validates the file (:mod:`.reader`), decodes constants (:mod:`.tensors`),
checks and converts every operator (:mod:`.ops`, :mod:`.supported`, :mod:`.convert`) and keeps the
TFLite names and channel-last layout at every TFLite tensor (:mod:`.graph`, :mod:`.layout`).
A file that cannot be read or has unsupported operators raises ``InputFileError`` (exit 2).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

    from accelbuild.frontends.tflite.dynamic_shapes import Shapes

__all__ = ["QUANT_METADATA_KEY", "load_tflite"]


def __getattr__(name: str) -> Any:
    """``QUANT_METADATA_KEY`` from .convert, imported on first use: code that only needs a submodule such
    as .layout (the crop stage) does not pay for the converter and the tflite package."""
    if name == "QUANT_METADATA_KEY":
        return importlib.import_module("accelbuild.frontends.tflite.convert").QUANT_METADATA_KEY
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_tflite(path: Path, shapes: Shapes | None = None) -> onnx.ModelProto:
    """Convert a TFLite model file to ONNX (opset 21, float32 compute, TFLite layout and names).

    ``shapes`` are the pipeline's ``input_shapes`` (without batch, by name or in order): a dynamic input
    given another shape is converted at it, with every tensor's shape recomputed (:mod:`.dynamic_shapes`);
    otherwise a model with placeholder shapes is converted at LiteRT's shapes for its stored inputs.
    """
    from accelbuild.errors import InputFileError
    from accelbuild.frontends.tflite.convert import convert
    from accelbuild.frontends.tflite.dynamic_shapes import (
        at_stored_inputs,
        placeholder_hint,
        requested_shapes,
        with_shapes_at,
    )
    from accelbuild.frontends.tflite.reader import read_model

    model = read_model(Path(path))
    wanted = requested_shapes(model, shapes)
    model = with_shapes_at(model, wanted) if wanted else at_stored_inputs(model)
    try:
        return convert(model)
    except InputFileError as exc:
        hint = "" if wanted else placeholder_hint(model)
        if not hint or "shape" not in exc.message:
            raise
        raise InputFileError(model.path, f"{exc.message}{hint}") from None
