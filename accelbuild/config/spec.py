"""The typed pipeline spec that comes out of a validated config.

Paths are absolute (resolved against the YAML's folder). The JSON Schema is the model: each key's
description, default and range live there only. Defaults are filled in from it before these objects are
built, and each field names the schema key it comes from (``key``, or the field's name), so ``build`` makes a
section's object from its data and ``uncovered`` tells which schema keys a class has no field for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar

from accelbuild.errors import Where

Shape = tuple[int, ...] | Literal["auto"]
ModelFormat = Literal["onnx", "tflite", "keras", "tensorflow", "savedmodel"]

SAVED_MODEL = "saved_model.pb"  # a folder holding this file is a TensorFlow SavedModel
MODEL_FORMATS = {
    ".onnx": "onnx",
    ".tflite": "tflite",
    ".h5": "keras",
    ".hdf5": "keras",  # Keras writes HDF5 under either suffix
    ".keras": "keras",
    ".pb": "tensorflow",
}


T = TypeVar("T")


def key(path: str, convert: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """Field metadata: the field holds the value at ``path`` (dotted, within its section), optionally
    converted (``convert`` also gets None, for an absent key). Use as ``field(metadata=key(...))``; a field without it holds the key of its own name."""
    return {"key": path, "convert": convert}


def derived(path: str | None, why: str) -> dict[str, Any]:
    """Field metadata: the loader computes the field (from the value at ``path``, if any) and passes it to
    ``build``. ``field(default=...)`` only for a value not known when the config loads (not a key's default)."""
    return {"from": path, "why": why}


def build(cls: type[T], data: dict[str, Any], /, **given: Any) -> T:
    """``cls`` from its section's data (defaults filled in): each field takes the value at its key (None when
    the key is absent and has no default), or the value in ``given`` (derived fields)."""
    values = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in given:
            values[f.name] = given[f.name]
        elif f.default is not MISSING or f.default_factory is not MISSING:
            continue  # not known when the config loads (a derived field's ``default=``)
        elif "from" in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name} is derived ({f.metadata['why']}): pass it to build")
        else:
            value = value_at(data, f.metadata.get("key", f.name))
            convert = f.metadata.get("convert")
            values[f.name] = convert(value) if convert is not None else value
    return cls(**values)


