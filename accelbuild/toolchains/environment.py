"""Creating, finding and describing toolchain environments (``<root>/<name>-<digest>/``).

An environment is a plain venv made with the first interpreter in the toolchain's Python range, its packages
installed by this interpreter's pip (``pip --python``) with ``--no-deps`` from the pinned list, then checked:
every pin installed at its version. It is built in a private folder and renamed into place with its record
(``toolchain.json``) inside, so a killed install leaves nothing that looks usable.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbuild.errors import UserError
from accelbuild.toolchains.declaration import Toolchain, _canonical
from accelbuild.util.files import write_json_atomic

log = logging.getLogger(__name__)

ROOT_ENV = "ACCELBUILD_TOOLCHAINS_DIR"  # where environments live; run/status set it to <cache dir>/toolchains
RECORD = "toolchain.json"
_LIST_PACKAGES = ("import importlib.metadata as m, json, sys; print(json.dumps({'version': list(sys.version_info[:2]),"
                  " 'packages': sorted(d.metadata['Name'] + '==' + d.version for d in m.distributions())}))")


class ToolchainError(UserError):
    """A toolchain that is missing, broken or cannot be installed here: exit 2, with the command that fixes it."""


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Environment:
    """A usable toolchain: the interpreter to run drivers with and the package set it holds."""

    name: str
    python: Path
    packages: tuple[str, ...]  # name==version, canonical order
    version: tuple[int, int]
    folder: Path | None  # None: an environment the user gave (target.toolchain.python)

    @property
    def identity(self) -> str:
        """The resolved package set, as cache keys hold it."""
        return f"{self.name}; python {self.version[0]}.{self.version[1]}; " + ", ".join(self.packages)


def root(cache_dir: Path | None = None) -> Path:
    """Where environments live: ``cache_dir/toolchains``, else ``$ACCELBUILD_TOOLCHAINS_DIR``, else
    ``$ACCELBUILD_CACHE_DIR/toolchains``, else ``.accelbuild/cache/toolchains`` here."""
    if cache_dir is not None:
        return Path(cache_dir) / "toolchains"
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV])
    if os.environ.get("ACCELBUILD_CACHE_DIR"):
        return Path(os.environ["ACCELBUILD_CACHE_DIR"]) / "toolchains"
    return Path(".accelbuild") / "cache" / "toolchains"


def install_command(toolchain: Toolchain) -> str:
    return f"accelbuild toolchain install {toolchain.name}"


def find(toolchain: Toolchain, where: Path | None = None) -> Environment | None:
    """The installed environment of exactly this declaration, or None."""
    folder = (where or root()) / toolchain.folder_name
    try:
        record = json.loads((folder / RECORD).read_text())
    except (OSError, ValueError):
        return None
    python = folder / "bin" / "python"
    if record.get("identity") != toolchain.identity or not python.exists():
        return None
    return Environment(toolchain.name, python, tuple(record["packages"]), tuple(record["version"]), folder)


def require(toolchain: Toolchain, where: Path | None = None) -> Environment:
    """The environment, created on first use (that can take minutes: the log says so)."""
    found = find(toolchain, where)
    if found is not None:
        return found
    log.warning("creating toolchain %s (first use%s) in %s", toolchain.name,
                f"; {toolchain.size_note}" if toolchain.size_note else "", where or root())
    return install(toolchain, where)


def install(toolchain: Toolchain, where: Path | None = None, force: bool = False) -> Environment:
    """Create the environment (again, with ``force``) and return it."""
    base = where or root()
    base.mkdir(parents=True, exist_ok=True)
    with _locked(base / f".{toolchain.folder_name}.lock"):  # one install at a time; the others then find it
        if not force:
            found = find(toolchain, base)
            if found is not None:
                return found
        return _install(toolchain, base)


def _install(toolchain: Toolchain, base: Path) -> Environment:
    target = base / toolchain.folder_name
    python = interpreter(toolchain)
    partial = base / f".{toolchain.folder_name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        _run(toolchain, [str(python), "-m", "venv", "--without-pip", str(partial)], "creating the venv")
        requirements = partial / "requirements.txt"
        requirements.write_text("".join(f"{p}\n" for p in toolchain.packages))
        _run(toolchain, [sys.executable, "-m", "pip", "--python", str(partial / "bin" / "python"), "install",
                         "--no-deps", "--no-input", "--disable-pip-version-check", "-r", str(requirements)],
             "installing its packages")
        described = _describe(partial / "bin" / "python", toolchain)
        _check_pins(toolchain, described["packages"])
        write_json_atomic(partial / RECORD, {"identity": toolchain.identity, "packages": described["packages"],
                                             "version": described["version"], "python": str(python)})
        if target.exists():
            shutil.rmtree(target)
        os.rename(partial, target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    found = find(toolchain, base)
    assert found is not None, f"{target}: the record just written does not read back"
    log.info("toolchain %s ready in %s", toolchain.name, target)
    return found


def user_environment(toolchain: Toolchain, python: Path) -> Environment:
    """``target.toolchain: {python: PATH}``: an environment the user made; its own package set is its identity."""
    if not Path(python).exists():
        raise ToolchainError(f"target.toolchain.python: {python} does not exist (or drop the key and let "
                             f"accelbuild make the environment: {install_command(toolchain)})")
    described = _describe(Path(python), toolchain)
    version = tuple(described["version"])
    if not toolchain.accepts(version):
        raise ToolchainError(f"target.toolchain.python: {python} is Python {version[0]}.{version[1]}; toolchain "
                             f"{toolchain.name} needs Python {toolchain.python_text()}")
    return Environment(toolchain.name, Path(python), tuple(described["packages"]), version, None)


def interpreter(toolchain: Toolchain) -> Path:
    """The first Python in the toolchain's range: this one, else ``python3.X`` on PATH, newest first."""
    if toolchain.accepts(sys.version_info[:2]):
        return Path(sys.executable)
    (lo, hi) = toolchain.python
    tried = [f"{sys.version_info[0]}.{sys.version_info[1]} ({sys.executable})"]
    for minor in range(hi[1] - 1 if hi[0] == lo[0] else 20, lo[1] - 1, -1):
        found = shutil.which(f"python{lo[0]}.{minor}")
        if found:
            return Path(found)
        tried.append(f"python{lo[0]}.{minor} (not on PATH)")
    raise ToolchainError(f"toolchain {toolchain.name} needs Python {toolchain.python_text()}; tried "
                         f"{', '.join(tried)}. Install one (e.g. apt install python3.11), then run "
                         f"{install_command(toolchain)}")


