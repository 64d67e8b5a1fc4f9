"""Representative inputs for a model: one feed dict per sample, from images or ``.npy`` arrays."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np

from accelbuild.data.arrays import array_sample
from accelbuild.data.files import DataFolder, scan, shown_path
from accelbuild.data.spec import DataSpec, InputInfo
from accelbuild.errors import InputFileError

log = logging.getLogger(__name__)

Feeds = dict[str, np.ndarray]


def load_inputs(spec: DataSpec, inputs: list[InputInfo]) -> list[Feeds]:
    """Every sample of ``data_files(spec)``, in that order, as ``{input name: array}``."""
    return list(iter_inputs(spec, inputs))


def load_named_inputs(spec: DataSpec, inputs: list[InputInfo]) -> tuple[list[Feeds], list[str]]:
    """``load_inputs``, and each sample's name as the user would write it: its file in the folder
    (``<folder>/<file>``), or ``<folder>/<sample>`` for the subfolder-per-input layout."""
    folder = scan(spec)
    names = [shown_path(spec, sample.files[None].name if None in sample.files else sample.name)
             for sample in folder.samples]
    return list(_iter_folder(spec, folder, inputs)), names


def iter_inputs(spec: DataSpec, inputs: list[InputInfo]) -> Iterator[Feeds]:
    """As ``load_inputs``, one sample at a time (memory for one sample, not the whole folder)."""
    yield from _iter_folder(spec, scan(spec), inputs)


def _iter_folder(spec: DataSpec, folder: DataFolder, inputs: list[InputInfo]) -> Iterator[Feeds]:
    check_inputs(spec, folder, inputs)
    log.debug("%s: %d %s sample(s)", spec.shown, len(folder.samples), folder.kind)
    by_name = {info.name: info for info in inputs}
    for sample in folder.samples:
        if folder.kind == "images":
            from accelbuild.data.images import image_sample  # Pillow, only where images are read

            path = sample.files[None]
            yield {inputs[0].name: image_sample(path, shown_path(spec, path.name), spec, inputs[0])}
        elif not folder.per_input:
            path = sample.files[None]
            yield {inputs[0].name: array_sample(path, shown_path(spec, path.name), inputs[0])}
        else:
            yield {name: array_sample(path, shown_path(spec, name, path.name), by_name[name])
                   for name, path in sample.files.items() if name is not None}


def check_inputs(spec: DataSpec, folder: DataFolder, inputs: list[InputInfo]) -> None:
    names = [info.name for info in inputs]
    if not inputs:
        raise InputFileError(spec.shown, "the model has no inputs to feed")
    if not folder.per_input:
        if len(inputs) > 1:
            how = ("images feed a model with one image input" if folder.kind == "images"
                   else "give one subfolder of .npy files per input, named after it")
            raise InputFileError(spec.shown, f"the model has {len(inputs)} inputs ({', '.join(names)}); {how}")
        return
    given = set(folder.samples[0].files) if folder.samples else set()
    for name in names:
        if name not in given:
            raise InputFileError(shown_path(spec, name), f"missing: no subfolder of .npy files for input {name!r} "
                                                         f"(the model's inputs: {', '.join(names)})")
    for extra in sorted(str(n) for n in given if n not in names):
        raise InputFileError(shown_path(spec, extra), f"no model input is named {extra!r} "
                                                          f"(the model's inputs: {', '.join(names)})")

