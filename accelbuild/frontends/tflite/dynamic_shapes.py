"""Tensor shapes of a TFLite model with dynamic inputs, at the pipeline's ``input_shapes``.

A TFLite input whose shape signature has -1 dimensions stores a placeholder shape (often all ones), and
every tensor after it is stored at that placeholder: openWakeWord's mel front end stores its 1,760-sample
input as [1, 1], so its STFT convolution "produces" [1, 1, 1, 257] where a real frame gives [1, 1, 8, 257].
The converter builds the ONNX graph from the stored shapes, so it needs the shapes at the real input
size. LiteRT (the ``ai-edge-litert`` package) computes them: resize the inputs, allocate, run once on
zeros (some tensors get their shapes only when they run), and read every tensor's shape back.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from accelbuild.errors import InputFileError
from accelbuild.frontends.tflite.reader import Model

log = logging.getLogger(__name__)

Shapes = Mapping[str, Sequence[int]] | Sequence[Sequence[int]]


def requested_shapes(model: Model, shapes: Shapes | None) -> dict[int, tuple[int, ...]]:
    """Input tensor index -> full shape (batch included), for dynamic inputs given another shape.

    ``shapes`` are the pipeline's ``input_shapes`` without batch, by input name or in order; an input
    given with the wrong number of dimensions is left to import's own check, which says so with a position.
    """
    if not shapes:
        return {}
    inputs = [model.tensors[i] for i in model.inputs]
    if isinstance(shapes, Mapping):
        given = {t.index: shapes[t.name] for t in inputs if t.name in shapes}
    else:
        given = {t.index: shape for t, shape in zip(inputs, shapes)}
    wanted = {}
    for index, user in given.items():
        tensor = model.tensors[index]
        if tensor.signature is None or all(d >= 0 for d in tensor.signature) or isinstance(user, str):
            continue  # a static input (its stored shapes are real), or "auto"
        user = [int(d) for d in user]
        if len(user) + 1 != len(tensor.shape):
            continue
        full = (tensor.shape[0] or 1, *user)
        if full != tuple(tensor.shape):
            wanted[index] = full
    return wanted


def has_placeholders(model: Model) -> bool:
    """Some tensor has a dynamic dimension other than the batch: its stored shape is a placeholder."""
    return any(t.signature is not None and any(d < 0 for d in t.signature[1:]) for t in model.tensors)


def at_stored_inputs(model: Model) -> Model:
    """``model`` with every tensor's shape as LiteRT computes it at the stored input shapes.

    Where a file stores dynamic tensors at placeholders that disagree with what its operators compute from
    the stored inputs (a convolution "producing" [1, 1, 109, 32] from a frame that gives [1, 8, 109, 32]),
    LiteRT's shapes are the real ones. A model LiteRT cannot run at its stored input shapes keeps the file's
    shapes; the conversion's checks then say which disagree, and :func:`placeholder_hint` what to give.
    """
    if not has_placeholders(model):
        return model
    stored = {index: tuple(model.tensors[index].shape) for index in model.inputs}
    try:
        return with_shapes_at(model, stored)
    except InputFileError as exc:
        log.info("%s: kept the stored shapes: %s", model.path.name, exc)
        return model


def placeholder_hint(model: Model) -> str:
    """What the user can do when a model with placeholder shapes does not convert at its stored inputs."""
    dynamic = [t for t in (model.tensors[i] for i in model.inputs)
               if t.signature is not None and any(d < 0 for d in t.signature[1:])]
    if not dynamic:
        return ""
    names = ", ".join(f"{t.name!r} (signature {list(t.signature or ())}, stored {list(t.shape)})" for t in dynamic)
    return (f"\n  the model's inputs are dynamic and stored at placeholder shapes: {names}; give their real shapes "
            f"(without batch) in the model's input_shapes")


def with_shapes_at(model: Model, wanted: dict[int, tuple[int, ...]]) -> Model:
    """``model`` with every tensor's shape as LiteRT computes it for the ``wanted`` input shapes, in the main
    graph and in the subgraphs its operators call (branches, loop bodies)."""
    if not wanted:
        return model
    shapes = _litert_shapes(model.path, wanted, len(model.subgraphs) + 1)
    graphs = [_reshaped(model.subgraph(k), shapes.get(k, {})) for k in range(len(model.subgraphs) + 1)]
    changed = sum(1 for k, graph in enumerate(graphs)
                  for old, new in zip(model.subgraph(k).tensors, graph.tensors) if old.shape != new.shape)
    log.info("%s: %d tensor shapes recomputed by LiteRT at the given input shapes", model.path.name, changed)
    return dataclasses.replace(graphs[0], subgraphs=tuple(graphs[1:]))


def _reshaped(graph: Model, shapes: dict[int, tuple[int, ...]]) -> Model:
    tensors = tuple(dataclasses.replace(t, shape=shapes.get(t.index, t.shape)) for t in graph.tensors)
    return dataclasses.replace(graph, tensors=tensors)


def _litert_shapes(path: Path, wanted: dict[int, tuple[int, ...]], subgraphs: int
                   ) -> dict[int, dict[int, tuple[int, ...]]]:
    """Subgraph index -> tensor index -> shape, after one invocation at the ``wanted`` input shapes."""
    names = ", ".join(f"{list(shape)}" for shape in wanted.values())
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        raise InputFileError(path, f"its inputs are dynamic and its stored shapes are placeholders; computing the "
                                   f"shapes at {names} needs LiteRT: pip install ai-edge-litert") from None
    try:
        with warnings.catch_warnings():  # "preserve_all_tensors is for debugging": here it is what we need
            warnings.simplefilter("ignore")
            interpreter = Interpreter(model_path=str(path), num_threads=1, experimental_preserve_all_tensors=True,
                                      experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        for index, shape in wanted.items():
            interpreter.resize_tensor_input(index, list(shape), strict=False)
        interpreter.allocate_tensors()
        for detail in interpreter.get_input_details():
            interpreter.set_tensor(detail["index"], np.zeros(detail["shape"], detail["dtype"]))
        interpreter.invoke()
    except (RuntimeError, ValueError) as exc:
        reason = " ".join(str(exc).split())[:300]
        raise InputFileError(path, f"LiteRT cannot run the model at input shape(s) {names}: {reason}") from None
    return {k: {d["index"]: tuple(int(x) for x in d["shape"]) for d in interpreter.get_tensor_details(k)}
            for k in range(subgraphs)}
