"""Graph processing after import: named passes in a fixed order, the graph checked after each.

Every pass is ``fn(model) -> notes`` and changes the model in place; the notes (what it changed) go into
the import record. All passes here are lossless; a pass that approximates must say so with
``approximate=True``, which the record shows. A ``quiet`` pass (one added after phase 2) is recorded only
when it changed something, so the records of models it does not touch stay as they were.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import onnx

from accelbuild.errors import StageError
from accelbuild.passes import opset
from accelbuild.passes import verify as verify_mod
from accelbuild.passes.activations import mark_fused_activations
from accelbuild.passes.batchnorm import fold_batchnorm, fold_input_scale, fold_pad, fold_scale_shift
from accelbuild.passes.cleanup import name_nodes, prune_unused, remove_identities
from accelbuild.passes.decompose import decompose
from accelbuild.passes.fold_constants import fold_constants
from accelbuild.passes.hard_swish import fuse_hard_swish
from accelbuild.passes.if_branches import specialize_if
from accelbuild.passes.opset import OpsetUpgradeError, convert_opset
from accelbuild.passes.spatial_mean import spatial_mean_to_global_pool
from accelbuild.passes.stable_forms import clip_from_bound, fuse_leaky_relu, stable_variance

MAX_NOTES = 50

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[onnx.ModelProto], list[str]]
    approximate: bool = False
    quiet: bool = False  # recorded only when it changed something


PASSES: tuple[Pass, ...] = (
    Pass("convert_opset", convert_opset),
    Pass("specialize_if", specialize_if, quiet=True),
    Pass("name_nodes", name_nodes),
    Pass("fold_constants", fold_constants),
    Pass("remove_identities", remove_identities),
    Pass("fuse_leaky_relu", fuse_leaky_relu, quiet=True),
    Pass("clip_from_bound", clip_from_bound, quiet=True),
    Pass("stable_variance", stable_variance, quiet=True),
    Pass("fuse_hard_swish", fuse_hard_swish, quiet=True),
    Pass("spatial_mean", spatial_mean_to_global_pool, quiet=True),
    Pass("fold_batchnorm", fold_batchnorm),
    Pass("fold_scale_shift", fold_scale_shift, quiet=True),
    Pass("fold_pad", fold_pad, quiet=True),
    Pass("fold_input_scale", fold_input_scale, quiet=True),
    Pass("decompose", decompose),
    Pass("mark_fused_activations", mark_fused_activations),
    Pass("prune_unused", prune_unused),
)


def run_passes(model: onnx.ModelProto, passes: tuple[Pass, ...] = PASSES, verify: bool = False,
               inputs: list[verify_mod.Feeds] | None = None, shapes_given: bool = False,
               own_inputs: dict[str, onnx.TypeProto] | None = None) -> list[dict[str, Any]]:
    """Run ``passes`` in order; returns a record of what each changed.

    With ``verify``, the result is run against the input model in onnxruntime, on ``inputs`` (the
    model's representative inputs) when given, else on one seeded random sample; if the outputs differ,
    the passes are replayed one at a time and any pass that changes the outputs is skipped (and said so
    in the record), so a pass tripped up by an unusual graph costs optimisation, never correctness.
    Raises ``OpsetUpgradeError`` when the model ends below ``opset.MIN_OPSET`` (its upgrade failed or was
    skipped for changing the outputs), and ``ModelShapeError`` when ``shapes_given`` (the user chose the
    input shapes) and the model fails at them for a shape reason: onnxruntime says so while running it, or
    refuses to load it at them while it loads the model with its inputs typed as ``own_inputs`` (the model
    file's own input shapes), and the passes did not mend it (``if_branches`` keeps the branch that runs).
    """
    reference = onnx.ModelProto()
    reference.CopyFrom(model)
    record = _shown([(graph_pass, _run_one(model, graph_pass, check=False)) for graph_pass in passes])
    problem = _checker_problem(model)  # checked once (it serialises the whole model): the replay names the pass
    if problem is not None:
        model.CopyFrom(reference)
        for graph_pass in passes:
            _run_one(model, graph_pass)
        raise StageError(f"graph passes produced an invalid graph: {problem}")
    if not verify:
        return record
    check = verify_mod.Reference(reference, inputs=inputs)
    if shapes_given and (check.shape_problem or (check.load_failed and own_inputs is not None and
                                                 verify_mod.loads(verify_mod.with_input_types(reference, own_inputs)))) \
            and not verify_mod.Reference(model, inputs=inputs).usable:  # a pass (if_branches) may have mended it
        raise verify_mod.ModelShapeError(check.problem, reference)
    if not check.usable:
        log.warning("graph passes not verified: %s%s", check.problem,
                    "; representative inputs would let import verify them" if check.random else "")
        return record
    error = check.max_relative_error(model)
    if error is not None and error <= verify_mod.TOLERANCE:
        return record + [{"pass": "verify", "approximate": False, "changes": 0,
                          "notes": [f"outputs match the input model (max relative error {error:.1e})"]}]
    log.warning("graph passes changed the model's outputs; replaying them one at a time")
    model.CopyFrom(reference)
    replayed = []
    for graph_pass in passes:
        before = onnx.ModelProto()
        before.CopyFrom(model)
        entry = _run_one(model, graph_pass)
        error = check.max_relative_error(model)
        if error is None or error > verify_mod.TOLERANCE:
            model.CopyFrom(before)
            size = ("outputs no longer computable" if error is None else
                    f"max relative error {error:.2g} against the input model, tolerance {verify_mod.TOLERANCE:g}")
            entry = {**entry, "skipped": True, "notes": [f"skipped: it changed the model's outputs ({size})"]}
            log.warning("graph pass %s skipped: it changed the model's outputs (%s)", graph_pass.name, size)
        replayed.append((graph_pass, entry))
    record = _shown(replayed)
    if opset.default_opset(model) < opset.MIN_OPSET:
        raise OpsetUpgradeError(f"opset {opset.default_opset(model)} could not be upgraded: onnx's version converter "
                           f"changed the model's outputs; export the model with opset {opset.MIN_OPSET} or newer")
    return record


def _shown(entries: list[tuple[Pass, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The record's entries: every pass, except quiet ones that changed nothing."""
    return [entry for graph_pass, entry in entries
            if not graph_pass.quiet or entry["changes"] or entry.get("skipped")]


def _checker_problem(model: onnx.ModelProto) -> str | None:
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        return str(exc)
    return None


def _run_one(model: onnx.ModelProto, graph_pass: Pass, check: bool = True) -> dict[str, Any]:
    """Run one pass; with ``check``, a graph the ONNX checker refuses afterwards is the pass's error."""
    notes = graph_pass.run(model)
    if check:
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as exc:
            raise StageError(f"graph pass {graph_pass.name} produced an invalid graph: {exc}") from exc
    return {
        "pass": graph_pass.name,
        "approximate": graph_pass.approximate,
        "changes": len(notes),
        "notes": notes[:MAX_NOTES],
    }
