"""Import stage: a model file in, ``imported.onnx`` (static shapes, shape-inferred) and ``import.json`` out."""

from __future__ import annotations

import collections
import logging
import math
from pathlib import Path

import onnx

from accelbuild.errors import ConfigError, InputFileError
from accelbuild.frontends import onnx_model
from accelbuild.frontends.input_shapes import (
    MAX_TENSOR_ELEMENTS,
    apply_input_shapes,
    check_model_file_inputs,
    model_dims,
    resolve_input_shapes,
    show_dims,
)
from accelbuild.frontends.onnx_support import check_supported
from accelbuild.passes import run_passes
from accelbuild.passes.opset import OpsetUpgradeError
from accelbuild.passes.verify import Feeds
from accelbuild.stages.context import StageContext
from accelbuild.stages.params import ImportParams
from accelbuild.util.files import write_json_atomic

log = logging.getLogger(__name__)


def run(ctx: StageContext) -> None:
    params: ImportParams = ctx.params
    model_path = ctx.inputs["model"]
    try:
        model = _load(model_path, params.format)
        check_model_file_inputs(model, model_path)
    except InputFileError as exc:  # say which line of the YAML named the broken file
        raise _at_model_path(ctx, exc.message) from None
    resolved = resolve_input_shapes(model, ctx.locate, params)
    apply_input_shapes(model, resolved)
    model, lenient = _infer_shapes(model, model_path)
    _check_tensor_sizes(model, ctx)  # before the passes fold constants or run the model on a sample
    try:
        passes = run_passes(model, verify=True, inputs=verification_inputs(ctx))
    except OpsetUpgradeError as exc:
        raise _at_model_path(ctx, exc.message) from None
    model, _ = _infer_shapes(model, model_path, quiet=lenient)
    onnx_model.save_onnx(model, ctx.outputs["imported.onnx"])
    record = _record(model, model_path, params.format, resolved)
    record["passes"] = passes
    write_json_atomic(ctx.outputs["import.json"], record)


def verification_inputs(ctx: StageContext) -> list[Feeds] | None:
    """Representative inputs to verify the graph passes on (one dict per sample, by input name).

    None for now: ``run_passes`` then verifies on one seeded random sample. The pipeline's
    ``models[].data`` is meant to be read here, so models whose random inputs do not run (an index, a
    mask, a sample rate) are verified too.
    """
    return None


def _at_model_path(ctx: StageContext, message: str) -> ConfigError:
    return ConfigError(ctx.locate("path"), f"{ctx.params.path_text}: {message}")


def _load(path: Path, fmt: str) -> onnx.ModelProto:
    if fmt == "onnx":
        model = onnx_model.load_onnx(path)
        check_supported(model, path)
        return model
    if fmt == "tflite":
        from accelbuild.frontends.tflite import load_tflite

        return load_tflite(path)
    from accelbuild.frontends.tensorflow import load_tensorflow

    return load_tensorflow(path)


_INFERENCE_ERRORS = (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError)


def _infer_shapes(model: onnx.ModelProto, path: Path, quiet: bool = False) -> tuple[onnx.ModelProto, bool]:
    """Strict shape inference, and whether it fell back to lenient inference.

    Where onnx's strict mode fails on a node it cannot infer (an operator's function body, say) but
    lenient inference runs, the lenient result is used, with a warning (unless ``quiet``: said before).
    """
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True), False
    except _INFERENCE_ERRORS as exc:
        strict = _inference_reason(exc)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=False, data_prop=True)
    except _INFERENCE_ERRORS:
        raise InputFileError(path, f"shape inference failed with the given input shapes: {strict}") from None
    if not quiet:
        log.warning("%s: strict shape inference failed (%s); continuing with onnx's lenient inference",
                    path.name, strict)
    return inferred, True


def _inference_reason(exc: Exception) -> str:
    """onnx's (often nested, multi-line) inference message on one line."""
    text = " ".join(str(exc).split())
    return text[:300]


def _check_tensor_sizes(model: onnx.ModelProto, ctx: StageContext) -> None:
    """Refuse a model whose inferred tensors are absurdly large (a Tile, Resize or ConstantOfShape to 2**40)."""
    for value in [*model.graph.value_info, *model.graph.output]:
        dims = model_dims(value)
        if not dims or not all(isinstance(d, int) for d in dims):
            continue
        size = math.prod(dims)
        if size > MAX_TENSOR_ELEMENTS:
            raise ConfigError(ctx.locate("path"), f"{ctx.params.path_text}: tensor {value.name!r} would have {size:,} elements "
                                     f"{dims} with these input shapes; accelbuild handles at most "
                                     f"{MAX_TENSOR_ELEMENTS:,} per tensor")


def _record(model: onnx.ModelProto, path: Path, fmt: str, resolved: list) -> dict:
    shapes = {v.name: model_dims(v) for v in [*model.graph.value_info, *model.graph.output]}
    outputs = [{"name": v.name, "shape": shapes.get(v.name)} for v in model.graph.output]
    unresolved = [o for o in outputs if o["shape"] is None or not all(isinstance(d, int) for d in o["shape"])]
    for out in unresolved:
        log.warning("%s: output %r has no static shape after inference: %s", path.name, out["name"],
                    show_dims(out["shape"] or []))
    return {
        "source": {"file": path.name, "format": fmt},
        "ir_version": model.ir_version,
        "opsets": {imp.domain or "ai.onnx": imp.version for imp in model.opset_import},
        "inputs": [
            {"name": r.name, "shape": list(r.shape), "layout": r.layout} for r in resolved
        ],
        "outputs": outputs,
        "nodes": len(model.graph.node),
        "op_types": dict(sorted(collections.Counter(n.op_type for n in model.graph.node).items())),
    }