def _describe(python: Path, toolchain: Toolchain) -> dict:
    try:
        done = subprocess.run([str(python), "-I", "-c", _LIST_PACKAGES], capture_output=True, text=True, timeout=120)
    except OSError as e:
        raise ToolchainError(f"toolchain {toolchain.name}: {python} does not run ({e})") from None
    if done.returncode != 0:
        raise ToolchainError(f"toolchain {toolchain.name}: {python} does not run: {done.stderr.strip()[-500:]}")
    described = json.loads(done.stdout)
    described["packages"] = sorted(_canonical(p) for p in described["packages"])
    return described


def _check_pins(toolchain: Toolchain, installed: list[str]) -> None:
    """Every pin installed at its version (a pin without a local label, ``torch==2.13.0``, is met by any local
    build of that version, ``2.13.0+cpu``, as pip itself reads it)."""
    have = set(installed) | {p.split("+")[0] for p in installed}
    missing = sorted(set(toolchain.pins) - have)
    if missing:
        raise ToolchainError(f"toolchain {toolchain.name}: after installing, these pins are not what the "
                             f"environment holds: {', '.join(missing)}")


def _run(toolchain: Toolchain, command: list[str], what: str) -> None:
    log.info("toolchain %s: %s", toolchain.name, " ".join(command))
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-12:])
        raise ToolchainError(f"toolchain {toolchain.name}: {what} failed:\n{tail}\n"
                             f"Fix the cause, then run {install_command(toolchain)}")


@dataclass(frozen=True)
class ToolchainRef:
    """A stage parameter naming the environment a stage runs its driver in. Its canonical form (what the build
    digests) is the package set alone, never a path: the managed environment is found again where the stage
    runs; a user's interpreter (``target.toolchain.python``) is keyed on what it holds, read at plan time."""

    toolchain: Toolchain
    user_python: str | None = None
    user_identity: str | None = None

    @classmethod
    def of(cls, toolchain: Toolchain, user_python: Path | None) -> ToolchainRef:
        if user_python is None:
            return cls(toolchain)
        return cls(toolchain, str(user_python), user_environment(toolchain, user_python).identity)

    @staticmethod
    def python_given(target: dict[str, Any], checker: Any) -> Path | None:
        """``target.toolchain.python`` resolved against the YAML's folder (missing: said at the key), or None."""
        given = (target.get("toolchain") or {}).get("python")
        return checker.existing(("target", "toolchain", "python"), given) if given is not None else None

    @classmethod
    def checked(cls, toolchain: Toolchain, user_python: Path | None, checker: Any) -> ToolchainRef:
        """``of``, with a user's environment that cannot be used said at ``target.toolchain.python`` (exit 2)."""
        try:
            return cls.of(toolchain, user_python)
        except ToolchainError as error:
            checker.error(("target", "toolchain", "python"), str(error))
            return cls(toolchain)

    @property
    def identity(self) -> str:
        return self.user_identity or self.toolchain.identity

    def as_param(self) -> str:
        return self.identity

    def version_of(self, distribution: str) -> str | None:
        """The version of one distribution in the environment this names."""
        if self.user_identity is None:
            return self.toolchain.version_of(distribution)
        wanted = _canonical(f"{distribution}==").partition("==")[0]
        found = [pin.partition("==") for pin in self.user_identity.rpartition("; ")[2].split(", ")]
        return next((version for name, _, version in found if name == wanted), None)

    def environment(self) -> Environment:
        """The environment to run in (the managed one is created on first use)."""
        if self.user_python is not None:
            return user_environment(self.toolchain, Path(self.user_python))
        return require(self.toolchain)
