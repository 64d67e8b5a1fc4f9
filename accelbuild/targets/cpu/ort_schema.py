"""The tables of onnxruntime's ORT format (``ort.fbs``), read from the FlatBuffers bindings that onnxruntime
ships (``onnxruntime.tools.ort_format_model.ort_flatbuffers_py``), so the schema always matches the
installed onnxruntime.

flatc's Python output is regular: a table field is added by ``<Table>Add<Field>(builder, x)`` whose body
is ``builder.Prepend<Kind>Slot(<slot>, x, <default>)``, and its accessor says what an offset points to
(``self._tab.String``, a table class it imports, ``self._tab.Union``, a vector read with ``Get`` of a
scalar kind, strings, tables or structs). This module turns that into one ``Field`` per slot.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from functools import cache

PACKAGE = "onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs"
ROOT = "InferenceSession"
FILE_IDENTIFIER = b"ORTM"
# the one union of ort.fbs: TypeInfo.value (its enum names members by field name, not by table)
UNIONS = {("TypeInfo", "Value"): {1: "TensorTypeAndShape", 2: "SequenceType", 3: "MapType"}}

_ADD = re.compile(r"def (\w+?)Add(\w+)\(builder, \w+\):\s+builder\.Prepend(\w+)Slot\((\d+), (?:.*\((\w+)\)|(\w+)), "
                  r"([^)]+)\)")
_SCALAR_IN_VECTOR = re.compile(r"self\._tab\.Get\(flatbuffers\.number_types\.(\w+)Flags, a \+")
_IMPORT = re.compile(r"from \S+ import (\w+)")


class SchemaError(Exception):
    """The installed onnxruntime's bindings are not what this reader understands."""


@dataclass(frozen=True)
class Field:
    slot: int
    name: str
    kind: str  # a scalar kind (Bool, Int8, Uint8, ..., Float32, Float64), or: string, table, union, vector
    default: float | int | bool = 0
    element: str = ""  # vectors: a scalar kind, "string", "table" or "struct"
    table: str = ""  # table, union-free vector of tables or structs: the table/struct name


@dataclass(frozen=True)
class Struct:
    size: int
    alignment: int


@cache
def table(name: str) -> tuple[Field, ...]:
    """The fields of table ``name``, by slot (a deprecated field's slot is absent)."""
    module = importlib.import_module(f"{PACKAGE}.{name}")
    source = inspect.getsource(module)
    cls = getattr(module, name)
    fields = []
    for match in _ADD.finditer(source):
        owner, field, kind, slot = match.group(1), match.group(2), match.group(3), int(match.group(4))
        if owner != name:
            continue
        default = _number(match.group(7))
        if kind != "UOffsetTRelative":
            fields.append(Field(slot, field, kind, default))
            continue
        accessor = inspect.getsource(getattr(cls, field))
        fields.append(_offset_field(name, slot, field, accessor))
    fields.sort(key=lambda f: f.slot)  # deprecated slots have no Add function: gaps are normal
    return tuple(fields)


@cache
def struct(name: str) -> Struct:
    module = importlib.import_module(f"{PACKAGE}.{name}")
    match = re.search(r"builder\.Prep\((\d+), (\d+)\)", inspect.getsource(module))
    if match is None:
        raise SchemaError(f"ORT format struct {name}: no size and alignment in its bindings")
    return Struct(size=int(match.group(2)), alignment=int(match.group(1)))


def _offset_field(owner: str, slot: int, name: str, accessor: str) -> Field:
    imported = _IMPORT.search(accessor)
    if "self._tab.Union(" in accessor:
        if (owner, name) not in UNIONS:
            raise SchemaError(f"ORT format union {owner}.{name} is not known to accelbuild")
        return Field(slot, name, "union")
    if re.search(rf"def {name}\(self, j\)", accessor):
        scalar = _SCALAR_IN_VECTOR.search(accessor)
        if scalar:
            return Field(slot, name, "vector", element=scalar.group(1))
        if "self._tab.String(a" in accessor:
            return Field(slot, name, "vector", element="string")
        if imported is None:
            raise SchemaError(f"ORT format field {owner}.{name}: vector of an unknown element type")
        element = "table" if "self._tab.Indirect(x)" in accessor else "struct"
        return Field(slot, name, "vector", element=element, table=imported.group(1))
    if "self._tab.String(o" in accessor:
        return Field(slot, name, "string")
    if imported is not None and "self._tab.Indirect(" in accessor:
        return Field(slot, name, "table", table=imported.group(1))
    raise SchemaError(f"ORT format field {owner}.{name}: unknown offset type")


def _number(text: str) -> float | int | bool:
    text = text.strip()
    if text in ("True", "False"):
        return text == "True"
    return float(text) if any(c in text for c in ".en") and not text.lstrip("-").isdigit() else int(text)
