"""Reading and writing ONNX files safely.

Reading: parse errors become ``InputFileError`` (exit 2); external data is read only from files inside
the model's own folder (no ``..``, absolute paths, or symlinks leading out), with offsets checked
against file sizes. Writing: deterministic bytes, the lowest IR version that carries the model's opsets
and types (so the onnxruntime we depend on always loads it), atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import external_data_helper

from accelbuild.errors import InputFileError
from accelbuild.util.files import write_bytes_atomic
from accelbuild.util.onnx_runtime import min_ir_version, serialize  # noqa: F401  (here for callers)


def external_data_files(model_path: Path) -> dict[str, Path]:
    """External data files a model refers to (validated), found without loading tensor data.

    Cheap for the common case: a model without external data never names a "location" key.
    """
    if b"location" not in Path(model_path).read_bytes():
        return {}
    model = _parse(model_path)
    return {f"external:{loc}": path for loc, path in _external_locations(model, model_path).items()}


def load_onnx(path: Path) -> onnx.ModelProto:
    """Parse, load external data safely, and check an ONNX model."""
    path = Path(path)
    model = _parse(path)
    locations = _external_locations(model, path)
    if locations:
        external_data_helper.load_external_data_for_model(model, str(path.parent))
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "check failed"
        raise InputFileError(path, f"not a valid ONNX model: {first}") from None
    return model


def _parse(path: Path) -> onnx.ModelProto:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc.strerror}") from None
    if not raw:
        raise InputFileError(path, "empty file, not an ONNX model")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(raw)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise InputFileError(path, f"not an ONNX model (protobuf parse failed: {exc})") from None
    if not model.HasField("graph") or model.ir_version <= 0:
        raise InputFileError(path, "not an ONNX model (no graph or IR version in the file)")
    return model


def _external_locations(model: onnx.ModelProto, model_path: Path) -> dict[str, Path]:
    """Validated external data files by their ``location`` string."""
    folder = Path(os.path.realpath(model_path.parent))
    found: dict[str, Path] = {}
    for tensor in external_data_helper._get_all_tensors(model):
        if not external_data_helper.uses_external_data(tensor):
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        where = f"tensor {tensor.name!r} stores its data in {location!r}"
        if not location or os.path.isabs(location) or ".." in Path(location).parts:
            raise InputFileError(model_path, f"{where}: external data must be a file in the model's own folder")
        real = Path(os.path.realpath(folder / location))
        if real.parent != folder and folder not in real.parents:
            raise InputFileError(model_path, f"{where}, which leads outside the model's folder")
        if not real.is_file():
            raise InputFileError(model_path, f"{where}, which does not exist next to the model")
        size = real.stat().st_size
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else size - offset
        except ValueError:
            raise InputFileError(model_path, f"{where} with a non-numeric offset or length") from None
        if offset < 0 or length < 0 or offset + length > size:
            raise InputFileError(model_path, f"{where} at bytes {offset}..{offset + length}, past its end ({size})")
        found[location] = real
    return found


def save_onnx(model: onnx.ModelProto, path: Path) -> None:
    write_bytes_atomic(Path(path), serialize(model))