def value_at(data: dict[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of ``data``, or None when a key on the way is absent."""
    value: Any = data
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def schema_keys(classes: tuple[type, ...]) -> dict[str, str]:
    """The dotted schema keys the fields of ``classes`` come from, with the field that holds each, and the
    keys the classes list as handled elsewhere (``ELSEWHERE``: key -> the reason)."""
    keys: dict[str, str] = {}
    for cls in classes:
        for f in fields(cls):
            path = f.metadata["from"] if "from" in f.metadata else f.metadata.get("key", f.name)
            if path is not None:
                keys.setdefault(path, f"{cls.__name__}.{f.name}")
        keys.update(getattr(cls, "ELSEWHERE", {}))
    return keys


def uncovered(classes: tuple[type, ...], section: dict[str, Any], resolve: Callable[[Any], Any],
              prefix: str = "") -> list[str]:
    """The properties of a schema ``section`` (nested objects as dotted keys) that no field of ``classes``
    holds and no class lists in ``ELSEWHERE``. ``resolve``: follows a ``$ref``."""
    keys = schema_keys(classes)
    missing = []
    for name, sub in resolve(section).get("properties", {}).items():
        path = prefix + name
        if path in keys:
            continue
        sub = resolve(sub)
        if "properties" in sub and any(k.startswith(path + ".") for k in keys):
            missing += uncovered(classes, sub, resolve, path + ".")
        else:
            missing.append(path)
    return missing


def unknown_keys(classes: tuple[type, ...], section: dict[str, Any], resolve: Callable[[Any], Any]) -> list[str]:
    """The keys fields of ``classes`` name that the schema ``section`` has no property for."""
    missing = []
    for path, holder in schema_keys(classes).items():
        node = resolve(section)
        for part in path.split("."):
            node = resolve(node.get("properties", {}).get(part, {}))
        if not node:
            missing.append(f"{path} ({holder})")
    return missing


@dataclass(frozen=True)
class InputShapes:
    """User-given input shapes: by input name, or in input order, or all taken from the model."""

    by_name: dict[str, Shape] = field(default_factory=dict)
    in_order: tuple[Shape, ...] = ()

    @property
    def auto(self) -> bool:
        return not self.by_name and not self.in_order

    def as_param(self) -> object:
        """A JSON-able, canonical form for parameter digests."""
        if self.by_name:
            return {k: list(v) if v != "auto" else v for k, v in sorted(self.by_name.items())}
        if self.in_order:
            return [list(v) if v != "auto" else v for v in self.in_order]
        return "auto"


def _tuple(value: Any) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


def _names(value: Any) -> tuple[str, ...]:
    """A list of names; an absent key: none."""
    return tuple(value or ())


def _floats(value: Any) -> tuple[float, ...] | None:
    return None if value is None else tuple(float(v) for v in value)


def _mapping(value: Any) -> dict[str, Any]:
    """A mapping; an absent key: an empty one."""
    return dict(value or {})


@dataclass(frozen=True)
class CropSpec:
    """``models[].crop``."""

    inputs: tuple[str, ...] = field(metadata=key("inputs", _names))
    outputs: tuple[str, ...] = field(metadata=key("outputs", _names))
    auto: bool = field(metadata=key("auto"))
    in_out_file: Path | None = field(
        metadata=derived("in_out_file", "resolved against the YAML's folder, checked to exist")
    )
    in_out_file_text: str | None = field(metadata=key("in_out_file"))  # as written in the YAML, for messages
    allow_partial: bool = field(metadata=key("allow_partial"))


@dataclass(frozen=True)
class AutoPrecision:
    """Raise the most sensitive layers until the output reaches ``min_cosine`` (``auto_precision: true``:
    the schema's default goal)."""

    min_cosine: float
    max_extra_bytes: int | None


@dataclass(frozen=True)
class QuantizeSpec:
    """``models[].quantize`` over ``target.quantize``: the keys every family has (``quantize_stage``)."""

    weight_bits: int
    bits: dict[str, int | dict[str, int]] = field(metadata=key("bits", _mapping))  # or {weights, activations}
    bits_file: Path | None = field(
        metadata=derived("bits_file", "resolved against the YAML's folder, checked to exist")
    )
    bits_file_text: str | None = field(metadata=key("bits_file"))  # as written in the YAML, for messages
    auto_precision: AutoPrecision | None = field(metadata=derived("auto_precision", "false, true or {min_cosine, ...}"))
    # the family's own quantize keys, typed by the family (``Target.quantize_spec``)
    own: Any = field(metadata=derived(None, "the family's own keys, built by Target.quantize_spec"))


@dataclass(frozen=True)
class DataParams:
    """``models[].data`` without its folder: what stages are parameterised by (the folder's files are
    their inputs ``data:<relative path>``)."""

    text: str = field(metadata=key("path"))  # the folder as the YAML writes it (messages, records)
    count: int | None = field(metadata=key("count"))
    resize: tuple[int, int] | None = field(metadata=key("preprocess.resize", _tuple))
    color: str = field(metadata=key("preprocess.color"))
    mean: tuple[float, ...] = field(metadata=key("preprocess.mean", _floats))
    std: tuple[float, ...] = field(metadata=key("preprocess.std", _floats))


@dataclass(frozen=True)
class AccuracyInputs:
    """Where accuracy and calibration inputs come from: a data folder (its files are stage inputs,
    named ``data:<relative path>``) or ``samples`` seeded random inputs (a stage parameter)."""

    data: str | None  # the folder as the YAML writes it
    samples: int | None
    seed: int | None


@dataclass(frozen=True)
class DataSettings:
    """``models[].data``: a folder of images or .npy arrays (resolved) and how images become inputs."""

    path: Path = field(metadata=derived("path", "resolved against the YAML's folder, checked to exist"))
    params: DataParams = field(metadata=derived(None, "the section's other keys (DataParams)"))


@dataclass(frozen=True)
class ModelSpec:
    index: int
    name: str
    path: Path
    path_text: str  # as written in the YAML, for messages
    format: ModelFormat
    input_shapes: InputShapes
    crop: CropSpec
    quantize: QuantizeSpec
    data: DataSettings | None = None


@dataclass(frozen=True)
class DeviceSpec:
    """``benchmark.device``: the Dask worker resource that names a device, on which farm. ``machine`` is the
    device's description (``accelbuild.util.machine`` on that worker, with its runtime), filled in when the
    build reaches the farm (``engine/devices.py``): it is part of the benchmark task's key."""

    farm: str | None = field(
        metadata=derived("farm", "dask://HOST:PORT without a trailing /; None until --device-farm gives it")
    )
    resource: str = field(metadata=key("resource"))
    machine: str | None = field(
        default=None, metadata=derived(None, "found on the farm's worker when the build reaches it")
    )


@dataclass(frozen=True)
class BenchmarkSpec:
    """``benchmark``, with its ``accuracy`` keys."""

    frames: int
    host: bool
    samples: int = field(metadata=key("accuracy.samples"))
    seed: int = field(metadata=key("accuracy.seed"))
    data: Path | None = field(metadata=derived("accuracy.data", "resolved against the YAML's folder, checked to exist"))
    data_text: str | None = field(metadata=key("accuracy.data"))  # as written in the YAML, for messages
    warn_below: float = field(metadata=key("accuracy.warn_below"))  # accuracy floor: a model below it gets a warning
    # measure on a device of a Dask farm (docs/devices.md)
    device: DeviceSpec | None = field(
        metadata=derived("device", "its own section (DeviceSpec); the family must allow it")
    )


@dataclass(frozen=True)
class OutputSpec:
    """``output``."""

    dir: Path = field(
        metadata=derived("dir", "resolved against the YAML's folder; build/<name> when absent, per variant")
    )


@dataclass(frozen=True)
class PipelineSpec:
    """One pipeline YAML, validated. ``source`` keeps positions for errors found later by stages."""

    name: str
    yaml_path: Path
    target: Any  # the family's typed target spec (``.family`` names it); see accelbuild.targets
    models: tuple[ModelSpec, ...]
    benchmark: BenchmarkSpec
    output: OutputSpec
    source: Any  # YamlDocument, or a ComposedDocument for extends/matrix
    checks: dict[str, float] = field(default_factory=dict)
    variant: str | None = None  # the matrix variant ("num_chips=2,weight_bits=4"), None without a matrix
    base_name: str = ""  # the pipeline's name without its variant
    target_impl: Any = None  # the target family that builds it (an ``accelbuild.targets.base.Target``)
    toolchain_ref: Any = None  # families with a vendor toolchain: its ``accelbuild.toolchains.ToolchainRef``

    def where(self, *path: str | int, key: bool = False) -> Where:
        """Position in the YAML of the value (or key) at ``path``, e.g. ``where("models", 0, "crop")``."""
        return self.source.where(tuple(path), key=key)

    def model(self, name: str) -> ModelSpec:
        for model in self.models:
            if model.name == name:
                return model
        raise KeyError(name)
