"""``accelbuild init MODEL``: a starter pipeline that builds as written.

The model is described by ``model_info.read_model`` (through the import stage); the ``target:`` mapping is
the family's own (``Target.starter_target``, what ``--platform`` fills in: ``Target.platform``); the text
is loaded as a run would load it before it is written, so a wrong platform is said as init's mistake.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbuild.engine.model_info import ModelInfo, channel_last, read_model
from accelbuild.errors import InputFileError, UserError
from accelbuild.util.files import write_bytes_atomic

if TYPE_CHECKING:
    from accelbuild.targets.base import Target


def write(model: Path, out: Path | None = None, family: str | None = None, platform: str | None = None,
          data: str | Path | None = None, input_shapes: dict[str, list[int]] | None = None) -> tuple[Path, ModelInfo]:
    """Write the starter pipeline of ``model`` to ``out`` (default: the model's stem + .yaml), never over an
    existing file; (where it was written, the model's description). ``data``: a folder of representative
    inputs (named in messages as given)."""
    from accelbuild.families import DEFAULT

    out = out if out is not None else Path(f"{model.stem}.yaml")
    if out.exists():
        raise InputFileError(out, "already exists; give another name with -o (init never overwrites)")
    family = family or DEFAULT
    target = checked_target(family, platform)
    kind = data_kind(data) if data is not None else "images"
    info = read_model(model, input_shapes)
    text = starter_pipeline(info, out, target, platform, None if data is None else Path(data), kind)
    check_loads(text, out, schema=platform is not None)
    write_bytes_atomic(out, text.encode("utf-8"))
    return out, info


def checked_target(family: str, platform: str | None) -> Target:
    """The family's target, with ``--platform`` checked against its rule (before the model is read)."""
    from accelbuild.config.schema_check import did_you_mean
    from accelbuild.families import get_target, registered

    names = list(registered())
    if family not in names:
        raise UserError(f"init: unknown --family {family!r} (one of: {', '.join(names)}){did_you_mean(family, names)}")
    target: Target = get_target(family)
    rule = target.platform
    if rule is not None and rule.default is None and not platform:
        raise UserError(f"init: --family {family} needs --platform P: {rule.required}")
    if platform and rule is None:
        takers = [name for name in names if get_target(name).platform is not None]
        raise UserError(f"init: --platform applies to --family {', '.join(takers)}, not {family}")
    return target


def data_kind(folder: str | Path) -> str:
    """``images`` or ``npy``: what --data holds, listed as a build will list it (exit 2 for a missing
    folder, or one with no images or .npy arrays: the pipeline would not build as written)."""
    from accelbuild.data.files import scan
    from accelbuild.data.spec import DataSpec

    if not Path(folder).is_dir():
        raise InputFileError(folder, "no such folder (--data takes a folder of images or .npy arrays)")
    return scan(DataSpec(Path(folder).absolute(), str(folder))).kind


def check_loads(text: str, out: Path, schema: bool = True) -> None:
    """The written pipeline loads as a run would load it (a wrong --platform, a --data folder the model cannot
    read are said now, as init's). ``schema=False``: its keys and values meet the JSON Schema by construction
    (the tests validate every family's starter pipeline), so jsonschema is not imported (30 ms); a --platform
    is a user's value that only the schema checks for some families (rknn's and qnn's SoC lists)."""
    from accelbuild.config.load import load_generated, load_pipelines
    from accelbuild.errors import ConfigError, ConfigErrors

    folder = out.absolute().parent
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=folder, delete=False) as handle:
        handle.write(text)
    try:
        load_pipelines([handle.name]) if schema else load_generated(Path(handle.name))
    except (ConfigError, ConfigErrors) as exc:
        errors = exc.errors if isinstance(exc, ConfigErrors) else [exc]
        raise UserError("init: " + "; ".join(e.message for e in errors)) from None
    finally:
        Path(handle.name).unlink()


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in text).lstrip("._-")


