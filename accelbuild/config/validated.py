"""Configs that passed the schema before, so a no-op run does not validate them again.

Hardware profiles the configs name are recorded the same way. The record is a file of digests in the state
dir. A digest covers the document's data (after ``extends``
and ``matrix``), the assembled schema (with every registered family's fragment) and accelbuild's version,
so any change to one of them validates again. A missing or unreadable record means every config is
validated, as without it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from accelbuild import __version__
from accelbuild.util.files import json_digest

MAX_DIGESTS = 4096  # the record keeps the newest ones
current: ValidatedConfigs | None = None  # the record of the configs being loaded now (profiles use it too)


class ValidatedConfigs:
    def __init__(self, record: Path | None) -> None:
        self.record = record
        self.known: list[str] = []
        self.added: list[str] = []
        if record is not None:
            try:
                self.known = record.read_text(encoding="ascii").split()
            except (OSError, UnicodeDecodeError):
                self.known = []
        self._set = set(self.known)

    def key(self, data: Any, schema: dict[str, Any]) -> str:
        digests = self.__dict__.setdefault("_schemas", {})  # one digest per (cached) schema object per run
        if id(schema) not in digests:
            digests[id(schema)] = (schema, json_digest(schema))
        return json_digest({"data": data, "schema": digests[id(schema)][1], "version": __version__})

    def seen(self, key: str) -> bool:
        return key in self._set

    def add(self, key: str) -> None:
        if key not in self._set:
            self._set.add(key)
            self.added.append(key)

    def save(self) -> None:
        """Write the record (atomically) when something was added; a failure to write only costs time."""
        if self.record is None or not self.added:
            return
        keep = (self.known + self.added)[-MAX_DIGESTS:]
        try:
            self.record.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.record.parent, prefix=".validated-")
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write("\n".join(keep) + "\n")
            os.replace(tmp, self.record)
        except OSError:
            pass
