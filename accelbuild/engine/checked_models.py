"""The state dir's record of models ``validate`` has opened without a problem, by content.

``validate`` runs the import and crop stages on every model (``preflight``): most of its time, and the
reason it imports onnx and onnxruntime at all. A model that passed is recorded under a key
(``task_key.checked_model_key``) that digests everything those checks read: the import job's input files
(the model and its external data, by content), the import and crop tasks' definitions (their parameters
and the code of their stages), accelbuild's version and, where the pipeline's family checks the AI section
itself (``model_problems``), that family's code. The next ``validate`` of the same model with the same
settings says the same without opening it, and repeats the warnings the stages gave. A model with
representative data (``models[].data``: a folder whose images are checked one by one) or per-layer
``bits`` is always checked in full.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from accelbuild.engine.task_key import checked_model_key
from accelbuild.util.files import file_sha256, write_json_atomic

if TYPE_CHECKING:
    from accelbuild.config.spec import PipelineSpec
    from accelbuild.engine.plan import Job

log = logging.getLogger(__name__)

FORMAT = 1


class CheckedModels:
    """Markers in ``folder`` (the state dir's ``checked_models/``), one JSON file per passed model."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def key(self, jobs: Sequence[Job], pipeline: PipelineSpec) -> str | None:
        """The key of one model's import and crop ``jobs``; None where the check is always done in full."""
        from accelbuild.engine.code_identity import code_digest
        from accelbuild.families import get_target

        model = next((m for m in pipeline.models if m.name == jobs[0].model_name), None)
        if model is None or model.data is not None or model.quantize.bits or model.quantize.bits_file is not None:
            return None
        files: dict[str, str] = {}
        for job in jobs:
            if job.stage == "import":
                try:
                    files = {role: file_sha256(path) for role, path in job.inputs.items()}
                except OSError:
                    return None  # a missing model: the full check says so
        family_code = code_digest(tuple(get_target(pipeline.target.family).code))  # its model_problems
        return checked_model_key(pipeline.target.family, [(job.stage, job.param_digest) for job in jobs], files,
                                 family_code)

    def warnings(self, key: str) -> list[str] | None:
        """The warnings recorded with a passed model, or None if ``key`` has not passed."""
        try:
            record = json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            return None
        return [str(w) for w in record.get("warnings", [])]

    def add(self, key: str, warnings: list[str]) -> None:
        try:
            # durable=False: the record only saves time, and an emptied one reads as "not checked yet"
            write_json_atomic(self.folder / f"{key}.json", {"format": FORMAT, "warnings": warnings}, durable=False)
        except OSError as exc:  # a read-only state dir: validate works, only slower next time
            log.debug("could not record a validated model in %s: %s", self.folder, exc)


class WarningLog(logging.Handler):
    """The warnings logged while it is attached (what a recorded model's check said, to say again)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
