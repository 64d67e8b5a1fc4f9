"""Every key that says "this work is already done", computed in one place by pure functions.

A task's key is the SHA-256 of:

- its *definition* (``definition``): the stage's name, the digest of the code that builds it
  (``code_identity.code_digest`` of ``Stage.code``, a family's ``Target.code`` included) and its parameters
  in canonical JSON (``stages.context.jsonable``). The parameters carry the family's toolchain package set
  (``ToolchainRef.as_param``: name, Python range and every pin, never a path) and, for a stage that
  measures, the device's identity (``benchmark.device`` resource and the machine described on it, or this
  machine for a family that measures here): another toolchain or device is another task;
- the SHA-256 of each input file, by role (never its path, its modification time or where the build lives);
- accelbuild's version, here and nowhere else;
- ``FORMAT``, the layout of this material (changing it makes every old key miss).

That one key decides everything: doit's up-to-date check compares it with the key its last run recorded
(``doit_backend.key_unchanged``), the artifact cache and the remote cache store a task's outputs under it
(``entry_name``), and ``status`` restores a task whose key the cache holds. ``-j``, the output folder, an
input's modification time and the project's location are not in it.

The other records keyed here: a no-op stamp (``invocation_key``: the command line and its environment), a
model already checked by ``validate`` (``checked_model_key``) and the description ``tensors``/``init`` read
from a model (``model_info_key``). (The record of configs that passed the schema, ``config/validated.py``,
keys documents, not tasks, below the engine.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from accelbuild import __version__
from accelbuild.util.files import json_digest

if TYPE_CHECKING:
    from accelbuild.engine.plan import Job

FORMAT = 3  # 3: one task key (definition, inputs, version); older keys miss


def definition(stage: str, code: str, params_json: Any) -> str:
    """What a task does, whatever its inputs: stage, code digest and canonical parameters (``Job.param_digest``;
    two matrix variants with the same definition and inputs share one task)."""
    return json_digest({"stage": stage, "code": code, "params": params_json})


def task_key(definition_digest: str, input_digests: Mapping[str, str], version: str | None = None) -> str:
    """The key of one task run: its ``definition``, the SHA-256 of each input by role, accelbuild's version
    (``version``, else this one's)."""
    return json_digest({
        "format": FORMAT,
        "task": definition_digest,
        "inputs": dict(sorted(input_digests.items())),
        "accelbuild": version or __version__,
    })


def job_key(job: Job, input_digests: Mapping[str, str]) -> str:
    """``task_key`` of a planned job, given the SHA-256 of each of its inputs by role."""
    return task_key(job.param_digest, input_digests)


def entry_name(key: str) -> str:
    """Where a task key's entry lives under a cache root, local or remote (``/``-separated)."""
    return f"entries/{key[:2]}/{key}.json"


def object_name(sha256: str) -> str:
    """Where an object (file contents, named by their SHA-256) lives under a cache root, local or remote."""
    return f"objects/{sha256[:2]}/{sha256}"


def invocation_key(cwd: str, argv: Sequence[str], environment: Mapping[str, str], python: Sequence[Any],
                   package_folder: str, version: str | None = None) -> str:
    """The no-op stamp's key: one command line (``argv``, ``-j`` included) run from ``cwd`` with these
    ``ACCELBUILD_*`` variables, this interpreter (executable, version, ``sys.path``) and this accelbuild."""
    return json_digest({
        "format": FORMAT,
        "cwd": cwd,
        "argv": list(argv),
        "env": sorted(environment.items()),
        "python": list(python),
        "accelbuild": [version or __version__, package_folder],
    })


def checked_model_key(family: str, definitions: Sequence[tuple[str, str]], model_digests: Mapping[str, str],
                      family_code: str | None, version: str | None = None) -> str:
    """A model ``validate`` checked: the family, its import and crop tasks' ``(stage, definition)``, the
    SHA-256 of the model's files by role and, where the family checks the model itself, its code digest."""
    return json_digest({
        "format": FORMAT,
        "family": family,
        "tasks": sorted([stage, digest] for stage, digest in definitions),
        "model": dict(sorted(model_digests.items())),
        "family_code": family_code,
        "accelbuild": version or __version__,
    })


def model_info_key(import_key: str, describing_code: str) -> str:
    """The description of a model: the import task's key (model by content, parameters, code, version) and
    the code that describes the imported graph."""
    return json_digest({"format": FORMAT, "import": import_key, "describing": describing_code})
