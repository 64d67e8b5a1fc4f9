"""What every stage's ``run`` receives: one typed, frozen parameter object, its files, and where to say
what went wrong. Nothing here knows about doit, the state dir or the cache's storage layout.

``params`` is exactly what the build digests into the task key (``engine/task_key.py``: doit's up-to-date
check and the artifact cache), so a stage cannot depend on a setting the build does not track. Positions in the
YAML (``locate``) are not parameters: moving a line does not rebuild anything.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from accelbuild.errors import Locator, Where  # noqa: F401  (ctx.locate is a Locator)


class CachedBytes(Protocol):
    def read_bytes(self) -> bytes: ...


class SplitCache(Protocol):
    """The part of the artifact cache a stage may use for finer-grained units of its own."""

    def lookup(self, key: str) -> Mapping[str, CachedBytes] | None: ...

    def store(self, key: str, files: Mapping[str, Path | bytes]) -> None: ...


class FanOut(Protocol):
    """Where a stage's own parallel work may go (the build's Dask cluster): ``ctx.fan_out``."""

    address: str

    def map(self, fn: Callable[[Any, Any], Any], items: Sequence[Any], shared: Any) -> Iterator[Any]:
        """``fn(item, shared)`` for every item, elsewhere; results in completion order."""


@dataclass(frozen=True)
class StageContext:
    """A stage's whole world: ``run(ctx)`` reads ``inputs`` and ``params``, writes every path of ``outputs``
    (a name ending in ``/`` is a folder it fills), and nothing else."""

    params: Any  # the stage's frozen parameter dataclass
    inputs: dict[str, Path]
    outputs: dict[str, Path]
    locate: Locator
    cache: SplitCache | None = None  # for stages that cache finer-grained units of their own
    jobs: int = 1  # processes a stage may use for its own parallel work (does not change its outputs)
    fan_out: FanOut | None = None  # the build's executor, for a stage that fans out work (else local processes)
    code_digest: Callable[[tuple[str, ...]], str] | None = None  # digest of accelbuild modules' source, by name
    # False where the outputs are only looked at, never kept (``validate``): a stage may skip the figures it
    # measures for its record (crop's composition check), never a check whose failure is the user's to hear
    measured: bool = True


def jsonable(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """The canonical JSON form of a parameter object (what is digested and shown by ``status``).

    Paths are refused: a parameter that holds an absolute path would make cache keys depend on where
    the checkout lives. Files are stage inputs (hashed by content), never parameters.
    """
    if hasattr(value, "as_param"):  # a spec value with its own canonical form (input shapes)
        return jsonable(value.as_param(), memo)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name), memo) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):  # ``memo`` (by object): a profile shared by many tasks' params is walked once
        if memo is not None and id(value) in memo:
            return memo[id(value)][1]
        result = {str(k): jsonable(v, memo) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
        if memo is not None:  # the dict is kept with its form: a freed dict's id, given to a new one, would hit
            memo[id(value)] = (value, result)
        return result
    if isinstance(value, (list, tuple)):
        return [jsonable(v, memo) for v in value]
    if isinstance(value, Path):
        raise TypeError(f"a stage parameter holds a path ({value}); make the file a stage input instead")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"a stage parameter of type {type(value).__name__} has no canonical JSON form")
