"""Import stage: a model file in, ``imported.onnx`` (static shapes, shape-inferred) and ``import.json`` out."""

from __future__ import annotations

import collections
import logging
import math
from collections.abc import Callable
from pathlib import Path

import onnx

from accelbuild.data.random import observed_shapes
from accelbuild.errors import ConfigError, InputFileError
from accelbuild.frontends import onnx_model
from accelbuild.frontends.input_shapes import (
    MAX_TENSOR_ELEMENTS,
    ResolvedInput,
    apply_input_shapes,
    check_model_file_inputs,
    graph_inputs,
    model_dims,
    resolve_input_shapes,
    show_dims,
)
from accelbuild.frontends.onnx_support import check_supported
from accelbuild.passes import run_passes, verify
from accelbuild.passes.opset import OpsetUpgradeError
from accelbuild.passes.verify import Feeds, ModelShapeError
from accelbuild.stages.context import StageContext
from accelbuild.stages.params import ImportParams
from accelbuild.util.files import write_json_atomic
from accelbuild.util.shape_inference import infer_shapes

log = logging.getLogger(__name__)


def run(ctx: StageContext) -> None:
    params: ImportParams = ctx.params
    model_path = ctx.inputs["model"]
    try:
        model, converted = _load(model_path, params)
        check_model_file_inputs(model, model_path)
    except InputFileError as exc:  # say which line of the YAML named the broken file
        raise _at_model_path(ctx, exc.message) from None
    resolved = resolve_input_shapes(model, ctx.locate, params)
    shapes_given = not params.input_shapes.auto
    own_inputs = _input_types(model) if shapes_given else None  # to ask onnxruntime whether the shapes are to blame
    apply_input_shapes(model, resolved)
    model, lenient = _infer_shapes(model, model_path)
    _check_tensor_sizes(model, ctx)  # before the passes fold constants or run the model on a sample
    dequantized = _dequantize(model, ctx)
    try:
        passes = run_passes(model, verify=True, inputs=verification_inputs(ctx), shapes_given=shapes_given,
                            own_inputs=own_inputs)
    except OpsetUpgradeError as exc:
        raise _at_model_path(ctx, exc.message) from None
    except ModelShapeError as exc:
        shown = ", ".join(f"{r.name}: {show_dims(r.shape)}" for r in resolved)
        fitting = _nearby_shapes_that_load(exc.model, resolved) if exc.model is not None else []
        hint = f"; it runs at {' and at '.join(fitting)}" if fitting else ""
        raise ConfigError(ctx.locate("input_shapes"), f"model {params.model} cannot take these input shapes "
                                                      f"({shown}): {exc}{hint}") from None
    model, _ = _infer_shapes(model, model_path, quiet=lenient)
    settled = settle_output_shapes(model, params.model)
    onnx_model.save_onnx(model, ctx.outputs["imported.onnx"])
    record = _record(model, model_path, params.format, resolved)
    record["passes"] = passes
    if settled:
        record["output_shapes_from_a_run"] = settled
    if dequantized:
        record["dequantized"] = dequantized
    if converted:
        record["converted_by"] = converted
    write_json_atomic(ctx.outputs["import.json"], record)


def _input_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """The model file's own input types (shapes), before ``input_shapes`` fixes them."""
    types = {}
    for value in graph_inputs(model):
        types[value.name] = onnx.TypeProto()
        types[value.name].CopyFrom(value.type)
    return types


def _nearby_shapes_that_load(model: onnx.ModelProto, resolved: list[ResolvedInput]) -> list[str]:
    """The image sizes nearest the given ones (rounded down and up to the smallest multiple of 2, 4 ... 64
    that helps) at which onnxruntime loads the model and runs it on a seeded random sample, as ``input_shapes``
    values; [] when none does."""
    images = [r for r in resolved if r.layout in ("NCHW", "NHWC")]
    if not images:
        return []
    for multiple in (2, 4, 8, 16, 32, 64):
        found = []
        for direction in (math.floor, math.ceil):
            trial = [_rounded(r, multiple, direction) if r in images else r for r in resolved]
            if trial == resolved or any(0 in r.shape for r in trial):
                continue
            candidate = onnx.ModelProto()
            candidate.CopyFrom(model)
            apply_input_shapes(candidate, trial)
            if verify.Reference(candidate).usable:
                found.append(", ".join(f"{r.name}: {show_dims(_channel_last(r))}" for r in trial
                                       if r.layout in ("NCHW", "NHWC")))
        if found:
            return list(dict.fromkeys(found))
    return []


def _rounded(r: ResolvedInput, multiple: int, direction: Callable[[float], int]) -> ResolvedInput:
    shape = list(r.shape)
    axes = (2, 3) if r.layout == "NCHW" else (1, 2)
    for axis in axes:
        shape[axis] = direction(shape[axis] / multiple) * multiple
    return ResolvedInput(r.name, tuple(shape), r.layout)


def _channel_last(r: ResolvedInput) -> list[int]:
    """The ``input_shapes`` form of an image input: (H, W, C) without the batch."""
    _, a, b, c = r.shape
    return [b, c, a] if r.layout == "NCHW" else [a, b, c]


