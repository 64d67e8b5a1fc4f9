"""Keras (``.keras``, ``.h5`` / ``.hdf5``), SavedModel folders and frozen graphs (``.pb``) through TensorFlow's own converter.

TensorFlow's ``TFLiteConverter`` follows TensorFlow and Keras releases (Keras 3 included), so every format
becomes a float TFLite model, which accelbuild's own TFLite frontend then reads like any ``.tflite``
file: TFLite's channel-last layout and tensor names are kept. Graph inputs and outputs take the names of
the model's serving signature (``img``, ``output_0``) and its input order.

- ``.keras`` / ``.h5`` / ``.hdf5``: ``keras.models.load_model`` then ``TFLiteConverter.from_keras_model``; where an
  input has dynamic dimensions besides the batch, a concrete function at the pipeline's ``input_shapes``.
- SavedModel folder: ``TFLiteConverter.from_saved_model`` with its ``serving_default`` signature.
- frozen ``.pb``: the v1 ``TFLiteConverter.from_frozen_graph`` with its Placeholders as input arrays and
  the nodes nothing reads as output arrays.

These converters are an optional extra (``pip install 'accelbuild[tensorflow]'``): TensorFlow is a large
dependency most users of ONNX and TFLite models never need. Without it, the import stage stops with an
exit-2 error that names the extra. TensorFlow's start-up chatter (C++ logs, absl, Keras's prints) is kept
out of accelbuild's output unless ``-v``.

Conversions are slow (a minute and most of a gigabyte for a large Keras model), so within
``conversion_cache(folder)`` (``tensors``, ``init`` and ``validate`` use the state dir's) each result is kept
by content: the key digests the model file(s), the converter settings (format, input shapes), the installed
TensorFlow and Keras versions and this module's source. A second command on the same model reads the
TFLite bytes back and never starts TensorFlow. A build's import stage is cached by the artifact cache.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib.metadata
import io
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbuild.errors import InputFileError
from accelbuild.util.files import write_bytes_atomic, write_json_atomic

log = logging.getLogger(__name__)

EXTRA = "pip install 'accelbuild[tensorflow]'  (TensorFlow's converter)"
SIGNATURE = "serving_default"

if TYPE_CHECKING:
    import onnx

_CACHE_DIR: contextvars.ContextVar[Path | None] = contextvars.ContextVar("tensorflow_conversions", default=None)


@contextlib.contextmanager
def conversion_cache(folder: Path) -> Iterator[None]:
    """Conversions in this block are kept in (and read back from) ``folder``, by content."""
    token = _CACHE_DIR.set(folder)
    try:
        yield
    finally:
        _CACHE_DIR.reset(token)


def converter_version() -> str | None:
    """``"tensorflow <version>"`` of the installed TensorFlow (from its metadata: no import), or None."""
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return f"tensorflow {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def load_tensorflow(path: Path, fmt: str, shapes: dict[str, Sequence[int]] | Sequence[Sequence[int]] = ()
                    ) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """The model as ONNX (through float TFLite) and a record of the conversion (versions, names).

    ``fmt`` is ``keras``, ``savedmodel`` (``path`` is the folder) or ``tensorflow`` (a frozen ``.pb``);
    ``shapes`` are the pipeline's channel-last ``input_shapes`` without batch (by name or in order),
    used where the model leaves dimensions open."""
    data, versions = _cached_conversion(path, fmt, shapes)
    from accelbuild.frontends.tflite.convert import convert
    from accelbuild.frontends.tflite.reader import parse_model

    names = signature_names(data)
    model = convert(parse_model(path, data))
    _rename_boundary(model, names)
    record = {"converter": "tf.lite.TFLiteConverter", "tensorflow": versions["tensorflow"],
              **({"keras": versions["keras"]} if fmt == "keras" and versions.get("keras") else {}),
              "signature": names}
    return model, record


def _cached_conversion(path: Path, fmt: str, shapes: Any) -> tuple[bytes, dict[str, str | None]]:
    """TensorFlow's TFLite bytes for the model and the versions that made them: from the conversion
    cache when one is in use and holds them, else converted now (and kept there)."""
    folder = _CACHE_DIR.get()
    key = conversion_key(path, fmt, shapes) if folder is not None and converter_version() else None
    if folder is not None and key is not None:
        data_file, versions_file = folder / f"{key}.tflite", folder / f"{key}.json"
        with contextlib.suppress(OSError, ValueError):
            versions = json.loads(versions_file.read_text(encoding="utf-8"))
            data = data_file.read_bytes()
            if hashlib.sha256(data).hexdigest() == versions.get("sha256"):
                log.debug("%s: TensorFlow's conversion read from %s", path, data_file)
                return data, versions
    tf = _import_tensorflow(path)
    with _quiet():
        if fmt == "keras":
            data = _from_keras(tf, path, shapes)
        elif fmt == "savedmodel":
            data = _from_saved_model(tf, path)
        else:
            data = _from_frozen_graph(tf, path, shapes)
    versions = {"tensorflow": tf.__version__, "keras": _version("keras")}
    if folder is not None and key is not None:
        folder.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(data_file, data)
        write_json_atomic(versions_file, {**versions, "sha256": hashlib.sha256(data).hexdigest()})
    return data, versions


def conversion_key(path: Path, fmt: str, shapes: Any) -> str:
    """Digest of what a conversion depends on: the model's bytes (every file of a SavedModel folder, by
    relative name), the format and input shapes, TensorFlow's and Keras's versions, this module's code."""
    digest = hashlib.sha256()
    settings = {"format": fmt, "shapes": shapes if isinstance(shapes, dict) else list(shapes),
                "tensorflow": converter_version(), "keras": _version("keras")}
    digest.update(json.dumps(settings, sort_keys=True, default=list).encode())
    digest.update(Path(__file__).read_bytes())
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        name = file.relative_to(path).as_posix() if path.is_dir() else ""
        digest.update(f"\0{name}\0{file.stat().st_size}\0".encode())
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _import_tensorflow(path: Path) -> Any:
    verbose = logging.getLogger("accelbuild").isEnabledFor(logging.DEBUG)
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # C++ start-up logs (oneDNN, CUDA probes)
    try:
        with _quiet():
            import tensorflow as tf
    except ImportError:
        raise InputFileError(path, f"{path.suffix or 'SavedModel'} models need the TensorFlow converter extra: "
                                   f"{EXTRA}") from None
    _calm_absl()
    return tf


