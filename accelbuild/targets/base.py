"""The boundary between the build system and a family of accelerators.

The build runs the family-independent stages (import, crop, quantize) itself and asks the pipeline's
target for the rest: a ``Target`` declares its own ``map``, ``assemble`` and ``benchmark`` stages (what
each reads, writes, depends on, and which module runs it), the precision rules the quantize stage must
follow, the family's part of the quantize stage's parameters and record, the program files ``inspect`` and
``bench`` read, its ``--show-mapping`` view and its sections of docs/supported_ops.md. Its ``target`` keys and
its own ``checks`` are data: the schema fragment ``target.schema.json`` beside the module that defines
``TARGET`` (``accelbuild.families``). ``TargetBase`` gives the optional members (``chip_ops``,
``model_problems``, ``starter_target``, ``platform``, ``device_runtime``) their defaults, so core code calls
them without asking whether they exist. A family is a plug-in registered in the entry-point group
``accelbuild.families``; see "Writing a family" in docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import onnx

    from accelbuild.config.spec import ModelSpec, PipelineSpec
    from accelbuild.families import ProgramFile
    from accelbuild.stages.declaration import Stage
    from accelbuild.stages.params import ActivationParams, PrecisionRules
    from accelbuild.toolchains import Toolchain, ToolchainRef

# a section of docs/supported_ops.md: (title, introduction, rows of (operator, unit and conditions))
SupportSection = tuple[str, str, list[tuple[str, str]]]


@dataclass(frozen=True)
class PlatformRule:
    """What ``accelbuild init --platform P`` means for a family: the target key it fills and its default."""

    meaning: str  # for --help: "the SoC", "the Vela accelerator config"
    default: str | None = None  # written when --platform is left out; None: --platform is required
    required: str = ""  # said when a required --platform is missing: what P may be
    example: str = ""  # for --help, when there is no default: "tda4vm, x5"
    names_family: bool = False  # the platform's names already say the family (the pipeline name leaves it out)

    def help(self) -> str:
        """``npu: the platform (required; e.g. tda4vm, x5)``'s part after the family."""
        if self.default is not None:
            return f"{self.meaning} (default {self.default})"
        return f"{self.meaning} (required; e.g. {self.example})" if self.example else f"{self.meaning} (required)"


class Target(Protocol):
    family: str
    code: tuple[str, ...]  # packages whose source shapes this family's artifacts (code identity)
    stages: tuple[Stage, ...]  # the family's map, assemble and benchmark stages, in order
    files: tuple[ProgramFile, ...]  # the program files its builds ship, for ``inspect`` and ``bench``
    toolchain: Toolchain | None  # a vendor SDK's own environment (``accelbuild.toolchains``), or None
    platform: PlatformRule | None  # what ``init --platform`` fills in, or None: the family takes no platform
    device_runtime: Callable[[], str] | None  # see TargetBase.device_runtime
    no_device_runtime: str  # why the family has no device runtime (said when a pipeline asks for a device)

    def target_spec(self, data: dict[str, Any], checker: Any) -> Any:
        """The typed ``target`` spec from schema-valid data; problems go to ``checker.error``."""

    def toolchain_ref(self, target_spec: Any, checker: Any) -> ToolchainRef:
        """Families with a ``toolchain`` only: the environment a pipeline's vendor-facing stages run in (its
        digest is the package set), from the target spec (``target.toolchain.python``, else the managed one)."""

    quantize_settings: type | None  # the dataclass of its own quantize keys (its fragment's ``quantize``)

    def quantize_spec(self, section: dict[str, Any], at: tuple[Any, ...], checker: Any) -> Any:
        """The family's own keys of a model's quantize section (``section`` with target.quantize and defaults
        merged in), typed: ``ModelSpec.quantize.own``; None for a family without any."""

    def check_pipeline(self, spec: PipelineSpec, checker: Any) -> None:
        """Rules across sections that only this family knows (e.g. closed_loop needs effort: hard)."""

    def precision(self, spec: PipelineSpec) -> PrecisionRules:
        """The precisions the quantize stage may use for this pipeline's target."""

    def activation_params(self, spec: PipelineSpec, model: ModelSpec) -> ActivationParams:
        """Families whose precision quantizes activations (``PrecisionRules.integer``): how the quantize
        stage calibrates ``model``'s, from the family's own quantize keys (``model.quantize.own``)."""

    def quantize_params(self, spec: PipelineSpec) -> Any:
        """The family's part of the quantize stage's parameters (a frozen dataclass)."""

    def quantize_record(self, ai: onnx.ModelProto, params: Any) -> dict[str, Any]:
        """Fields the family adds to quantize.json (mx3: host packet bytes per frame)."""

    def host_nodes(self, ai: onnx.ModelProto, params: Any) -> frozenset[str]:
        """Families that quantize activations: the nodes the host will run, left float in the QDQ model."""

    def show_mapping(self, output_dir: Path) -> str | None:
        """``run --show-mapping``: how the build in ``output_dir`` is laid out (text ending in a newline),
        or None when the family has no such view."""

    def supported_ops(self) -> list[SupportSection]:
        """The family's sections of docs/supported_ops.md (none for a family that runs every operator its
        frontend accepts, or that leaves the question to its compiler)."""

    def chip_ops(self, spec: PipelineSpec) -> frozenset[str] | None:
        """See TargetBase.chip_ops."""

    def model_problems(self, ai: onnx.ModelProto) -> list[str]:
        """See TargetBase.model_problems."""

    def starter_target(self, platform: str | None) -> list[str]:
        """See TargetBase.starter_target."""


