"""What a family declares about its toolchain: a pinned package list and the Pythons it runs on."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!_-]*$")


@dataclass(frozen=True)
class Toolchain:
    """A vendor SDK's environment.

    ``packages`` pins every distribution the environment holds (``name==version``, dependencies included):
    it is installed with ``--no-deps`` exactly as listed, so the list is also the resolved package set that
    every cache key of the family's vendor-facing tasks holds, known without the environment. ``python`` is
    the range of interpreter versions ``(lowest, first excluded)``, e.g. ``((3, 10), (3, 13))``.
    """

    name: str  # the family's name: the folder's and the command's (`accelbuild toolchain install <name>`)
    packages: tuple[str, ...]
    python: tuple[tuple[int, int], tuple[int, int]]
    size_note: str = ""  # what installing it takes, shown by `toolchain list` and the missing-toolchain message
    licence_note: str = ""  # the vendor's licence in one line (never bundled: the user installs it)

    def __post_init__(self) -> None:
        bad = [p for p in self.packages if not _PIN.match(p)]
        if bad:
            raise ValueError(f"toolchain {self.name}: every package must be pinned as name==version: {bad}")
        (lo, hi) = self.python
        if not lo < hi:
            raise ValueError(f"toolchain {self.name}: empty Python range {self.python}")

    @property
    def pins(self) -> tuple[str, ...]:
        """The package list in a canonical order (lower-case names, sorted)."""
        return tuple(sorted(_canonical(p) for p in self.packages))

    @property
    def identity(self) -> str:
        """What a cache key holds: the name, the Python range and every pinned package."""
        lo, hi = self.python
        return f"{self.name}; python >={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}; " + ", ".join(self.pins)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.identity.encode()).hexdigest()[:16]

    @property
    def folder_name(self) -> str:
        return f"{self.name}-{self.digest}"

    def accepts(self, version: tuple[int, int]) -> bool:
        lo, hi = self.python
        return lo <= version < hi

    def python_text(self) -> str:
        lo, hi = self.python
        return f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}"

    def version_of(self, distribution: str) -> str | None:
        """The pinned version of one distribution (by name, case and -/_ insensitive)."""
        wanted = _normal(distribution)
        for pin in self.packages:
            name, _, version = pin.partition("==")
            if _normal(name) == wanted:
                return version
        return None


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _canonical(pin: str) -> str:
    name, _, version = pin.partition("==")
    return f"{_normal(name)}=={version}"