def _calm_absl() -> None:
    """absl installs a logging handler whose flush at exit fails on a closed stream ("'Writer' object has no
    attribute 'close'"); accelbuild's own logging reports what matters, so its handler goes."""
    with contextlib.suppress(ImportError, AttributeError):
        import absl.logging

        absl.logging.set_verbosity(absl.logging.ERROR)
        # absl's private names (no public way to drop its handler); AttributeError is suppressed above
        logging.root.removeHandler(absl.logging._absl_handler)  # type: ignore[attr-defined]
        absl.logging._warn_preinit_stderr = False  # type: ignore[attr-defined]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """TensorFlow and Keras print to stdout ("Saved artifact at ...") and their C++ code writes to the
    process's stderr: both are captured and go to the debug log."""
    if logging.getLogger("accelbuild").isEnabledFor(logging.DEBUG):
        yield
        return
    captured = io.StringIO()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
                yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            chatter = captured.getvalue() + sink.read().decode("utf-8", "replace")
    if chatter.strip():
        log.debug("TensorFlow said:\n%s", chatter.strip())


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# --------------------------------------------------------------------------- Keras


def _from_keras(tf: Any, path: Path, shapes: Any) -> bytes:
    import keras

    try:
        model = keras.models.load_model(str(path), compile=False)
    except Exception as exc:  # Keras raises many types for a file that is not a model of its own
        raise InputFileError(path, f"not a Keras model Keras {keras.__version__} can load: "
                                   f"{_first_line(exc)}") from None
    specs = [tuple(t.shape) for t in model.inputs]
    names = [_tensor_name(t, i) for i, t in enumerate(model.inputs)]
    open_dims = [n for n, s in zip(names, specs) if any(d is None for d in s[1:])]
    try:
        if not open_dims:
            return tf.lite.TFLiteConverter.from_keras_model(model).convert()
        fixed = _fixed_shapes(path, names, specs, shapes)
        function = tf.function(lambda *xs: model(list(xs) if len(xs) > 1 else xs[0]))
        concrete = function.get_concrete_function(*[tf.TensorSpec(s, tf.float32, name=n)
                                                    for n, s in zip(names, fixed)])
        from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

        frozen = convert_variables_to_constants_v2(concrete)  # weights as constants, not resource variables
        return tf.lite.TFLiteConverter.from_concrete_functions([frozen], model).convert()
    except InputFileError:
        raise
    except Exception as exc:
        raise InputFileError(path, f"TensorFlow's TFLite converter failed: {_first_line(exc)}") from None


def _tensor_name(tensor: Any, index: int) -> str:
    name = getattr(tensor, "name", "") or f"input_{index}"
    return name.split(":")[0]


def _fixed_shapes(path: Path, names: list[str], specs: list[tuple], shapes: Any) -> list[list[int]]:
    """Batch 1 and the pipeline's ``input_shapes`` where the model leaves dimensions open."""
    given = dict(shapes) if isinstance(shapes, dict) else dict(zip(names, shapes))
    fixed = []
    for name, spec in zip(names, specs):
        if all(d is not None for d in spec[1:]):
            fixed.append([1, *spec[1:]])
            continue
        shape = given.get(name)
        if shape is None or shape == "auto" or len(shape) != len(spec) - 1:
            shown = "[" + ", ".join("?" if d is None else str(d) for d in spec[1:]) + "]"
            raise InputFileError(path, f"input {name!r} has dynamic dimensions {shown}; give its shape in "
                                       f"input_shapes (channel-last, without batch)")
        fixed.append([1, *shape])
    return fixed


