"""The inputs every accuracy figure is measured on (quantize and benchmark stages alike).

``benchmark.accuracy`` gives either ``samples`` seeded random inputs or a ``data`` folder of ``.npy``
files. Inputs are made for the whole model and, when the crop stage cut off a pre-processing section,
run through ``pre.onnx``, so the AI section sees the values it will see in use.

Data folder layout: for a one-input model, every ``*.npy`` file (sorted by name) is one sample; for a
model with several inputs, a subfolder per input name holds its files, matched by sorted order. A file
holds one sample in the input's shape, the shape without the batch dimension, or a batch of samples.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx

from accelbuild.config.spec import AccuracyInputs, DataParams
from accelbuild.data.random import describe_rule, input_specs, random_inputs  # noqa: F401  (accuracy.random_inputs)
from accelbuild.errors import InputFileError
from accelbuild.passes.sections import read_section
from accelbuild.util import onnx_graph as g

Feeds = dict[str, np.ndarray]
MAX_SAMPLES = 10_000


def data_inputs(model: onnx.ModelProto, files: dict[str, Path], shown: str) -> list[Feeds]:
    """Samples from a data folder's ``.npy`` files (``files``: path relative to the folder -> file)."""
    return _data_inputs_named(model, files, shown)[0]


def _data_inputs_named(model: onnx.ModelProto, files: dict[str, Path], shown: str) -> tuple[list[Feeds], list[str]]:
    """``data_inputs`` and each sample's name (its first input's file; ``file[i]`` for a batch's i-th)."""
    specs = input_specs(model)
    per_input: dict[str, list[np.ndarray]] = {}
    names: list[str] = []
    for name, shape, dtype in specs:
        prefix = "" if len(specs) == 1 else f"{name}/"
        chosen = sorted(rel for rel in files if rel.startswith(prefix) and "/" not in rel[len(prefix):])
        if not chosen:
            raise InputFileError(f"{shown.rstrip('/')}/{prefix}", f"no .npy files for input {name!r}"
                                 + ("" if len(specs) == 1 else " (one subfolder per input name)"))
        samples = [(rel, s) for rel in chosen for s in _samples(files[rel], shape, dtype)][:MAX_SAMPLES]
        per_input[name] = [s for _, s in samples]
        if not names:
            counts = Counter(rel for rel, _ in samples)
            seen: Counter[str] = Counter()
            for rel, _ in samples:
                names.append(rel if counts[rel] == 1 else f"{rel}[{seen[rel]}]")
                seen[rel] += 1
    count = min(len(v) for v in per_input.values())
    return [{name: per_input[name][i] for name in per_input} for i in range(count)], names[:count]


def data_folder(inputs: dict[str, Path]) -> Path:
    """The folder the ``data:<relative path>`` inputs come from."""
    role, path = next((r, p) for r, p in inputs.items() if r.startswith("data:"))
    return Path(str(path)[: -len(role[len("data:"):])])


def is_random(source: AccuracyInputs, data: DataParams | None) -> bool:
    """Whether the accuracy inputs are seeded random ones (no data folder)."""
    return data is None and source.data is None


def describe_inputs(source: AccuracyInputs, data: DataParams | None, count: int) -> dict[str, object]:
    """What a record says about the inputs its figures were measured on."""
    if data is not None:
        return {"inputs": "data", "folder": data.text, "samples": count}
    if source.data is not None:
        return {"inputs": "data", "folder": source.data, "samples": count}
    return {"inputs": "random", "samples": count, "seed": source.seed}


def _samples(path: Path, shape: list[int], dtype: np.dtype) -> list[np.ndarray]:
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputFileError(path, f"not a readable .npy array: {exc}") from None
    if list(array.shape) == shape:
        return [array.astype(dtype)]
    if list(array.shape) == shape[1:]:
        return [array.astype(dtype)[None]]
    if array.ndim == len(shape) and list(array.shape[1:]) == shape[1:]:
        return [array[i:i + 1].astype(dtype) for i in range(array.shape[0])]
    raise InputFileError(path, f"array of shape {list(array.shape)} does not fit input shape {shape}")


def stage_inputs(model: onnx.ModelProto, source: AccuracyInputs, inputs: dict[str, Path],
                 data: DataParams | None = None) -> list[Feeds]:
    """A stage's accuracy inputs: ``models[].data`` (images or arrays, preprocessed for the model), else
    the ``benchmark.accuracy.data`` files among its ``inputs`` (roles ``data:<path>``), else seeded random
    inputs."""
    return stage_inputs_named(model, source, inputs, data)[0]