class TargetBase:
    """The optional members of a ``Target`` with their defaults: a family subclasses it and overrides what
    it has (every built-in family does; a plug-in may instead define every member itself)."""

    family: str
    toolchain: Toolchain | None = None  # runs in accelbuild's own environment
    platform: PlatformRule | None = None
    # Called on a device (a Dask worker started with the pipeline's ``benchmark.device`` resource,
    # docs/devices.md): the description of that machine and of the runtime that runs the family's builds
    # there (part of the benchmark task's key); raises ``StageError`` when the runtime is missing. None: the
    # family has no device runtime, so a pipeline with ``benchmark.device`` is refused (exit 2 at the key)
    # with ``no_device_runtime`` as the reason.
    device_runtime: Callable[[], str] | None = None
    no_device_runtime: str = "its figures are not measured on a board"
    # the dataclass of the family's own quantize keys (its fragment's ``quantize`` section, built by key): a new
    # key is a field of it, which a family adds by declaring its own subclass of ``ActivationSettings``
    quantize_settings: type | None = None

    def quantize_spec(self, section: dict[str, Any], at: tuple[Any, ...], checker: Any) -> Any:
        """``quantize_settings`` built from the section's data (defaults filled in), or None."""
        from accelbuild.config.spec import build

        return None if self.quantize_settings is None else build(self.quantize_settings, section)

    def show_mapping(self, output_dir: Path) -> str | None:
        return None

    def supported_ops(self) -> list[SupportSection]:
        return []

    def host_nodes(self, ai: onnx.ModelProto, params: Any) -> frozenset[str]:
        return frozenset()

    def chip_ops(self, spec: PipelineSpec) -> frozenset[str] | None:
        """The operator types the family's chip runs, or None (the default): the ai section is what the crop
        points say. With a set, the crop stage moves other operators at the ai section's ends to the host's
        pre/post sections and names those in its middle, which stay (``passes/host_fallback.py``; mx3)."""
        return None

    def model_problems(self, ai: onnx.ModelProto) -> list[str]:
        """What ``validate`` can already say is wrong with a model's AI section for this family (ethos-u:
        operators its TFLite writer cannot emit), one message each; none by default."""
        return []

    def starter_target(self, platform: str | None) -> list[str]:
        """The ``target:`` mapping ``accelbuild init`` writes, as YAML lines (comments allowed, no indent),
        for ``platform`` (``--platform``, else ``self.platform.default``); by default ``family:`` alone."""
        return [f"family: {self.family}"]
