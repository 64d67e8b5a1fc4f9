"""The content of a DFP file as values: a header (who compiled it, for what, which models and ports) and
named binary sections. Constructors validate and normalise (lists become tuples, ``extra`` becomes plain
JSON), so two equal programs compare equal however they were built.

``from_dict`` reads the header's JSON form and raises ValueError with the field's path
(``models[0].inputs[1].shape: ...``); ``to_dict`` gives the JSON form back.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelbuild.targets.mx3.dfp.format import MAX_SECTIONS, REQUIRED_SECTIONS, section_name_problem

_HEADER_KEYS = ("compiler", "chip_gen", "num_chips", "models")


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {_short(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode text: {_short(value)}") from None
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_keys(data: object, required: tuple[str, ...], what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ValueError(f"{what}must be an object, got {_short(data)}")
    for key in required:
        if key not in data:
            raise ValueError(f"{what}missing key '{key}'")
    unknown = sorted(str(k) for k in data if k not in required)
    if unknown:
        raise ValueError(f"{what}unknown key '{unknown[0]}'")
    return data


def _first_duplicate(names: Iterable[str]) -> str | None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def _at(path: str, error: ValueError) -> ValueError:
    return ValueError(f"{path}: {error}")


@dataclass(frozen=True)
class Port:
    """One model input or output as the host sees it."""

    name: str
    shape: tuple[int, ...]  # channel-last, no batch dimension; () for a scalar (one value)
    packet_format: str  # host<->chip packing: FP32, BF16, GBFloat80, RGB888
    layer: str  # the layer that consumes (input) or produces (output) it

    def __post_init__(self) -> None:
        _text(self.name, "name")
        _text(self.packet_format, "packet_format")
        _text(self.layer, "layer")
        shape = self.shape
        if not isinstance(shape, (list, tuple)) or not all(_is_int(d) and d >= 1 for d in shape):
            raise ValueError(f"shape must be a list of positive integers (empty for a scalar), got {_short(shape)}")
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "packet_format": self.packet_format,
                "layer": self.layer}

    @classmethod
    def from_dict(cls, data: object, path: str = "port") -> Port:
        try:
            data = _check_keys(data, ("name", "shape", "packet_format", "layer"), "")
            return cls(data["name"], data["shape"], data["packet_format"], data["layer"])
        except ValueError as error:
            raise _at(path, error) from None


def _ports(ports: object, what: str) -> tuple[Port, ...]:
    if not isinstance(ports, (list, tuple)) or not ports:
        raise ValueError(f"{what} must be a non-empty list of ports")
    for port in ports:
        if not isinstance(port, Port):
            raise ValueError(f"{what} must hold Port values, got {_short(port)}")
    duplicate = _first_duplicate(port.name for port in ports)
    if duplicate is not None:
        raise ValueError(f"{what} has two ports named {duplicate!r}")
    return tuple(ports)


@dataclass(frozen=True)
class ModelEntry:
    """A model compiled into the program, with its ports in order."""

    name: str
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]

    def __post_init__(self) -> None:
        _text(self.name, "name")
        object.__setattr__(self, "inputs", _ports(self.inputs, "inputs"))
        object.__setattr__(self, "outputs", _ports(self.outputs, "outputs"))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "inputs": [p.to_dict() for p in self.inputs],
                "outputs": [p.to_dict() for p in self.outputs]}

    @classmethod
    def from_dict(cls, data: object, path: str = "model") -> ModelEntry:
        try:
            data = _check_keys(data, ("name", "inputs", "outputs"), "")
        except ValueError as error:
            raise _at(path, error) from None
        ports = {}
        for key in ("inputs", "outputs"):
            if not isinstance(data[key], list):
                raise ValueError(f"{path}.{key}: must be a list of ports, got {_short(data[key])}")
            ports[key] = [Port.from_dict(p, f"{path}.{key}[{i}]") for i, p in enumerate(data[key])]
        try:
            return cls(data["name"], tuple(ports["inputs"]), tuple(ports["outputs"]))
        except ValueError as error:
            raise _at(path, error) from None


def _plain_json(value: object) -> dict[str, Any]:
    """``value`` as plain JSON (dicts, lists, str, int, float, bool, None); ValueError if it is not JSON."""
    if not isinstance(value, Mapping):
        raise ValueError(f"extra must be a mapping, got {_short(value)}")
    try:
        text = json.dumps(value, sort_keys=True, allow_nan=False, ensure_ascii=False)
        return json.loads(text.encode("utf-8"))  # encoding fails on lone surrogates, which UTF-8 cannot hold
    except (TypeError, ValueError, RecursionError) as error:
        raise ValueError(f"extra is not plain JSON: {error}") from None


@dataclass(frozen=True)
class Header:
    """The DFP header. ``extra`` holds any further top-level header fields (e.g. ``chips``)."""

    compiler: str  # e.g. "accelbuild 0.1.0"
    chip_gen: str  # hardware profile name
    num_chips: int
    models: tuple[ModelEntry, ...]
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _text(self.compiler, "compiler")
        _text(self.chip_gen, "chip_gen")
        if not _is_int(self.num_chips) or self.num_chips < 1:
            raise ValueError(f"num_chips must be a positive integer, got {_short(self.num_chips)}")
        object.__setattr__(self, "num_chips", int(self.num_chips))
        models = self.models
        if not isinstance(models, (list, tuple)) or not models:
            raise ValueError("models must be a non-empty list")
        for model in models:
            if not isinstance(model, ModelEntry):
                raise ValueError(f"models must hold ModelEntry values, got {_short(model)}")
        duplicate = _first_duplicate(model.name for model in models)
        if duplicate is not None:
            raise ValueError(f"models has two models named {duplicate!r}")
        object.__setattr__(self, "models", tuple(models))
        extra = _plain_json(self.extra)
        for key in _HEADER_KEYS:
            if key in extra:
                raise ValueError(f"extra may not redefine the header field '{key}'")
        object.__setattr__(self, "extra", extra)

    def to_dict(self) -> dict[str, Any]:
        return {**self.extra, "compiler": self.compiler, "chip_gen": self.chip_gen,
                "num_chips": self.num_chips, "models": [m.to_dict() for m in self.models]}

    @classmethod
    def from_dict(cls, data: object) -> Header:
        if not isinstance(data, Mapping):
            raise ValueError(f"must be a JSON object, got {_short(data)}")
        for key in _HEADER_KEYS:
            if key not in data:
                raise ValueError(f"missing field '{key}'")
        models = data["models"]
        if not isinstance(models, list):
            raise ValueError(f"models: must be a list, got {_short(models)}")
        entries = [ModelEntry.from_dict(m, f"models[{i}]") for i, m in enumerate(models)]
        extra = {k: v for k, v in data.items() if k not in _HEADER_KEYS}
        return cls(data["compiler"], data["chip_gen"], data["num_chips"], tuple(entries), extra)


@dataclass(frozen=True)
class Dfp:
    """A whole program: the header and the sections by name (bytes). Equal content compares equal."""

    header: Header
    sections: dict[str, bytes]

    def __post_init__(self) -> None:
        if not isinstance(self.header, Header):
            raise ValueError(f"header must be a Header, got {_short(self.header)}")
        if not isinstance(self.sections, Mapping):
            raise ValueError("sections must be a mapping of name to bytes")
        if len(self.sections) > MAX_SECTIONS:
            raise ValueError(f"at most {MAX_SECTIONS} sections, got {len(self.sections)}")
        sections = {}
        for name, payload in self.sections.items():
            problem = section_name_problem(name)
            if problem:
                raise ValueError(problem)
            if not isinstance(payload, (bytes, bytearray, memoryview)):
                raise ValueError(f"section '{name}' must be bytes, got {type(payload).__name__}")
            sections[name] = bytes(payload)
        for name in REQUIRED_SECTIONS:
            if name not in sections:
                raise ValueError(f"missing section '{name}'")
        object.__setattr__(self, "sections", sections)
