"""Read one ``.npy`` sample for one model input, checking its shape and dtype.

A file holds one sample in the input's shape, with or without the batch dimension (the batch must be
1). Floating inputs take floating arrays (any width; cast), integer inputs take integer arrays whose
values fit the input's type, boolean inputs take booleans; NaN and infinity are refused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from accelbuild.data.spec import InputInfo
from accelbuild.errors import InputFileError


def array_sample(path: Path, shown: str, info: InputInfo) -> np.ndarray:
    """The sample in ``info``'s shape (batch 1) and dtype; ``InputFileError`` naming what it expects."""
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        first = str(exc).strip().splitlines()
        raise InputFileError(shown, f"not a readable .npy array ({first[0][:200] if first else exc})") from None
    if not isinstance(array, np.ndarray):
        raise InputFileError(shown, "not a single .npy array")
    expected = f"input {info.name!r} takes {info.show()}"
    shape = _fitted_shape(array.shape, info.shape)
    if shape is None:
        raise InputFileError(shown, f"array of shape {list(array.shape)}; {expected} (with or without the "
                                    "batch dimension, one sample per file)")
    if not _dtype_fits(array, info.dtype):
        raise InputFileError(shown, f"array of dtype {array.dtype.name}; {expected}")
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise InputFileError(shown, f"array holds NaN or infinite values; {expected}")
    return np.ascontiguousarray(array.reshape(shape).astype(info.dtype))


def _fitted_shape(actual: tuple[int, ...], wanted: tuple[int | None, ...]) -> tuple[int, ...] | None:
    """The shape with batch 1 when ``actual`` fits ``wanted`` (None dims match anything)."""
    batch = (1, *wanted[1:]) if wanted else wanted
    for candidate in (tuple(actual), (1, *actual)):
        if len(candidate) == len(batch) and all(w is None or w == a for a, w in zip(candidate, batch)):
            return candidate
    return None


def _dtype_fits(array: np.ndarray, dtype: np.dtype) -> bool:
    if dtype.kind == "f":
        return array.dtype.kind == "f"
    if dtype.kind == "b":
        return array.dtype.kind == "b"
    if dtype.kind in "iu" and array.dtype.kind in "iu":
        if array.size == 0 or np.can_cast(array.dtype, dtype):
            return True
        limits = np.iinfo(dtype)
        return bool(array.min() >= limits.min and array.max() <= limits.max)
    return False