# --------------------------------------------------------------------------- SavedModel


def _from_saved_model(tf: Any, folder: Path) -> bytes:
    try:
        loaded = tf.saved_model.load(str(folder))
    except Exception as exc:
        raise InputFileError(folder, f"not a SavedModel TensorFlow can load: {_first_line(exc)}") from None
    signatures = sorted(loaded.signatures.keys())
    if SIGNATURE not in signatures:
        raise InputFileError(folder, f"the SavedModel has no {SIGNATURE!r} signature (it has: "
                                     f"{', '.join(signatures) or 'none'}); export it with one "
                                     f"(tf.saved_model.save(..., signatures=...) or Keras's model.export)")
    try:
        return tf.lite.TFLiteConverter.from_saved_model(str(folder), signature_keys=[SIGNATURE]).convert()
    except Exception as exc:
        raise InputFileError(folder, f"TensorFlow's TFLite converter failed: {_first_line(exc)}") from None


# --------------------------------------------------------------------------- frozen graph


def _from_frozen_graph(tf: Any, path: Path, shapes: Any) -> bytes:
    graph_def = tf.compat.v1.GraphDef()
    try:
        graph_def.ParseFromString(path.read_bytes())
    except Exception as exc:
        raise InputFileError(path, f"not a frozen TensorFlow GraphDef: {_first_line(exc)}") from None
    inputs, outputs = graph_boundary(graph_def)
    if not inputs:
        raise InputFileError(path, "no input arrays found: a frozen graph's inputs are its Placeholder nodes, and "
                                   "this one has none")
    if not outputs:
        raise InputFileError(path, "no output arrays found (every node's result is read by another node)")
    given = dict(shapes) if isinstance(shapes, dict) else dict(zip(inputs, shapes))
    input_shapes = {name: [1, *given[name]] for name in inputs if name in given and given[name] != "auto"}
    try:
        converter = tf.compat.v1.lite.TFLiteConverter.from_frozen_graph(str(path), inputs, outputs,
                                                                       input_shapes=input_shapes or None)
        return converter.convert()
    except Exception as exc:
        raise InputFileError(path, f"TensorFlow's TFLite converter failed: {_first_line(exc)}") from None


def graph_boundary(graph_def: Any) -> tuple[list[str], list[str]]:
    """Placeholders are the inputs; nodes nothing reads are the outputs (node names)."""
    nodes = list(graph_def.node)
    read = {i.split(":")[0].lstrip("^") for n in nodes for i in n.input}
    inputs = [n.name for n in nodes if n.op == "Placeholder"]
    outputs = [n.name for n in nodes if n.name not in read and n.op not in ("Placeholder", "NoOp", "Const")]
    return inputs, outputs


# --------------------------------------------------------------------------- names


def signature_names(data: bytes) -> dict[str, dict[str, str]]:
    """The TFLite file's first signature: ``{"inputs": {key: tensor name}, "outputs": {...}}`` ({} if none)."""
    import tflite

    model = tflite.Model.GetRootAsModel(data, 0)
    if not model.SignatureDefsLength():
        return {}
    signature = model.SignatureDefs(0)
    graph = model.Subgraphs(signature.SubgraphIndex())

    def names(count: int, entry: Any) -> dict[str, str]:
        maps = [entry(i) for i in range(count)]
        return {m.Name().decode(): graph.Tensors(m.TensorIndex()).Name().decode() for m in maps}
    return {"inputs": names(signature.InputsLength(), signature.Inputs),
            "outputs": names(signature.OutputsLength(), signature.Outputs)}


def _rename_boundary(model: onnx.ModelProto, names: dict[str, dict[str, str]]) -> None:
    """Graph inputs and outputs named and ordered as the signature ``names`` has them; TFLite's names stay
    where a signature name is already taken by another tensor."""
    inputs, outputs = names.get("inputs", {}), names.get("outputs", {})
    renames = {tensor: key for key, tensor in {**inputs, **outputs}.items() if key != tensor}
    graph = model.graph
    taken = {t for n in graph.node for t in (*n.input, *n.output)} | {i.name for i in graph.initializer}
    taken |= {v.name for v in (*graph.input, *graph.output)}
    if not renames or any(new in taken for new in renames.values()):
        return
    for node in graph.node:
        node.input[:] = [renames.get(t, t) for t in node.input]
        node.output[:] = [renames.get(t, t) for t in node.output]
    for value in [*graph.input, *graph.output, *graph.value_info]:
        value.name = renames.get(value.name, value.name)
    for values, keys in ((graph.input, list(inputs)), (graph.output, list(outputs))):
        ordered = sorted(values, key=lambda v: keys.index(v.name) if v.name in keys else len(keys))
        del values[:]
        values.extend(ordered)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {text[0][:300] if text else ''}"
