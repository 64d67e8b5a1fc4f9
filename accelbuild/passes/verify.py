"""Check that graph passes kept the model's function: run before and after in onnxruntime.

Passes are meant to be lossless, but they lean on onnx's shape inference and reference evaluator,
which real exporters sometimes trip up (a scalar losing its rank, a shape inferred differently from
what onnxruntime computes). One sample through both models catches that: the caller's representative
inputs when it has them, else one seeded random sample.

Outputs are compared whatever their kind: tensors by value, sequences element by element, an empty
optional (None) only with another empty one.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import onnx

from accelbuild.util import onnx_graph as g

TOLERANCE = 1e-3  # relative to the output's largest magnitude: folding and BN reorder float rounding
# outputs of these lie in [-1, 1] or [0, 1] by construction, so their errors are relative to that range:
# a detector's probability map saturated at 1e-6 on a random sample would otherwise count a float
# reordering of its logits as a 1 % change (DBNet's BatchNormalization fold was skipped so)
_BOUNDED = {"Sigmoid", "Softmax", "HardSigmoid", "Tanh"}
_PASS_THROUGH = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Flatten"}

Feeds = dict[str, np.ndarray]


# onnxruntime's words for a tensor whose shape an operator cannot take: with static input shapes these
# do not depend on the input values, so they mean the input shapes themselves do not fit the model
_SHAPE_FAILURE = re.compile(r"cannot be reshaped|requested_shape_size|incompatible dimensions|dimension mismatch|"
                            r"invalid input shape|shape mismatch|not broadcastable|attempting to broadcast|"
                            r"invalid dimensions", re.IGNORECASE)


LOAD_FAILURE = "onnxruntime cannot load the model"


class ModelShapeError(Exception):
    """The model cannot run at its static input shapes (an operator refuses a tensor's shape). ``model``: the
    model at those shapes before any pass, to try others on."""

    def __init__(self, problem: str, model: onnx.ModelProto | None = None) -> None:
        super().__init__(problem)
        self.model = model


def with_input_types(model: onnx.ModelProto, types: dict[str, onnx.TypeProto]) -> onnx.ModelProto:
    """A copy of ``model`` with the named inputs typed as given, intermediate and output shapes left to the
    runtime's own inference (so no shape derived from the old input shapes contradicts the new ones)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for value in copy.graph.input:
        if value.name in types:
            value.type.CopyFrom(types[value.name])
    del copy.graph.value_info[:]
    for value in copy.graph.output:
        if value.type.tensor_type.HasField("shape"):
            for dim in value.type.tensor_type.shape.dim:
                dim.Clear()
    return copy


class Reference:
    """The input model's outputs on one sample, to compare processed models against."""

    def __init__(self, model: onnx.ModelProto, seed: int = 0, inputs: list[Feeds] | None = None) -> None:
        from accelbuild.data.random import random_inputs

        self.random = not inputs
        self.feeds = list(inputs or []) or random_inputs(model, 1, seed)
        self.outputs, self.problem = _run(model, self.feeds, "a random sample" if self.random else "the given inputs")
        producers = g.producers(model.graph)
        self.floors = [1.0 if _bounded(producers, v.name) else 0.0 for v in model.graph.output]

    @property
    def shape_problem(self) -> bool:
        """The model failed for a shape, not a value: its input shapes do not fit it."""
        return self.outputs is None and bool(_SHAPE_FAILURE.search(self.problem))

    @property
    def load_failed(self) -> bool:
        """onnxruntime refused the model itself (its own shape inference, an operator it lacks), before any run."""
        return self.outputs is None and self.problem.startswith(LOAD_FAILURE)

    @property
    def usable(self) -> bool:
        return self.outputs is not None

    def max_relative_error(self, candidate: onnx.ModelProto) -> float | None:
        """Largest relative output difference; None if the candidate fails to run or changes shapes."""
        got, _ = _run(candidate, self.feeds)
        if got is None or self.outputs is None or len(got) != len(self.outputs):
            return None
        worst = 0.0
        for want_sample, got_sample in zip(self.outputs, got):
            for a, b, floor in zip(want_sample, got_sample, self.floors):
                error = _relative_error(a, b, floor)
                if error is None:
                    return None
                worst = max(worst, error)
        return worst


def _bounded(producers: dict[str, onnx.NodeProto], name: str) -> bool:
    """Whether output ``name`` comes from a Sigmoid/Softmax/HardSigmoid/Tanh (through reshapes)."""
    node = producers.get(name)
    while node is not None and node.op_type in _PASS_THROUGH and node.input:
        node = producers.get(node.input[0])
    return node is not None and node.op_type in _BOUNDED


def _relative_error(a: Any, b: Any, floor: float = 0.0) -> float | None:
    """Relative difference of two outputs of any kind; None where their structure differs. The scale is
    the output's largest magnitude, at least ``floor``."""
    if a is None or b is None:
        return 0.0 if a is None and b is None else None
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)) or len(a) != len(b):
            return None
        errors = [_relative_error(x, y) for x, y in zip(a, b)]
        return None if any(e is None for e in errors) else max(errors, default=0.0)  # type: ignore[type-var]
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return None
    if a.size == 0:
        return 0.0
    if not np.issubdtype(a.dtype, np.number) or not np.issubdtype(b.dtype, np.number):
        return 0.0 if np.array_equal(a, b) else None
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if not np.array_equal(np.isnan(a64), np.isnan(b64)):
        return float("inf")
    a64, b64 = np.where(np.isnan(a64), 0.0, a64), np.where(np.isnan(b64), 0.0, b64)  # NaN where NaN was
    scale = max(float(np.max(np.abs(a64[np.isfinite(a64)]), initial=0.0)), floor) or 1.0
    same_inf = np.isinf(a64) & (a64 == b64)
    with np.errstate(invalid="ignore"):  # inf - inf where both are the same infinity: masked
        diff = np.where(same_inf, 0.0, np.abs(a64 - b64))
    return float(np.max(diff)) / scale


def _run(model: onnx.ModelProto, feeds: list[Feeds], what: str = "the sample") -> tuple[list[list[Any]] | None, str]:
    """(outputs per sample, "") or (None, what onnxruntime could not do: load the model, or run it on ``what``)."""
    from accelbuild.util import onnx_runtime as measure

    try:
        session = measure.session(model, optimized=False)
    except measure.ModelRunError as exc:
        return None, f"{LOAD_FAILURE} ({_essence(str(exc).partition('(')[2].removesuffix(')'))})"
    names = {i.name for i in session.get_inputs()}
    try:
        return [session.run(None, {k: v for k, v in sample.items() if k in names}) for sample in feeds], ""
    except Exception as exc:  # noqa: BLE001  onnxruntime raises many exception types
        return None, f"onnxruntime cannot run the model on {what} ({_essence(str(exc)) or type(exc).__name__})"


def loads(model: onnx.ModelProto) -> bool:
    """Whether onnxruntime accepts the model (builds a session for it)."""
    from accelbuild.util import onnx_runtime as measure

    try:
        measure.session(model, optimized=False)
    except measure.ModelRunError:
        return False
    return True


def _essence(message: str) -> str:
    """onnxruntime's failure on one line without its C++ source locations: the node and what it says."""
    text = " ".join(message.split())
    text = re.sub(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = re.sub(r"^Node \((.*?)\) Op \((\w+)\) ", r"node '\1' (\2): ", text)
    text = re.sub(r"/onnxruntime_src/\S+ \S*onnxruntime::\S+\(.*?\) ", "", text)
    text = text.replace("Non-zero status code returned while running ", "")
    return text[:400]
