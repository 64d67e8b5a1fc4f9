"""Which files of a data folder are used, in which order: cheap (directory listings only) and
deterministic, because the build system hashes exactly these files as stage inputs.

Layouts (``docs/data.md``):

- images: ``*.jpg``, ``*.jpeg``, ``*.png``, ``*.bmp`` directly in the folder, one sample each;
- arrays for a one-input model: ``*.npy`` directly in the folder, one sample each;
- arrays for a model with several inputs: one subfolder per input, named exactly as the input, holding
  ``<sample>.npy``; files of the same name in the subfolders form one sample.

Files are sorted by file name (code-point order: zero-pad numbers); hidden files and files of other
types are ignored; ``count`` keeps the first N samples.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from accelbuild.data.spec import DataSpec
from accelbuild.errors import InputFileError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
ARRAY_SUFFIX = ".npy"


@dataclass(frozen=True)
class Sample:
    """One sample's files: by input name in the per-input layout, else under the key None."""

    name: str
    files: dict[str | None, Path]


@dataclass(frozen=True)
class DataFolder:
    kind: Literal["images", "npy"]
    per_input: bool           # .npy files in one subfolder per input
    samples: tuple[Sample, ...]


def shown_path(spec: DataSpec, *parts: str) -> str:
    """A file of the folder as the user would write it: ``<shown>/<part>/...``."""
    return "/".join([spec.shown.rstrip("/\\") or ".", *parts])


def data_files(spec: DataSpec) -> list[Path]:
    """Every file the first ``count`` samples read, sample by sample (inputs by name within one)."""
    return [sample.files[key] for sample in scan(spec).samples for key in sorted(sample.files, key=str)]


def scan(spec: DataSpec) -> DataFolder:
    """List the folder; raises ``InputFileError`` for a missing or empty folder, mixed file types,
    a per-input file missing, or a ``count`` larger than the folder."""
    entries = _listing(spec.path, spec.shown)
    images = sorted(name for name, is_dir in entries if not is_dir and name.lower().endswith(IMAGE_SUFFIXES))
    arrays = sorted(name for name, is_dir in entries if not is_dir and name.lower().endswith(ARRAY_SUFFIX))
    folders = {name: arrays_in for name, is_dir in entries if is_dir
               for arrays_in in [_arrays_in(spec.path / name, shown_path(spec, name))] if arrays_in}
    if images and (arrays or folders):
        raise InputFileError(spec.shown, "mixes images and .npy arrays; use one kind of file per folder")
    if arrays and folders:
        raise InputFileError(spec.shown, f".npy files directly in the folder and in subfolder(s) "
                                         f"{', '.join(sorted(folders))}: use one layout (subfolders only for "
                                         "models with several inputs)")
    if images:
        folder = DataFolder("images", False, tuple(Sample(Path(n).stem, {None: spec.path / n}) for n in images))
    elif arrays:
        folder = DataFolder("npy", False, tuple(Sample(n[:-len(ARRAY_SUFFIX)], {None: spec.path / n})
                                                for n in arrays))
    elif folders:
        folder = DataFolder("npy", True, _per_input_samples(spec, folders))
    else:
        raise InputFileError(spec.shown, "empty: no .jpg/.jpeg/.png/.bmp images or .npy arrays in the folder")
    return _first(spec, folder)


def _listing(folder: Path, shown: str) -> list[tuple[str, bool]]:
    try:
        with os.scandir(folder) as it:
            return [(e.name, e.is_dir()) for e in it if not e.name.startswith(".")]
    except FileNotFoundError:
        raise InputFileError(shown, "no such folder") from None
    except NotADirectoryError:
        raise InputFileError(shown, "not a folder (give a folder of images or .npy files)") from None
    except OSError as exc:
        raise InputFileError(shown, f"cannot list the folder: {exc.strerror}") from None


def _arrays_in(folder: Path, shown: str) -> dict[str, Path]:
    names = [n for n, is_dir in _listing(folder, shown) if not is_dir and n.lower().endswith(ARRAY_SUFFIX)]
    return {n[:-len(ARRAY_SUFFIX)]: folder / n for n in names}


def _per_input_samples(spec: DataSpec, folders: dict[str, dict[str, Path]]) -> tuple[Sample, ...]:
    names = sorted(set().union(*folders.values()))
    if spec.count is not None:
        names = names[:spec.count]
    samples = []
    for name in names:
        missing = [inp for inp in sorted(folders) if name not in folders[inp]]
        if missing:
            present = sorted(inp for inp in folders if name in folders[inp])
            raise InputFileError(shown_path(spec, missing[0], name + ARRAY_SUFFIX),
                                 f"missing: sample {name!r} has a file for input(s) {', '.join(present)} "
                                 f"but none for input {missing[0]!r}")
        samples.append(Sample(name, {inp: folders[inp][name] for inp in sorted(folders)}))
    return tuple(samples)


def _first(spec: DataSpec, folder: DataFolder) -> DataFolder:
    total = len(folder.samples)
    if spec.count is None:
        return folder
    if folder.per_input and total == spec.count:
        return folder  # already cut while checking completeness
    if spec.count > total:
        kind = "images" if folder.kind == "images" else "samples"
        raise InputFileError(spec.shown, f"count is {spec.count} but the folder holds only {total} {kind}")
    return DataFolder(folder.kind, folder.per_input, folder.samples[:spec.count])
