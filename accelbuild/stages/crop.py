"""Crop stage: ``imported.onnx`` in; ``ai.onnx``, ``pre.onnx``, ``post.onnx`` out (a section that is not
cut off is written in its no-section form, ``sections.no_section``), with ``crop.json`` recording the
points, the sections and the measured error of running pre -> ai -> post against the whole model."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from accelbuild import accuracy
from accelbuild.config.schema_check import did_you_mean
from accelbuild.errors import ConfigError, InputFileError, StageError
from accelbuild.frontends import onnx_model
from accelbuild.frontends.tflite.layout import CHANNEL_FIRST_SUFFIX
from accelbuild.passes import auto_crop, host_fallback, sections
from accelbuild.stages.context import StageContext
from accelbuild.stages.params import CropParams
from accelbuild.util import onnx_graph as g
from accelbuild.util.files import write_json_atomic

log = logging.getLogger(__name__)

CHECK_SAMPLES = 2
CHECK_SEED = 0


def run(ctx: StageContext) -> None:
    params: CropParams = ctx.params
    model = onnx.load(str(ctx.inputs["imported"]))
    mode, crop_inputs, crop_outputs, reasons = _crop_points(ctx, model)
    moved, cut = _host_fallback(params, model, crop_inputs, crop_outputs)
    if moved is not None and cut is not None:
        crop_inputs, crop_outputs = moved.inputs, moved.outputs
    fallback = None
    try:
        cut = cut or sections.cut(model, crop_inputs, crop_outputs)
    except sections.NoCleanCut as exc:
        if not params.allow_partial:
            raise StageError(f"{params.model}: cannot crop: {exc}") from None
        fallback = f"allow_partial: the requested ai section alone, no pre/post sections ({exc})"
        log.warning("%s: cannot crop cleanly; building the requested ai section alone, without pre/post "
                    "sections (crop.allow_partial): %s", params.model, exc)
        cut = sections.ai_only(model, crop_inputs, crop_outputs)
    _refuse_empty_outputs(ctx, cut["ai"].model)
    for name, section in cut.items():
        onnx_model.save_onnx(section.model, ctx.outputs[f"{name}.onnx"])
    ai = cut["ai"].model
    for name, boundary in (("pre", "inputs"), ("post", "outputs")):
        if name not in cut:
            onnx_model.save_onnx(sections.no_section(name, ai, boundary), ctx.outputs[f"{name}.onnx"])
    record = {
        "mode": mode,
        "inputs": cut["ai"].inputs,
        "outputs": cut["ai"].outputs,
        "reasons": reasons,
        "fallback": fallback,
        "sections": {name: section.describe() for name, section in cut.items()},
        **({"unsupported": moved.record(params.chip)} if moved is not None else {}),
        "check": _check(ctx, model, cut, fallback),
    }
    write_json_atomic(ctx.outputs["crop.json"], record)


def _host_fallback(params: CropParams, model: onnx.ModelProto, inputs: list[str], outputs: list[str]
                   ) -> tuple[host_fallback.Fallback | None, dict[str, sections.Section] | None]:
    """What the chip cannot run in the ai section (None: it runs every node, or the family did not say), and
    the sections cut at the crop points moved past what moved to the host (None: nothing moved)."""
    if params.chip_ops is None:
        return None, None
    found = host_fallback.move_to_host(model, inputs, outputs, frozenset(params.chip_ops))
    cut = None
    if found.moved:
        try:
            cut = sections.cut(model, found.inputs, found.outputs)
        except sections.NoCleanCut as exc:
            log.warning("%s: %s stay in the ai section: moving them to the host does not cut the model cleanly "
                        "(%s)", params.model, host_fallback.listed(found.moved), exc)
            found = host_fallback.Fallback(inputs, outputs, [], found.kept + [
                {"node": m["node"], "op": m["op"]} for m in found.moved])
    for section in ("pre", "post"):
        nodes = [m for m in found.moved if m["to"] == section]
        if nodes:
            log.warning("%s: moved to the host's %s section, as %s does not run them: %s", params.model, section,
                        params.chip, host_fallback.listed(nodes))
    if found.idle:
        log.warning("%s: no node of the ai section is among the operators %s runs (%s): all are modelled as its "
                    "ALU work; crop the model to what %s runs", params.model, params.chip,
                    host_fallback.listed(found.kept), params.chip)
    elif found.kept:
        one = len(found.kept) == 1
        them, they = ("it", "it stays") if one else ("them", "they stay")
        log.warning("%s: %s: not among the operators %s runs, and %s runs nodes before and after %s, so %s in the "
                    "ai section, modelled as its ALU work; crop the model around %s (crop.inputs / crop.outputs) to "
                    "run %s on the host", params.model, host_fallback.listed(found.kept), params.chip, params.chip,
                    them, they, them, them)
    return (found if found.moved or found.kept else None), cut


def _refuse_empty_outputs(ctx: StageContext, ai: onnx.ModelProto) -> None:
    """An output of the accelerated section with a zero-size dimension holds no values: nothing for a chip to
    stream back (the empty inputs are refused by import). Cropping it off builds the rest."""
    for value in ai.graph.output:
        dims = [d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim]
        if 0 in dims:
            params: CropParams = ctx.params
            raise ConfigError(ctx.locate("crop", "outputs") if params.outputs else ctx.locate("path"),
                              f"model {params.model!r}: output {value.name!r} is an empty tensor "
                              f"{['?' if d is None else d for d in dims]}, so it holds no values; accelbuild "
                              "builds outputs that carry data: name the others in crop.outputs")


def _crop_points(ctx: StageContext, model: onnx.ModelProto) -> tuple[str, list[str], list[str], list[str]]:
    crop: CropParams = ctx.params
    inputs, outputs = [v.name for v in g.real_inputs(model.graph)], [v.name for v in model.graph.output]
    if crop.auto:
        prediction = auto_crop.predict(model)
        log.info("%s: auto crop: inputs %s, outputs %s", crop.model,
                 ", ".join(prediction.inputs), ", ".join(prediction.outputs))
        return "auto", prediction.inputs, prediction.outputs, prediction.reasons
    if crop.in_out_file is not None:
        shown = crop.in_out_file
        points = _read_in_out_file(ctx.inputs["in_out_file"], shown)
        resolve = _file_resolver(_names(model), shown)
        return ("in_out_file", [t for n in points.get("inputs", []) for t in resolve(n)] or inputs,
                [t for n in points.get("outputs", []) for t in resolve(n)] or outputs, [])
    if crop.inputs or crop.outputs:
        at = ("crop",)
        chosen_in = [t for i, n in enumerate(crop.inputs) for t in _resolve(ctx, model, n, at + ("inputs", i))]
        chosen_out = [t for i, n in enumerate(crop.outputs) for t in _resolve(ctx, model, n, at + ("outputs", i))]
        return "manual", chosen_in or inputs, chosen_out or outputs, []
    front = auto_crop.integer_front(model)
    if front is not None:
        log.info("%s: %s", crop.model, front.reasons[0])
        return "integer_inputs", front.inputs, front.outputs, front.reasons
    return "none", inputs, outputs, []


def _names(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Every name a crop point may use: tensor names; a TFLite tensor ``T`` that the import keeps only
    channel-first, as ``T/nchw`` (``frontends/tflite/graph.py``); and node names (meaning the node's
    outputs). ``T/nchw`` comes before node ``T``: when ``T`` had a fused activation, node ``T`` makes the
    value before it."""
    names: dict[str, list[str]] = {v.name: [v.name] for v in model.graph.input}
    for node in model.graph.node:
        for out in node.output:
            if out:
                names[out] = [out]
    for node in model.graph.node:
        for out in node.output:
            if out.endswith(CHANNEL_FIRST_SUFFIX) and out[: -len(CHANNEL_FIRST_SUFFIX)] not in names:
                names[out[: -len(CHANNEL_FIRST_SUFFIX)]] = [out]
    for node in model.graph.node:
        if node.name and node.name not in names:
            names[node.name] = [o for o in node.output if o]
    for tensor in model.graph.initializer:
        names.pop(tensor.name, None)
    return names


