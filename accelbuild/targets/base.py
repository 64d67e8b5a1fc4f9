"""The boundary between the build system and a family of accelerators.

The build runs the family-independent stages (import, crop, quantize) itself and asks the pipeline's
target for the rest: a ``Target`` declares its own ``map``, ``assemble`` and ``benchmark`` stages (what
each reads, writes, depends on, and which module runs it), the precision rules the quantize stage must
follow, and the family's part of the quantize stage's parameters and record. Adding a family is a new
package under ``accelbuild/targets/`` and one line in ``FAMILIES``; see docs/architecture.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import onnx

    from accelbuild.config.spec import PipelineSpec
    from accelbuild.stages.declaration import Stage
    from accelbuild.stages.params import PrecisionRules

# family name (target.family) -> module whose TARGET attribute implements it
FAMILIES = {"mx3": "accelbuild.targets.mx3.target", "npu": "accelbuild.targets.npu.target",
            "ethos-u": "accelbuild.targets.ethos_u.target", "cpu": "accelbuild.targets.cpu.target"}


class Target(Protocol):
    family: str
    code: tuple[str, ...]  # packages whose source shapes this family's artifacts (code identity)
    stages: tuple[Stage, ...]  # the family's map, assemble and benchmark stages, in order
    checks: frozenset[str]  # the ``checks`` whose figure this family's benchmark.json carries

    def target_spec(self, data: dict[str, Any], checker: Any) -> Any:
        """The typed ``target`` spec from schema-valid data; problems go to ``checker.error``."""

    def check_pipeline(self, spec: PipelineSpec, checker: Any) -> None:
        """Rules across sections that only this family knows (e.g. closed_loop needs effort: hard)."""

    def precision(self, spec: PipelineSpec) -> PrecisionRules:
        """The precisions the quantize stage may use for this pipeline's target."""

    def quantize_params(self, spec: PipelineSpec) -> Any:
        """The family's part of the quantize stage's parameters (a frozen dataclass)."""

    def quantize_record(self, ai: onnx.ModelProto, params: Any) -> dict[str, Any]:
        """Fields the family adds to quantize.json (mx3: host packet bytes per frame)."""

    def host_nodes(self, ai: onnx.ModelProto, params: Any) -> frozenset[str]:
        """Families that quantize activations: the nodes the host will run, left float in the QDQ model."""


def get_target(family: str) -> Target:
    """The target of ``family`` (imported on first use)."""
    return importlib.import_module(FAMILIES[family]).TARGET
