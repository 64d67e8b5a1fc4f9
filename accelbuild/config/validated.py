"""Configs that passed the schema before, so a no-op run does not validate them again.

Hardware profiles the configs name are recorded the same way. The record is a file of digests in the state
dir. A digest covers the document's data (after ``extends`` and ``matrix``; a profile's text), the schema
(with every registered family's fragment) and accelbuild's version, so any change to one of them validates
again. A missing or unreadable record means every config is validated, as without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelbuild import __version__
from accelbuild.util.files import json_digest, write_bytes_atomic

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
        self._schemas: dict[int, tuple[dict[str, Any], str]] = {}  # id -> (the schema kept alive, its digest)

    def key(self, data: Any, schema: dict[str, Any]) -> str:
        if id(schema) not in self._schemas:  # the schemas are cached objects: one digest each per run
            self._schemas[id(schema)] = (schema, json_digest(schema))
        return json_digest({"data": data, "schema": self._schemas[id(schema)][1], "version": __version__})

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
            # durable=False: the record only saves time; an emptied one holds no digest, so nothing is skipped
            write_bytes_atomic(self.record, ("\n".join(keep) + "\n").encode("ascii"), durable=False)
        except OSError:
            pass
