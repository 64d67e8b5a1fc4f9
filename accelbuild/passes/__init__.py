"""Graph processing after import: named passes in a fixed order, the graph checked after each.

Every pass is ``fn(model) -> notes`` and changes the model in place; the notes (what it changed) go into
the import record. All passes here are lossless; a pass that approximates must say so with
``approximate=True``, which the record shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import onnx

from accelbuild.errors import StageError
from accelbuild.passes.activations import mark_fused_activations
from accelbuild.passes.batchnorm import fold_batchnorm
from accelbuild.passes.cleanup import name_nodes, prune_unused, remove_identities
from accelbuild.passes.decompose import decompose
from accelbuild.passes.fold_constants import fold_constants
from accelbuild.passes.opset import convert_opset

MAX_NOTES = 50


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[onnx.ModelProto], list[str]]
    approximate: bool = False


PASSES: tuple[Pass, ...] = (
    Pass("convert_opset", convert_opset),
    Pass("name_nodes", name_nodes),
    Pass("fold_constants", fold_constants),
    Pass("remove_identities", remove_identities),
    Pass("fold_batchnorm", fold_batchnorm),
    Pass("decompose", decompose),
    Pass("mark_fused_activations", mark_fused_activations),
    Pass("prune_unused", prune_unused),
)


def run_passes(model: onnx.ModelProto, passes: tuple[Pass, ...] = PASSES) -> list[dict[str, Any]]:
    """Run ``passes`` in order; returns a record of what each changed."""
    record = []
    for graph_pass in passes:
        notes = graph_pass.run(model)
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as exc:
            raise StageError(f"graph pass {graph_pass.name} produced an invalid graph: {exc}") from exc
        record.append({
            "pass": graph_pass.name,
            "approximate": graph_pass.approximate,
            "changes": len(notes),
            "notes": notes[:MAX_NOTES],
        })
    return record
