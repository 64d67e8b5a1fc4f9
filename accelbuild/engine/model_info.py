"""``accelbuild tensors MODEL`` (and ``init``, ``engine/starter.py``): a model's inputs, outputs and candidate
crop points, read through the import stage itself (so the names are those a pipeline's crop must use).

Candidate crop tensors are the single tensors the imported graph can be cut at: after some node in
topological order, exactly one computed tensor is still needed later. The auto-crop suggestion is the
crop stage's own prediction (``crop: {auto: true}``).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbuild.engine import info_cache
from accelbuild.errors import ConfigError, InputFileError
from accelbuild.util.files import scratch

if TYPE_CHECKING:
    import onnx

MAX_CANDIDATES = 40


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: list[int | str | None]


@dataclass(frozen=True)
class ModelInfo:
    path: Path
    inputs: list[dict[str, Any]]  # import.json's inputs: name, shape (model layout, batch 1), layout
    outputs: list[TensorInfo]
    candidates: list[TensorInfo]
    auto_inputs: list[str]
    auto_outputs: list[str]
    auto_reasons: list[str]

    def as_json(self) -> dict[str, Any]:
        return {"model": str(self.path), "inputs": self.inputs,
                "outputs": [{"name": t.name, "shape": t.shape} for t in self.outputs],
                "candidate_crop_tensors": [{"name": t.name, "shape": t.shape} for t in self.candidates],
                "auto_crop": {"inputs": self.auto_inputs, "outputs": self.auto_outputs, "reasons": self.auto_reasons}}


def read_model(path: Path, input_shapes: dict[str, list[int]] | None = None) -> ModelInfo:
    """Import ``path`` in a temporary folder and describe it. ``input_shapes`` (channel-last, no batch,
    as in a pipeline) fixes dynamic dimensions; other inputs take the model's own shapes."""
    from accelbuild.config.load import MODEL_FORMATS, load_generated
    from accelbuild.engine.plan import plan
    from accelbuild.engine.state import conversions_dir
    from accelbuild.frontends.input_shapes import given_shape_problem
    from accelbuild.frontends.tensorflow import conversion_cache
    from accelbuild.stages.context import StageContext

    if path.suffix.lower() not in MODEL_FORMATS:
        raise InputFileError(path, f"not a model file (expected {', '.join(MODEL_FORMATS)})")
    if not path.is_file():
        raise InputFileError(path, "no such file")
    for name, shape in (input_shapes or {}).items():
        problem = given_shape_problem(shape)
        if problem or not name.strip():
            raise InputFileError(path, f"input shape {name!r}: {problem or 'the input name is blank'}")
    with tempfile.TemporaryDirectory(prefix="accelbuild-model-") as tmp, scratch(Path(tmp)):
        yaml_path = Path(tmp) / "model.yaml"
        shapes = json.dumps({name: list(shape) for name, shape in (input_shapes or {}).items()} or "auto")
        # the import stage is the same for every family: cpu's target reads no hardware profile
        yaml_path.write_text(f"accelbuild: 2\nname: model\ntarget:\n  family: cpu\nmodels:\n  - name: model\n"
                             f"    path: {json.dumps(str(path.absolute()))}\n    input_shapes: {shapes}\n")
        try:
            job = plan([load_generated(yaml_path)], until="import")[0]
            key = info_cache.key(job)
            known = info_cache.read(key, path)  # the same bytes and shapes described before
            if known is not None:
                return known
            from accelbuild.stages import import_  # onnx, onnxruntime and the passes: only to read the model

            outputs = {name: Path(tmp) / name for name in job.outputs}
            with conversion_cache(conversions_dir()):  # a Keras model is converted once, not per command
                import_.run(StageContext(job.params, job.inputs, outputs, job.locate))
        except ConfigError as exc:  # said about the temporary pipeline: say it about the model
            message = exc.message.replace("give its shape in input_shapes", "give --input-shape NAME=H,W,C")
            for prefix in (f"{path.absolute()}: ", f"{path}: "):  # the file is named once, by the error
                message = message.removeprefix(prefix)
            raise InputFileError(path, message.replace(" of model 'model'", "")) from None
        import onnx

        model = onnx.load(str(outputs["imported.onnx"]))
        record = json.loads(outputs["import.json"].read_text())
    from accelbuild.passes import auto_crop

    shapes = _shapes(model)
    prediction = auto_crop.predict(model)
    info = ModelInfo(path, record["inputs"], [TensorInfo(o.name, shapes.get(o.name, [])) for o in model.graph.output],
                     [TensorInfo(t, shapes.get(t, [])) for t in cut_points(model)][:MAX_CANDIDATES],
                     prediction.inputs, prediction.outputs, prediction.reasons)
    info_cache.add(key, info)
    return info


def _shapes(model: onnx.ModelProto) -> dict[str, list[int | str | None]]:
    found = {}
    for value in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        found[value.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in dims]
    return found


def cut_points(model: onnx.ModelProto) -> list[str]:
    """Computed tensors that are, after their producer, the only value the rest of the graph needs."""
    graph = model.graph
    constants = {t.name for t in graph.initializer}
    last_use: dict[str, int] = {}
    for index, node in enumerate(graph.node):
        for name in node.input:
            last_use[name] = index
    end = len(graph.node)
    for output in graph.output:
        last_use[output.name] = end
    live: set[str] = set()
    points = []
    for index, node in enumerate(graph.node):
        live |= {o for o in node.output if o and last_use.get(o, -1) > index}
        live = {t for t in live if last_use.get(t, -1) > index}
        needed_inputs = {v.name for v in graph.input if v.name not in constants and last_use.get(v.name, -1) > index}
        if len(live) == 1 and not needed_inputs and index < end - 1:
            points.append(next(iter(live)))
    return list(dict.fromkeys(points))


def describe(info: ModelInfo) -> str:
    def shape(t: list[Any]) -> str:
        return "[" + ", ".join("?" if d is None else str(d) for d in t) + "]"

    lines = [f"{info.path}"]
    lines.append("inputs:")
    lines += [f"  {i['name']}  {shape(i['shape'])}  ({i['layout']})" for i in info.inputs]
    lines.append("outputs:")
    lines += [f"  {t.name}  {shape(t.shape)}" for t in info.outputs]
    lines.append(f"candidate crop tensors (single-tensor cuts, first {MAX_CANDIDATES}):")
    lines += [f"  {t.name}  {shape(t.shape)}" for t in info.candidates] or ["  (none)"]
    lines.append("auto crop suggestion (crop: {auto: true}):")
    lines.append(f"  inputs:  {', '.join(info.auto_inputs)}")
    lines.append(f"  outputs: {', '.join(info.auto_outputs)}")
    lines += [f"  - {reason}" for reason in info.auto_reasons]
    return "\n".join(lines) + "\n"


def channel_last(entry: dict[str, Any]) -> list[int]:
    """``input_shapes`` form of an imported input: (H, W, C) for images, the rest without the batch. An
    input imported as-is that reads as an image in channel-first order ([N, C, H, W] with C of 1 to 4 and a
    wider W) is written channel-last too: input_shapes are always (H, W, C)."""
    shape = entry["shape"]
    from accelbuild.frontends.input_shapes import looks_channel_first

    if entry["layout"] == "NCHW" or (entry["layout"] == "as-is" and looks_channel_first(shape)):
        return [shape[2], shape[3], shape[1]]
    return list(shape[1:])
