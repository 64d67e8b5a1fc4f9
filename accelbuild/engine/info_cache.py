"""The state dir's copies of what ``tensors`` and ``init`` read from a model, by content.

``accelbuild tensors MODEL`` and ``init`` import the model through the import stage (``model_info``), which
loads onnx and onnxruntime and runs the graph passes: most of their time. The description (inputs, outputs,
candidate crop tensors, the auto-crop suggestion) is kept under a key that digests the import task's key
(the model's files by content, its parameters, the import stage's code, accelbuild's version) and the code
that describes the imported graph; the next command on the same model and shapes
reads it back without importing anything heavy.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbuild.util.files import file_sha256, write_json_atomic

if TYPE_CHECKING:
    from accelbuild.engine.model_info import ModelInfo
    from accelbuild.engine.plan import Job

log = logging.getLogger(__name__)

FORMAT = 1
DESCRIBING = ("accelbuild.engine.model_info", "accelbuild.passes.auto_crop")  # the code that reads the graph


def folder() -> Path:
    from accelbuild.engine.state import conversions_dir

    return conversions_dir().parent / "model_info"


def key(job: Job) -> str | None:
    """The key of the import ``job``'s description (``task_key.model_info_key``); None when a file it reads
    cannot be read."""
    from accelbuild.engine import task_key
    from accelbuild.engine.code_identity import code_digest

    try:
        files = {role: file_sha256(path) for role, path in job.inputs.items()}
    except OSError:
        return None
    return task_key.model_info_key(task_key.job_key(job, files), code_digest(DESCRIBING))


def read(key: str | None, path: Path) -> ModelInfo | None:
    """The description kept under ``key`` (for the model file ``path``), or None."""
    if key is None:
        return None
    try:
        data = json.loads((folder() / f"{key}.json").read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            return None
        return _info(path, data["info"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def add(key: str | None, info: ModelInfo) -> None:
    if key is None:
        return
    try:
        # durable=False: the copy only saves time, and an emptied one reads as missing
        write_json_atomic(folder() / f"{key}.json", {"format": FORMAT, "info": info.as_json()}, durable=False)
    except OSError as exc:  # a read-only state dir: the command works, only slower next time
        log.debug("could not keep the model's description in %s: %s", folder(), exc)


def _info(path: Path, data: dict[str, Any]) -> ModelInfo:
    from accelbuild.engine.model_info import ModelInfo, TensorInfo

    auto = data["auto_crop"]
    return ModelInfo(path, data["inputs"], [TensorInfo(t["name"], t["shape"]) for t in data["outputs"]],
                     [TensorInfo(t["name"], t["shape"]) for t in data["candidate_crop_tensors"]],
                     auto["inputs"], auto["outputs"], auto["reasons"])
