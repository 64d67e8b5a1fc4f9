"""Which TFLite operators convert, and why the others do not.

One source for two outputs: :func:`find_unsupported` runs every operator's checks and
:func:`unsupported_error` turns the failures into one exit-2 message listing them all, while
:func:`rows` lists the same checks' documentation for ``docs/supported_ops.md``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelbuild.errors import InputFileError
from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops import CUSTOM_OPS, GENERIC_CHECKS, OPS, OpSpec, spec_for
from accelbuild.frontends.tflite.reader import Operator, Tensor
from accelbuild.frontends.tflite.tensors import IO_QUANTIZED_TYPES, NUMPY_TYPES, is_quantized, onnx_type

_PREDICATE_ERRORS = (IndexError, ValueError, TypeError, ZeroDivisionError, KeyError, AttributeError)
OTHER_CUSTOM = "not converted: reported as \"custom operator '<code>' has no converter\""
IO_CONDITION = ("graph inputs and outputs are float32, int32, int64, bool, or int8/uint8/int16 with "
                "quantization parameters (kept integer, with DequantizeLinear / QuantizeLinear at the edges)")


_HOST = "export the model without it (the graph cut before or after it) and run that part on the host"
# builtin operators ONNX and a static-shape accelerator graph cannot express, with what the user can do
REFUSED: dict[str, str] = {
    **dict.fromkeys(("HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_LOOKUP", "HASHTABLE_SIZE"),
                    "a hash table resource (usually over strings); " + _HOST),
    **dict.fromkeys(("RANDOM_STANDARD_NORMAL", "RANDOM_UNIFORM", "MULTINOMIAL", "STABLEHLO_RNG_BIT_GENERATOR"),
                    "draws random numbers, which no converted result can reproduce; give the random values as a "
                    "model input instead"),
    **dict.fromkeys(("WHERE", "UNIQUE"),
                    "its output size depends on the values (a shape no static graph has); " + _HOST),
    **dict.fromkeys(("LSH_PROJECTION", "SKIP_GRAM"), "hashing or text features; " + _HOST),
    "BITCAST": "reinterprets a tensor's bits as another type, which ONNX cannot express; " + _HOST,
}


@dataclass(frozen=True)
class Problem:
    """One unsupported operator (or graph input/output) and the reason."""

    op: str
    tensor: str
    reason: str

    def __str__(self) -> str:
        return f"  {self.op} (tensor {self.tensor!r}): {self.reason}"


def operator_problem(g: Graph, op: Operator) -> str | None:
    """The first failing check's reason, or None when the operator converts."""
    spec = spec_for(op)
    if spec is None:
        if op.name == "CUSTOM":
            return f"custom operator {op.custom_code!r} has no converter"
        return f"not converted: {REFUSED[op.name]}" if op.name in REFUSED else "no converter for this builtin operator"
    for check in (*GENERIC_CHECKS, *spec.checks):
        try:
            ok, reason = check(g, op)
        except _PREDICATE_ERRORS as exc:
            ok, reason = False, f"inconsistent operator ({type(exc).__name__}: {exc})"
        if not ok:
            return reason
    return None


def find_unsupported(g: Graph, skip: set[int]) -> list[Problem]:
    """Every problem of the model, operators in file order, then graph inputs and outputs."""
    problems = []
    for op in g.model.operators:
        reason = None if op.index in skip else operator_problem(g, op)
        if reason is not None:
            tensor = g.names[op.outputs[0]] if op.outputs else f"operator {op.index}"
            problems.append(Problem(op.name, tensor, reason))
    computed = {index for op in g.model.operators if op.index not in skip for index in op.outputs}
    for kind, indices in (("graph input", g.model.inputs), ("graph output", g.model.outputs)):
        for index in indices:
            reason = io_problem(g.tensor(index))
            if kind == "graph output" and index not in computed:
                reason = "a constant or graph input passed through, not computed by an operator"
            if reason is not None:
                problems.append(Problem(kind, g.names[index], reason))
    return problems