def stage_inputs_named(model: onnx.ModelProto, source: AccuracyInputs, inputs: dict[str, Path],
                       data: DataParams | None = None) -> tuple[list[Feeds], list[str]]:
    """``stage_inputs`` and each sample's name: its file as the user wrote the folder, or ``random #i``."""
    if data is not None:
        from accelbuild.data.load import load_named_inputs
        from accelbuild.data.spec import data_spec, input_infos

        return load_named_inputs(data_spec(data, data_folder(inputs)), input_infos(model))
    if source.data is not None:
        files = {role[len("data:"):]: path for role, path in inputs.items() if role.startswith("data:")}
        feeds, names = _data_inputs_named(model, files, source.data)
        return feeds, [f"{source.data.rstrip('/')}/{name}" for name in names]
    assert source.samples is not None and source.seed is not None
    feeds = random_inputs(model, source.samples, source.seed)
    return feeds, [f"random #{i}" for i in range(len(feeds))]


def through(section: onnx.ModelProto | None, feeds: list[Feeds]) -> list[Feeds]:
    """Run each sample through a (pre-processing) section and return its outputs by name."""
    if section is None:
        return feeds
    from accelbuild.quantize.measure import session

    sess = session(section)
    outputs = [o.name for o in sess.get_outputs()]
    names = {i.name for i in sess.get_inputs()}
    result = []
    for sample in feeds:
        values = sess.run(None, {k: v for k, v in sample.items() if k in names})
        result.append({**sample, **dict(zip(outputs, values))})
    return result


def ai_inputs(model_name: str, inputs: dict[str, Path], ai_path: Path, pre_path: Path, source: AccuracyInputs,
              data: DataParams | None, ai: onnx.ModelProto | None = None) -> list[Feeds]:
    """``ai_inputs_named`` without the names."""
    return ai_inputs_named(model_name, inputs, ai_path, pre_path, source, data, ai)[0]


def ai_inputs_named(model_name: str, inputs: dict[str, Path], ai_path: Path, pre_path: Path,
                    source: AccuracyInputs, data: DataParams | None,
                    ai: onnx.ModelProto | None = None) -> tuple[list[Feeds], list[str]]:
    """A stage's accuracy inputs for the AI section at ``ai_path`` (``ai``: that model, when the caller has
    it loaded), passed through the cropped pre-processing section ``pre_path`` (the crop stage's
    ``pre.onnx``; its no-section form passes them on unchanged).
    ``inputs`` holds the stage's files: per-model ``<model>/data:...`` roles (pipeline stages) or plain
    ``data:...`` ones (per-model stages)."""
    ai = ai if ai is not None else onnx.load(str(ai_path))
    pre = read_section(pre_path)
    prefix = f"{model_name}/data:"
    own = {role[len(model_name) + 1:]: path for role, path in inputs.items() if role.startswith(prefix)}
    files = own if data is not None and own else inputs
    feeds, names = stage_inputs_named(pre or ai, source, files, data)
    return through(pre, feeds), names


def non_finite_float(model_name: str, fed: onnx.ModelProto, ai: onnx.ModelProto, reference: list[list[np.ndarray]],
                     names: list[str], random: bool) -> str | None:
    """The message refusing a float model whose outputs hold NaN or infinity on its accuracy inputs (no
    figure can compare with them, and a record cannot hold them), or None when every output is finite.
    ``fed``: the model the inputs were made for (the pre section, or ``ai``); ``reference``: ``ai``'s outputs
    per sample, named ``names``. It names the first such output and sample, and the inputs behind it."""
    for sample, values in zip(names, reference):
        for output, value in zip(ai.graph.output, values):
            array = np.asarray(value)
            if array.dtype.kind not in "fc" or np.isfinite(array).all():
                continue
            what = "NaN" if np.isnan(array).any() else "infinity"
            behind = _inputs_behind(ai, output.name) if fed is ai else [i.name for i in g.real_inputs(fed.graph)]
            if random:
                given = "; ".join(f"{name}: {describe_rule(fed, name)}" for name in behind)
                cause = (f"its seeded random inputs ({given}, docs/data.md) are not values it computes on; give "
                         "representative inputs with `data:` (models[].data)")
            else:
                cause = (f"check input(s) {', '.join(behind)} in that sample, or give other representative inputs "
                         "with `data:` (models[].data)")
            return (f"model {model_name!r}: the float model, before any quantization, gives {what} at output "
                    f"{output.name!r} on {sample}: {cause}")
    return None


def _inputs_behind(model: onnx.ModelProto, output: str) -> list[str]:
    """The graph inputs ``output`` is computed from, in input order."""
    producers = g.producers(model.graph)
    seen: set[str] = set()
    pending = [output]
    while pending:
        tensor = pending.pop()
        if tensor in seen:
            continue
        seen.add(tensor)
        node = producers.get(tensor)
        if node is not None:
            pending.extend(name for name in g.node_reads(node) if name)
    return [value.name for value in g.real_inputs(model.graph) if value.name in seen]