def _resolve(ctx: StageContext, model: onnx.ModelProto, name: str, at: tuple[Any, ...]) -> list[str]:
    names = _names(model)
    if name in names:
        return names[name]
    raise ConfigError(ctx.locate(*at),
                      f"no tensor or node named {name!r} in model {ctx.params.model!r}{did_you_mean(name, names)}")


def _file_resolver(names: dict[str, list[str]], shown: str) -> Callable[[str], list[str]]:
    def resolve(name: str) -> list[str]:
        if name in names:
            return names[name]
        raise InputFileError(shown, f"no tensor or node named {name!r} in the model{did_you_mean(name, names)}")
    return resolve


def _read_in_out_file(path: Path, shown: str) -> dict[str, list[str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(shown, f"not a readable JSON file: {exc}") from None
    if not isinstance(data, dict) or not set(data) <= {"inputs", "outputs"}:
        raise InputFileError(shown, 'expected a JSON object {"inputs": [...], "outputs": [...]}')
    for key, value in data.items():
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise InputFileError(shown, f"{key!r} must be a list of tensor names")
    return data


def _check(ctx: StageContext, model: onnx.ModelProto, cut: dict[str, sections.Section], fallback: str | None
           ) -> dict[str, Any]:
    """crop.json's ``check``: the composition check, or why it was not run."""
    if fallback is not None:
        return {"samples": 0, "error": "not checked: the ai section alone does not compose to the whole model"}
    if not ctx.measured:
        return {"samples": 0, "error": "not checked: the outputs are only looked at (validate)"}
    return _checked_composition(ctx, model, cut)


def _checked_composition(ctx: StageContext, model: onnx.ModelProto, cut: dict[str, sections.Section]) -> dict[str, Any]:
    """The composition check, or why it could not run (the whole model fails on random inputs)."""
    try:
        return _composition_error(model, cut)
    except Exception as exc:  # onnxruntime's own exception types
        import onnxruntime as ort

        whole_runs = True
        try:
            options = ort.SessionOptions()
            options.log_severity_level = 4
            ort.InferenceSession(onnx_model.serialize(model), options).run(
                None, accuracy.random_inputs(model, 1, CHECK_SEED)[0])
        except Exception:
            whole_runs = False
        if whole_runs:
            raise
        log.warning("%s: the model does not run on random inputs, so the crop could not be checked", ctx.params.model)
        return {"samples": 0, "error": str(exc).strip().splitlines()[0][:300] if str(exc).strip() else repr(exc)}


def _composition_error(model: onnx.ModelProto, cut: dict[str, sections.Section]) -> dict[str, Any]:
    """Max error of pre -> ai -> post against the whole model, on seeded random inputs."""
    import onnxruntime as ort

    def session(m: onnx.ModelProto) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.intra_op_num_threads = 1  # the same figures on every run
        return ort.InferenceSession(onnx_model.serialize(m), options, providers=["CPUExecutionProvider"])

    whole = session(model)
    parts = [(cut[name], session(cut[name].model)) for name in ("pre", "ai", "post") if name in cut]
    max_abs = max_rel = 0.0
    for feeds in accuracy.random_inputs(model, CHECK_SAMPLES, CHECK_SEED):
        want = dict(zip([o.name for o in whole.get_outputs()], whole.run(None, feeds)))
        values = dict(feeds)
        for _, sess in parts:
            results = sess.run(None, {i.name: values[i.name] for i in sess.get_inputs()})
            values.update(zip([o.name for o in sess.get_outputs()], results))
        for name, expected in want.items():
            diff = float(np.max(np.abs(values[name].astype(np.float64) - expected))) if expected.size else 0.0
            scale = float(np.max(np.abs(expected))) if expected.size else 0.0
            max_abs = max(max_abs, diff)
            max_rel = max(max_rel, diff / scale if scale else diff)
    # two significant digits: the figure says how close, and stays the same across CPUs
    return {"samples": CHECK_SAMPLES, "seed": CHECK_SEED,
            "max_abs_err": float(f"{max_abs:.2g}"), "max_rel_err": float(f"{max_rel:.2g}")}