def verification_inputs(ctx: StageContext) -> list[Feeds] | None:
    """Representative inputs to verify the graph passes on (one dict per sample, by input name).

    None for now: ``run_passes`` then verifies on one seeded random sample. The pipeline's
    ``models[].data`` is meant to be read here, so models whose random inputs do not run (an index, a
    mask, a sample rate) are verified too.
    """
    return None


def _at_model_path(ctx: StageContext, message: str) -> ConfigError:
    return ConfigError(ctx.locate("path"), f"{ctx.params.path_text}: {message}")


def _load(path: Path, params: ImportParams) -> tuple[onnx.ModelProto, dict | None]:
    """The model as ONNX, and the record of a conversion by another framework's tool (None for ONNX/TFLite)."""
    shapes = params.input_shapes.by_name or params.input_shapes.in_order
    if params.format == "onnx":
        model = onnx_model.load_onnx(path)
        check_supported(model, path)
        return model, None
    if params.format == "tflite":
        from accelbuild.frontends.tflite import load_tflite

        return load_tflite(path, shapes), None
    from accelbuild.frontends.tensorflow import load_tensorflow

    return load_tensorflow(path.parent if params.format == "savedmodel" else path, params.format, shapes)


_INFERENCE_ERRORS = (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError)


def _infer_shapes(model: onnx.ModelProto, path: Path, quiet: bool = False) -> tuple[onnx.ModelProto, bool]:
    """Strict shape inference, and whether it fell back to lenient inference.

    Where onnx's strict mode fails on a node it cannot infer (an operator's function body, say) but
    lenient inference runs, the lenient result is used, with a warning (unless ``quiet``: said before).
    """
    try:
        return infer_shapes(model, check_type=True, strict_mode=True, data_prop=True), False
    except _INFERENCE_ERRORS as exc:
        strict = _inference_reason(exc)
    try:
        inferred = infer_shapes(model, check_type=True, strict_mode=False, data_prop=True)
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


def settle_output_shapes(model: onnx.ModelProto, name: str) -> dict[str, list[int]]:
    """Give every graph output the shape the model really produces, where inference cannot derive it.

    A declared output shape is only a claim (converters write wrong ones: rank 2 declared, rank 3
    produced). Shape inference is rerun with the declarations cleared; an output it cannot derive
    completely is taken from one onnxruntime run on a seeded random sample. Returns the outputs whose
    shapes came from the run (a contradicted declaration is also logged).
    """
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for output in probe.graph.output:
        output.type.tensor_type.ClearField("shape")
    try:
        inferred = infer_shapes(probe, strict_mode=False, data_prop=True)
    except _INFERENCE_ERRORS:
        inferred = probe
    known = {o.name: model_dims(o) for o in inferred.graph.output}
    known.update({v.name: model_dims(v) for v in inferred.graph.value_info if v.name in known})
    complete = {k: v for k, v in known.items() if v and all(isinstance(d, int) for d in v)}
    observed = {} if all(o.name in complete for o in model.graph.output) else {
        name: shape for name, (_, shape) in observed_shapes(model).items()}
    settled = {}
    for output in model.graph.output:
        shape = complete.get(output.name) or observed.get(output.name)
        declared = model_dims(output)
        if shape is None or declared == shape:
            continue
        if declared and any(isinstance(d, int) for d in declared) and (
                len(declared) != len(shape) or any(isinstance(d, int) and d != e for d, e in zip(declared, shape))):
            log.warning("%s: output %r is declared %s but the model produces %s; using what it produces", name,
                        output.name, show_dims(declared), show_dims(shape))
        tensor_shape = output.type.tensor_type.shape
        tensor_shape.Clear()
        for dim in shape:
            tensor_shape.dim.add().dim_value = dim
        if output.name not in complete:
            settled[output.name] = shape
    return settled


def _dequantize(model: onnx.ModelProto, ctx: StageContext) -> dict | None:
    """Dynamically quantized layers back to float (``passes.dequantize``), with the output difference this
    makes on a seeded random sample; a warning names any such operator left as it is."""
    from accelbuild.passes import dequantize

    if not dequantize.remaining(model):
        return None
    reference = onnx.ModelProto()
    reference.CopyFrom(model)
    notes = dequantize.dequantize_dynamic(model)
    left = dequantize.remaining(model)
    if left:  # valid ONNX all the same: the target runs them on its host or refuses them by name
        log.warning("%s: dynamically quantized operators left as they are (no float form matched): %s; a model "
                    "exported in float lets the target quantize it", ctx.params.model, ", ".join(left))
    if not notes:
        return None
    check = verify.Reference(reference)
    error = check.max_relative_error(model) if check.usable else None
    log.info("%s: %d dynamically quantized layer(s) back to float (output difference %s, the dynamic "
             "quantization's own error)", ctx.params.model, len(notes), "unmeasured" if error is None else f"{error:.2e}")
    return {"layers": notes, "max_relative_error": None if error is None else float(f"{error:.3g}"),
            "measured_on": "random" if error is not None else None}
