"""One exception hierarchy for the whole tool.

``UserError`` and its subclasses are mistakes the user can fix (a config, a model file, a command line):
the CLI prints their message and exits 2, never a traceback. Any other ``AccelbuildError`` is a stage
that failed on valid input (exit 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class AccelbuildError(Exception):
    """Base class of every error accelbuild raises on purpose."""

    exit_code = 1

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as it is, whatever its ``__init__`` takes: errors cross processes (Dask workers, pools),
        and ``Exception``'s default would call ``__init__`` again with the message alone."""
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(cls: type[AccelbuildError], args: tuple[Any, ...], state: dict[str, Any]) -> AccelbuildError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class StageError(AccelbuildError):
    """A stage could not do its job on valid input."""


class UserError(AccelbuildError):
    """A mistake in what the user gave us; reported without a traceback, exit 2."""

    exit_code = 2


@dataclass(frozen=True, order=True)
class Where:
    """A position in a user's file: 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class ConfigError(UserError):
    """One or more positioned messages about a pipeline config."""

    def __init__(self, where: Where | str, message: str, snippet: str = "") -> None:
        self.where = where
        self.message = message
        self.snippet = snippet
        super().__init__(f"{where}: {message}")


class ConfigErrors(UserError):
    """Several config errors reported together (all of a file's schema errors, say)."""

    def __init__(self, errors: list[ConfigError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


class InputFileError(UserError):
    """A model, data or profile file that cannot be used: ``file: message``."""

    def __init__(self, path: object, message: str) -> None:
        self.path = str(path)
        self.message = message
        super().__init__(f"{self.path}: {message}")


def render_user_error(exc: UserError) -> str:
    """The full text shown for a user error: each message, with its source snippet where known."""
    errors = exc.errors if isinstance(exc, ConfigErrors) else [exc]
    lines = []
    for error in errors:
        lines.append(str(error))
        if isinstance(error, ConfigError) and error.snippet:
            lines.append(error.snippet)
    return "\n".join(lines)


@dataclass(frozen=True)
class Locator:
    """Positions in the pipeline YAML for messages, relative to ``prefix`` (``("models", 2)`` for a
    model's stages). Picklable: it travels to worker processes with the job."""

    document: Any  # accelbuild.config.yaml_source.YamlDocument
    prefix: tuple[str | int, ...] = ()

    def __call__(self, *path: str | int, key: bool = False) -> Where:
        return self.document.where(self.prefix + tuple(path), key=key)

    def absolute(self, *path: str | int, key: bool = False) -> Where:
        """A position outside the prefix (a pipeline-level key from a model's stage)."""
        return self.document.where(tuple(path), key=key)