def pipeline_name(stem: str, family: str, platform: str | None, names_family: bool = False) -> str:
    """``<stem>-<family>[-<platform>]``: pipelines init writes for one model on different targets get
    different names, so their default ``build/<name>/`` folders never overwrite each other. A platform whose
    names already say the family (``PlatformRule.names_family``) stands alone; a profile file
    is named by its stem."""
    if platform is not None:
        label = _safe(Path(platform).stem if platform.endswith((".yaml", ".yml")) else platform)
        parts = [stem, label] if names_family else [stem, family, label]
    else:
        parts = [stem, family]
    return "-".join(p for p in parts if p)[:128]


def image_color(info: ModelInfo) -> str:
    """The ``preprocess.color`` an image folder needs for the model's (first) input: gray for 1 channel,
    rgb for 3; anything else cannot come from images (``UserError``: give .npy arrays), nor several inputs."""
    if len(info.inputs) != 1:
        names = ", ".join(i["name"] for i in info.inputs)
        raise UserError(f"init: --data is a folder of images, but the model has {len(info.inputs)} inputs ({names}); "
                        "images feed a model with one image input: give one subfolder of .npy arrays per input "
                        "(docs/data.md)")
    entry = info.inputs[0]
    channels = channel_last(entry)[-1] if len(entry["shape"]) == 4 else None
    if channels == 1:
        return "gray"
    if channels == 3:
        return "rgb"
    raise UserError(f"init: --data is a folder of images, but input {entry['name']!r} {entry['shape']} does not "
                    "take 1 (gray) or 3 (rgb) channels; give a folder of .npy arrays (docs/data.md)")


def _data_stanza(info: ModelInfo, yaml_path: Path, data: Path | None, data_kind: str) -> str:
    if data is None:
        return ""
    folder = os.path.relpath(data.absolute(), yaml_path.absolute().parent)
    stanza = ("    data:                          # representative inputs (docs/data.md)\n"
              f"      path: {json.dumps(folder)}\n")
    if data_kind == "images":
        stanza += (f"      preprocess: {{color: {image_color(info)}, mean: [0], std: [255]}}"
                   "   # check what the model was trained on\n")
    return stanza


def starter_pipeline(info: ModelInfo, yaml_path: Path, target: Any, platform: str | None = None,
                     data: Path | None = None, data_kind: str = "images") -> str:
    """A pipeline YAML for the model that builds as written: its inputs and shapes (channel-last), the
    family's target (``target``: a ``Target``), the data folder when given (for images, the colour the
    input's channel count needs); crop points suggested as comments. The name carries the family and
    platform (``pipeline_name``)."""
    stem = _safe(info.path.stem) or "model"
    rule = target.platform
    written_platform = platform or (rule.default if rule is not None else None)
    name = pipeline_name(stem, target.family, written_platform, rule is not None and rule.names_family)
    relative = os.path.relpath(info.path.absolute(), yaml_path.absolute().parent)
    shapes = "\n".join(f"      {json.dumps(i['name'])}: {json.dumps(channel_last(i))}" for i in info.inputs)
    reasons = "".join(f"    #   ({reason})\n" for reason in info.auto_reasons)
    lines = "".join(f"  {line}\n" for line in target.starter_target(written_platform))
    return (
        f"# Starter pipeline for {info.path.name}, written by `accelbuild init`. Edit, then `accelbuild run` it.\n"
        "# Every key: `accelbuild schema` prints the JSON Schema (for editors: yaml-language-server).\n"
        "accelbuild: 2\n"
        f"name: {name}\n"
        "target:\n"
        f"{lines}"
        "models:\n"
        f"  - name: {stem}\n"
        f"    path: {json.dumps(relative)}\n"
        "    input_shapes:                # channel-last (H, W, C), no batch\n"
        f"{shapes}\n"
        f"{_data_stanza(info, yaml_path, data, data_kind)}"
        "    # Suggested crop points (accelbuild's auto crop); `accelbuild tensors MODEL` lists others.\n"
        "    # crop:\n"
        f"    #   inputs: {json.dumps(info.auto_inputs)}\n"
        f"    #   outputs: {json.dumps(info.auto_outputs)}\n"
        f"{reasons}"
        "    quantize:\n"
        "      weight_bits: 8\n"
        "benchmark:\n"
        "  frames: 200\n"
    )