def io_problem(tensor: Tensor) -> str | None:
    """Why a graph input/output cannot be an ONNX graph input/output, or None."""
    if onnx_type(tensor) is None or (is_quantized(tensor) and tensor.dtype not in IO_QUANTIZED_TYPES):
        return f"type {tensor.dtype} is not supported"
    if not is_quantized(tensor):
        return None
    q, info = tensor.quant, np.iinfo(NUMPY_TYPES[tensor.dtype])
    if not all(math.isfinite(s) and s > 0 for s in q.scale):
        return f"quantization scales {list(q.scale)} are not positive"
    if any(not info.min <= z <= info.max for z in q.zero_point) or len(q.zero_point) not in (0, 1, len(q.scale)):
        return f"zero points {list(q.zero_point)} do not fit {tensor.dtype} or the scales"
    if len(q.scale) > 1 and not (0 <= q.axis < len(tensor.shape) and tensor.shape[q.axis] == len(q.scale)):
        return f"{len(q.scale)} scales do not match axis {q.axis} of shape {list(tensor.shape)}"
    return None


def unsupported_error(path: Path, problems: list[Problem]) -> InputFileError:
    lines = "\n".join(str(p) for p in problems)
    return InputFileError(path, f"unsupported TFLite operators: {len(problems)}\n{lines}")


def rows() -> list[tuple[str, str]]:
    """``(operator, conversion and conditions)`` rows for the supported-operators document."""
    general = [IO_CONDITION, *(c.doc for c in GENERIC_CHECKS)]
    result = [("(every operator)", "; ".join(general))]
    result += [(name, _describe(OPS[name])) for name in sorted(OPS)]
    result += [(custom_row(code), _describe(CUSTOM_OPS[code])) for code in sorted(CUSTOM_OPS)]
    result.append(("CUSTOM (any other custom_code)", OTHER_CUSTOM))
    result += [(name, f"not converted: {REFUSED[name]}") for name in sorted(REFUSED)]
    return result


CONFORMANCE_FILE = Path(__file__).resolve().parent / "conformance.json"


def conformance_markdown() -> str:
    """docs/supported_ops.md's TFLite conformance section, from the suite's recorded outcomes."""
    record = json.loads(CONFORMANCE_FILE.read_text())
    figures, operators = record["summary"], record["operators"]
    reproduced = sorted(name for name, entry in operators.items() if entry["status"] == "reproduced")
    others = sorted((name, entry) for name, entry in operators.items() if entry["status"] != "reproduced")
    lines = [
        "\n## TFLite conformance\n",
        "One single-operator model per builtin operator that LiteRT's builtin op resolver has a kernel for "
        f"({figures['operators']} of the `tflite.BuiltinOperator` names: the ones an interpreter can be built for), "
        "converted by the frontend, run in onnxruntime and compared with LiteRT on the same seeded inputs "
        "(`tests/frontends/test_tflite_conformance.py`; the models are `accelbuild/testing/tflite_op_cases.py`). "
        f"Reproduced: **{figures['reproduced']} of {figures['operators']} ({figures['reproduced_pct']}%)**; "
        f"refused: {figures['refused']}; wrong results: {figures['wrong']}; crashes: {figures['crash']}.\n",
        "Reproduced: " + ", ".join(f"`{name}`" for name in reproduced) + ".\n",
        "| Operator | Outcome |\n|---|---|",
        *(f"| {name} | {entry['status']}: {entry['message'].replace('|', chr(92) + '|')} |" for name, entry in others),
    ]
    return "\n".join(lines) + "\n"


def custom_row(custom_code: str) -> str:
    """The document's name for a ``CUSTOM`` operator with this code."""
    return f"CUSTOM {custom_code}"


def _describe(spec: OpSpec) -> str:
    conditions = "; ".join(c.doc for c in spec.checks)
    return f"{spec.onnx}. Requires: {conditions}" if conditions else spec.onnx
