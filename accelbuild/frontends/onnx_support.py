"""What the ONNX frontend accepts, as checks whose text is both the error message and the docs row."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import onnx

from accelbuild.errors import InputFileError
from accelbuild.passes.opset import MIN_OPSET, TARGET_OPSET


@dataclass(frozen=True)
class Check:
    subject: str
    condition: str
    problems: Callable[[onnx.ModelProto], list[str]]


def _opset_problems(model: onnx.ModelProto) -> list[str]:
    current = onnx.defs.onnx_opset_version()
    versions = [imp.version for imp in model.opset_import if imp.domain in ("", "ai.onnx")]
    if not versions:  # a model of only other domains has their operators listed instead
        default = [n for n in model.graph.node if n.domain in ("", "ai.onnx")]
        return ["the model imports no ai.onnx opset"] if default or not model.graph.node else []
    if not 1 <= versions[0] <= current:
        return [f"opset {versions[0]} is newer than the newest this onnx knows ({current})"
                if versions[0] > current else f"opset {versions[0]} is not an ai.onnx opset"]
    return []


_KINDS = {"sequence_type": "a sequence", "optional_type": "an optional", "map_type": "a map",
          "sparse_tensor_type": "a sparse tensor", "opaque_type": "an opaque value"}


def _value_problems(model: onnx.ModelProto) -> list[str]:
    problems = []
    for role, values in (("input", model.graph.input), ("output", model.graph.output)):
        for value in values:
            kind = value.type.WhichOneof("value")
            if kind != "tensor_type":
                problems.append(f"{role} {value.name!r} is {_KINDS.get(kind or '', 'of no type')}, not a tensor")
    return problems


def _domain_problems(model: onnx.ModelProto) -> list[str]:
    local = {(f.domain, f.name) for f in model.functions}
    return [
        f"{node.domain}.{node.op_type} (node {node.name or node.output[0]!r})"
        for node in model.graph.node
        if node.domain not in ("", "ai.onnx") and (node.domain, node.op_type) not in local
        and (node.domain, node.op_type) not in DEQUANTIZED_AT_IMPORT
    ]


# vendor operators import turns back into ai.onnx ones (passes/dequantize.py)
DEQUANTIZED_AT_IMPORT = frozenset({("com.microsoft", "DynamicQuantizeLSTM")})


CHECKS = (
    Check("(model)", f"an ai.onnx opset up to the newest onnx knows; older than {TARGET_OPSET}, it is upgraded to "
          f"{TARGET_OPSET} with onnx's version converter, verified in onnxruntime (below {MIN_OPSET} the upgrade "
          "must succeed, else the model is refused); newer opsets are kept as they are", _opset_problems),
    Check("(model inputs and outputs)", "tensors: sequence, optional, map and sparse values are refused at the "
          "model's edges (inside the graph they are fine); an input whose shape the model fixes with a zero-size "
          "dimension is refused as an empty tensor, and so is an output of the accelerated section that has "
          "one (crop it off with crop.outputs); rank-0 (scalar) inputs and outputs are built", _value_problems),
    Check("(every operator)", "operators of the default ai.onnx domain (or functions defined in the model); "
          "ai.onnx.ml and vendor domains such as com.microsoft are not accelerator operators (com.microsoft."
          "DynamicQuantizeLSTM is turned into an LSTM at import)", _domain_problems),
)


def check_supported(model: onnx.ModelProto, path: Path) -> None:
    """Raise one exit-2 error naming the first problem on its line, any others below it."""
    problems = [p for check in CHECKS for p in check.problems(model)]
    if problems:
        more = f" (and {len(problems) - 1} more problem(s):" if len(problems) > 1 else ""
        detail = "".join(f"\n  {p}" for p in problems[1:]) + (")" if more else "")
        raise InputFileError(path, f"unsupported ONNX model: {problems[0]}{more}{detail}")


def rows() -> list[tuple[str, str]]:
    return [(check.subject, check.condition) for check in CHECKS] + [
        ("any ai.onnx operator", ("accepted at import when onnx's checker and shape inference accept it; "
                                  "graph passes fold constants and BatchNorm, remove Identity/Dropout, split n-ary "
                                  "Sum/Max/Min and standalone BatchNorm into binary ops, and turn a ReduceMean over H "
                                  "and W kept 4-D (squeeze-and-excitation pooling) into GlobalAveragePool")),
    ]
