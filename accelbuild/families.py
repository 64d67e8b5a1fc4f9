"""The registered target families: plug-ins found through the entry-point group ``accelbuild.families``.

A distribution registers a family as ``name = "package.module"`` (the module whose ``TARGET`` implements
``accelbuild.targets.base.Target``) or ``name = "package.module:OBJECT"``; accelbuild registers mx3, npu and
ethos-u the same way. Next to that module lies the family's schema fragment ``target.schema.json`` (its
``target`` branch, a one-line summary, its own checks), read without importing the family: validating a
pipeline imports only the family it names, and a no-op run none of the others.

This module imports nothing of accelbuild but ``errors``, so ``config``, ``stages`` and ``engine`` can look
families up here while the family API (``targets/base.py``, which names their types) sits above them.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from accelbuild.errors import UserError

log = logging.getLogger(__name__)

GROUP = "accelbuild.families"
DEFAULT = "mx3"  # target.family when a pipeline names none
FRAGMENT = "target.schema.json"  # beside the entry point's module


class FamilyError(UserError):
    """A family plug-in that cannot be used (unknown name, missing or inconsistent fragment)."""


@dataclass(frozen=True)
class Check:
    """One ``checks:`` key: the figure it reads, which way it bounds it, and the value it takes."""

    name: str  # the YAML key, e.g. min_fps
    metric: str  # the figure in the build's metrics (engine/metrics.py), e.g. fps
    direction: Literal["min", "max"]  # min: the figure must be at least the value (higher is better)
    unit: str
    description: str  # one line, shown in the schema and docs/pipeline-reference.md
    source: str | None = None  # a family's own figure: its dotted path in benchmark.json; None: computed by core
    schema: Mapping[str, Any] = field(default_factory=dict)  # the JSON Schema of the value (type, bounds)

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "min"

    def passes(self, required: float, measured: float) -> bool:
        return measured >= required if self.direction == "min" else measured <= required

    def as_schema(self) -> dict[str, Any]:
        return {"description": self.description, **self.schema}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Check:
        return cls(data["name"], data["metric"], data["direction"], data["unit"], data["description"],
                   data.get("source"), dict(data.get("schema", {})))


# the figures every family's benchmark.json carries (its contract fields), so every family offers these
STANDARD_CHECKS = (
    Check("min_fps", "fps", "min", "frames/s", "Least total frames per second (simulated or estimated by the target).",
          schema={"type": "number", "exclusiveMinimum": 0}),
    Check("max_latency_ms", "latency_ms", "max", "ms", "Most latency in milliseconds of any model.",
          schema={"type": "number", "exclusiveMinimum": 0}),
    Check("min_cosine", "min_cosine", "min", "cosine", "Least output cosine similarity against float, for every model: its worst held-out frame with signal (docs/contract.md, accuracy records).",
          schema={"type": "number", "minimum": -1, "maximum": 1}),
)


@dataclass(frozen=True)
class ProgramFile:
    """A file a family's builds ship that ``accelbuild inspect`` and ``bench`` read, chosen by its first bytes
    (``magic``) or else its name's ending (``suffixes``). Handlers are ``"module:function"``, imported on use:
    ``inspect(path, shown) -> str``; ``bench(path, shown, frames) -> (report dict, text)``; ``parts(data) ->
    [(start, end), ...]``, the byte ranges of its sections, which the artifact cache stores once each by
    content (``engine/file_parts.py``; ranges that are wrong only cost sharing, never bytes)."""

    description: str  # "mx3 DFP program file"
    suffixes: tuple[str, ...]
    magic: tuple[bytes, ...]
    inspect: str
    bench: str | None = None
    parts: str | None = None


@dataclass(frozen=True)
class Family:
    """One registered family: its name, where it lives, and its fragment (read on first use)."""

    name: str
    value: str  # the entry point's value: "module" or "module:object"
    dist: Any = field(default=None, compare=False, repr=False)  # the importlib.metadata distribution behind it

    @cached_property
    def distribution(self) -> str | None:
        """The name of the distribution that registered it (accelbuild for the built-in ones). Read on use: its
        METADATA holds the whole README, and only ``builtin()`` asks."""
        return self.dist.metadata["Name"] if self.dist is not None else None

    @property
    def module(self) -> str:
        return self.value.partition(":")[0]

    @cached_property
    def fragment_path(self) -> Path:
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError) as exc:
            raise FamilyError(f"family {self.name}: cannot find module {self.module} ({exc})") from None
        if spec is None or spec.origin is None:
            raise FamilyError(f"family {self.name}: no module {self.module} (entry point {GROUP})")
        return Path(spec.origin).parent / FRAGMENT

    @cached_property
    def fragment(self) -> dict[str, Any]:
        """The family's ``target.schema.json``: ``family``, ``summary``, ``target`` (its branch), ``checks``."""
        try:
            data = json.loads(self.fragment_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise FamilyError(f"family {self.name}: unreadable schema fragment {self.fragment_path} ({exc})") from None
        if not isinstance(data, dict) or data.get("family") != self.name or not isinstance(data.get("target"), dict):
            raise FamilyError(f"family {self.name}: {self.fragment_path} must be an object with family: "
                              f"{self.name!r} and its target branch under 'target'")
        return data

    @cached_property
    def checks(self) -> dict[str, Check]:
        """Every check of this family's builds: the standard ones, then its own."""
        own = [Check.from_json(c) for c in self.fragment.get("checks", [])]
        return {c.name: c for c in (*STANDARD_CHECKS, *own)}

    @cached_property
    def target(self) -> Any:
        """The family's ``Target`` (imports its module)."""
        module, _, attribute = self.value.partition(":")
        loaded = importlib.import_module(module)
        target = getattr(loaded, attribute or "TARGET")
        if getattr(target, "family", None) != self.name:
            raise FamilyError(f"family {self.name}: {self.value} gives a target of family "
                              f"{getattr(target, 'family', None)!r}")
        return target


def _ordered(found: dict[str, Family]) -> dict[str, Family]:
    """The default family first, then by name (entry-point discovery order depends on sys.path)."""
    names = sorted(found, key=lambda n: (n != DEFAULT, n))
    return {n: found[n] for n in names}


@cache
def registered() -> dict[str, Family]:
    """Every family registered in this environment, by name."""
    found: dict[str, Family] = {}
    for point in metadata.entry_points(group=GROUP):
        family = Family(point.name, point.value, getattr(point, "dist", None))
        if point.name in found and found[point.name].value != point.value:
            log.warning("family %s is registered twice (%s and %s); using %s", point.name,
                        found[point.name].value, point.value, found[point.name].value)
            continue
        found.setdefault(point.name, family)
    return _ordered(found)


def builtin() -> dict[str, Family]:
    """The families accelbuild itself registers (the committed pipeline schema is assembled from these)."""
    return {n: f for n, f in registered().items() if f.distribution == "accelbuild"}


def family(name: str) -> Family:
    try:
        return registered()[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, list(registered()), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise FamilyError(f"unknown target family {name!r} (registered: {', '.join(registered())}){hint}") from None


def get_target(name: str) -> Any:
    """The ``Target`` of family ``name`` (``accelbuild.targets.base.Target``), imported on first use."""
    return family(name).target


@cache
def all_checks() -> dict[str, Check]:
    """Every check any registered family offers: the standard ones, then the families' own by name. Two
    families may offer the same check (npu and ethos-u: max_host_layers) only with the same record."""
    merged = {c.name: c for c in STANDARD_CHECKS}
    own: dict[str, tuple[str, Check]] = {}
    for fam in registered().values():
        for check in fam.checks.values():
            if check.name in merged and check.name not in own:
                if check != merged[check.name]:
                    raise FamilyError(f"family {fam.name}: check {check.name} differs from the standard one")
                continue
            if check.name in own and own[check.name][1] != check:
                raise FamilyError(f"families {own[check.name][0]} and {fam.name} both declare check {check.name}, "
                                  "differently")
            own.setdefault(check.name, (fam.name, check))
    return {**merged, **{name: own[name][1] for name in sorted(own)}}


def program_file(path: Path) -> tuple[str, ProgramFile] | None:
    """(family, its file kind) that reads ``path``: by first bytes, else by the name's ending; None if none."""
    try:
        with path.open("rb") as handle:
            head = handle.read(64)
    except OSError:
        head = b""
    return program_file_of(path.name, head)


def program_file_of(filename: str, head: bytes, family: str | None = None) -> tuple[str, ProgramFile] | None:
    """As ``program_file``, for a file named ``filename`` that starts with ``head``; ``family``: only that
    family's kinds (what a stage of that family wrote), without importing every other family's target."""
    asked = {family: registered()[family]} if family in registered() else registered()
    kinds = [(name, kind) for name, fam in asked.items() for kind in getattr(fam.target, "files", ())]
    for name, kind in kinds:
        if head and any(head.startswith(m) for m in kind.magic):
            return name, kind
    for name, kind in kinds:
        if any(filename.lower().endswith(s) for s in kind.suffixes):
            return name, kind
    return None


def family_of_module(module: str) -> str | None:
    """The registered family whose package holds ``module`` (a stage's module), found without importing it."""
    for name, fam in registered().items():
        package = fam.module.rpartition(".")[0]
        if package and module.startswith(package + "."):
            return name
    return None


def handler(spec: str) -> Any:
    """The function a ``"module:function"`` handler names."""
    module, _, function = spec.partition(":")
    return getattr(importlib.import_module(module), function)
