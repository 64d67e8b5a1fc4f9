"""The canonical bytes of an ORT format model (``.ort``).

onnxruntime serializes the same optimized graph into different bytes from one session to the next: the
content is the same, but it builds the FlatBuffer's tables in the iteration order of its hash maps
(abseil's, salted per table), so the offsets differ. ``canonical`` reads every field the schema knows
(``ort_schema``) and writes the same content again in one fixed order: children before parents, fields
by slot, vectors in their stored order, each distinct string once (where the walk first meets it).
Vectors keep their order, so the sorted ones onnxruntime looks up by key stay sorted. A field this
reader does not know is an error rather than being dropped: the bytes would no longer hold what
onnxruntime wrote.
"""

from __future__ import annotations

import numpy as np
from flatbuffers import Builder, encode, number_types, packer
from flatbuffers.table import Table

from accelbuild.targets.cpu import ort_schema
from accelbuild.targets.cpu.ort_schema import Field, SchemaError

_DTYPES = {"Bool": "<?", "Int8": "<i1", "Uint8": "<u1", "Int16": "<i2", "Uint16": "<u2", "Int32": "<i4",
           "Uint32": "<u4", "Int64": "<i8", "Uint64": "<u8", "Float32": "<f4", "Float64": "<f8"}


def canonical(data: bytes) -> bytes:
    """``data`` (an ORT format model) rewritten in the canonical layout."""
    if data[4:8] != ort_schema.FILE_IDENTIFIER:
        raise SchemaError(f"not an ORT format model (file identifier {data[4:8]!r})")
    buf = bytearray(data)
    root = Table(buf, encode.Get(packer.uoffset, buf, 0))
    builder = Builder(len(data) + 1024)
    builder.Finish(_table(builder, ort_schema.ROOT, root), file_identifier=ort_schema.FILE_IDENTIFIER)
    return bytes(builder.Output())


def _table(builder: Builder, name: str, tab: Table) -> int:
    fields = ort_schema.table(name)
    _check_known(name, tab, fields)
    values: list[tuple[Field, object]] = []
    for f in fields:
        o = tab.Offset(4 + 2 * f.slot)
        if o == 0:
            continue
        if f.kind == "string":
            values.append((f, builder.CreateSharedString(bytes(tab.String(o + tab.Pos)))))
        elif f.kind == "table":
            values.append((f, _table(builder, f.table, _child(tab, tab.Indirect(o + tab.Pos)))))
        elif f.kind == "union":
            kind = _scalar(tab, next(x for x in fields if x.name == f"{f.name}Type"))
            member = Table(bytearray(), 0)
            tab.Union(member, o)
            values.append((f, _table(builder, ort_schema.UNIONS[(name, f.name)][int(kind)], member)))
        elif f.kind == "vector":
            values.append((f, _vector(builder, tab, o, f)))
        else:
            values.append((f, tab.Get(getattr(number_types, f"{f.kind}Flags"), o + tab.Pos)))
    builder.StartObject(fields[-1].slot + 1 if fields else 0)
    for f, value in values:
        if f.kind in ("string", "table", "union", "vector"):
            builder.PrependUOffsetTRelativeSlot(f.slot, value, 0)
        else:
            getattr(builder, f"Prepend{f.kind}Slot")(f.slot, value, f.default)
    return builder.EndObject()


def _vector(builder: Builder, tab: Table, o: int, f: Field) -> int:
    start, count = tab.Vector(o), tab.VectorLen(o)
    if f.element in _DTYPES:
        width = np.dtype(_DTYPES[f.element]).itemsize
        return builder.CreateNumpyVector(np.frombuffer(bytes(tab.Bytes[start:start + count * width]),
                                                       dtype=_DTYPES[f.element]))
    if f.element == "struct":
        shape = ort_schema.struct(f.table)
        raw = bytes(tab.Bytes[start:start + count * shape.size])
        builder.StartVector(shape.size, count, shape.alignment)
        builder.head -= len(raw)
        builder.Bytes[builder.head:builder.head + len(raw)] = raw
        builder.vectorNumElems = count
        return builder.EndVector()
    if f.element == "string":
        offsets = [builder.CreateSharedString(bytes(tab.String(start + 4 * i))) for i in range(count)]
    else:
        offsets = [_table(builder, f.table, _child(tab, tab.Indirect(start + 4 * i))) for i in range(count)]
    builder.StartVector(4, count, 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def _child(tab: Table, pos: int) -> Table:
    return Table(tab.Bytes, pos)


def _scalar(tab: Table, f: Field) -> int | float | bool:
    o = tab.Offset(4 + 2 * f.slot)
    return f.default if o == 0 else tab.Get(getattr(number_types, f"{f.kind}Flags"), o + tab.Pos)


def _check_known(name: str, tab: Table, fields: tuple[Field, ...]) -> None:
    vtable = tab.Pos - tab.Get(number_types.SOffsetTFlags, tab.Pos)
    slots = (tab.Get(number_types.VOffsetTFlags, vtable) - 4) // 2
    known = {f.slot for f in fields}
    for slot in range(slots):
        if slot not in known and tab.Offset(4 + 2 * slot):
            raise SchemaError(f"ORT format table {name} holds a field at slot {slot} that accelbuild does not "
                              "know (a newer onnxruntime?)")
