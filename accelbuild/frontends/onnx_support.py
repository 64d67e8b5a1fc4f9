"""What the ONNX frontend accepts, as checks whose text is both the error message and the docs row."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import onnx

from accelbuild.errors import InputFileError

MIN_OPSET = 11


@dataclass(frozen=True)
class Check:
    subject: str
    condition: str
    problems: Callable[[onnx.ModelProto], list[str]]


def _opset_problems(model: onnx.ModelProto) -> list[str]:
    current = onnx.defs.onnx_opset_version()
    versions = [imp.version for imp in model.opset_import if imp.domain in ("", "ai.onnx")]
    if not versions:
        return ["the model imports no ai.onnx opset"]
    if not MIN_OPSET <= versions[0] <= current:
        return [f"opset {versions[0]} is outside {MIN_OPSET}..{current}"]
    return []


def _domain_problems(model: onnx.ModelProto) -> list[str]:
    local = {(f.domain, f.name) for f in model.functions}
    return [
        f"{node.domain}.{node.op_type} (node {node.name or node.output[0]!r})"
        for node in model.graph.node
        if node.domain not in ("", "ai.onnx") and (node.domain, node.op_type) not in local
    ]


CHECKS = (
    Check("(model)", f"the ai.onnx opset is {MIN_OPSET} to the newest onnx knows; it is converted to one "
          "opset (21) with onnx's version converter", _opset_problems),
    Check("(every operator)", "operators of the default ai.onnx domain (or functions defined in the model); "
          "ai.onnx.ml and vendor domains such as com.microsoft are not accelerator operators", _domain_problems),
)


def check_supported(model: onnx.ModelProto, path: Path) -> None:
    """Raise one exit-2 error listing every problem, like the TFLite frontend does."""
    problems = [p for check in CHECKS for p in check.problems(model)]
    if problems:
        lines = "\n".join(f"  {p}" for p in problems)
        raise InputFileError(path, f"unsupported ONNX model: {len(problems)} problem(s)\n{lines}")


def rows() -> list[tuple[str, str]]:
    return [(check.subject, check.condition) for check in CHECKS] + [
        ("any ai.onnx operator", "accepted at import when onnx's checker and shape inference accept it; "
         "graph passes fold constants and BatchNorm, remove Identity/Dropout, split n-ary Sum/Max/Min "
         "and standalone BatchNorm into binary ops"),
    ]
