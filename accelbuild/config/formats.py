"""Config format 1 read as format 2.

Format 2 (``accelbuild: 2``) keeps every key a family owns under ``target``. Format 1 kept some of them at
the root or in shared sections; each family's fragment lists where its format-1 keys go (``format1``: from
a dotted format-1 path to a dotted format-2 path, optionally with a file suffix replaced). A format-1 key
that no entry of the pipeline's family names is one its family never read: it is dropped. Loading moves
the keys of the merged tree (``extends`` chains of either format, ``matrix`` keys too) and logs one
positioned note per key; ``config/migrate.py`` rewrites the files with the same moves.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from accelbuild import families as registry
from accelbuild.config.compose import Node
from accelbuild.config.yaml_source import YamlDocument
from accelbuild.errors import ConfigError, ConfigErrors

log = logging.getLogger(__name__)

FORMAT = 2
PathKey = tuple[str, ...]


@dataclass(frozen=True)
class Move:
    """Where one format-1 key goes in format 2 (``dest`` None: its family has no such key)."""

    source: PathKey
    dest: PathKey | None
    suffix: tuple[str, str] | None = None  # (format-1 suffix, format-2 suffix) of a file name

    def value(self, value: Any) -> Any:
        if self.suffix and isinstance(value, str) and value.endswith(self.suffix[0]):
            return value[: -len(self.suffix[0])] + self.suffix[1]
        return value

    def note(self) -> str:
        if self.dest is None:
            return f"{'.'.join(self.source)} is a format-1 key its family does not read: it is ignored"
        return f"{'.'.join(self.source)} is a format-1 key; accelbuild: 2 puts it at {'.'.join(self.dest)}"


def is_format1(data: Any) -> bool:
    return isinstance(data, dict) and type(data.get("accelbuild")) is int and data["accelbuild"] == 1


def family_table(name: str) -> dict[PathKey, Move]:
    """Every format-1 key and where family ``name`` puts it (empty for an unknown family)."""
    return _family_moves(name) or {}


def _family_moves(name: str) -> dict[PathKey, Move] | None:
    """The moves of family ``name`` (every registered family's format-1 keys; None: no such family)."""
    found = registry.registered()
    if name not in found:
        return None
    moves: dict[PathKey, Move] = {}
    for family in found.values():
        for entry in family.fragment.get("format1", []):
            source = tuple(entry["from"].split("."))
            moves.setdefault(source, Move(source, None))
    for entry in found[name].fragment.get("format1", []):
        source = tuple(entry["from"].split("."))
        suffix = entry.get("suffix")
        moves[source] = Move(source, tuple(entry["to"].split(".")), tuple(suffix) if suffix else None)
    return moves


def family_of(root: Node) -> str:
    target = root.value.get("target") if isinstance(root.value, dict) else None
    family = target.value.get("family") if target is not None and isinstance(target.value, dict) else None
    return family.value if family is not None and isinstance(family.value, str) else registry.DEFAULT


def moves_in(root: Node, family: str) -> list[tuple[Move, Node]]:
    """The format-1 keys present in ``root`` (a value at each source path) and where they go."""
    table = _family_moves(family) or {}
    found = []
    for move in table.values():
        node = _get(root, move.source)
        if node is not None:
            found.append((move, node))
    return sorted(found, key=lambda item: item[0].source)


def upgrade(root: Node, docs: dict[str, YamlDocument], family: str | None = None, notes: bool = True) -> None:
    """Move the format-1 keys of the merged tree ``root`` to their format-2 places, in place; a format-1 key
    written in a format-2 file is an error at the key. Each moved key is noted at its position (``notes``).
    ``family``: the pipeline's (default: the tree's own ``target.family``)."""
    if not isinstance(root.value, dict):
        return
    target = root.value.get("target")
    if target is not None and not isinstance(target.value, dict):
        return  # the schema says what is wrong with it
    family = family or family_of(root)
    if _family_moves(family) is None:
        return  # an unknown family: the schema says so
    errors: list[ConfigError] = []
    rank = {file: i for i, file in enumerate(docs)}  # the user's file first, then its bases
    for move, node in moves_in(root, family):
        doc = docs[node.file]
        where = doc.where(node.at, key=True)
        if not is_format1(doc.data):
            place = f"accelbuild: 2 puts it at {'.'.join(move.dest)}" if move.dest else "its family has no such key"
            errors.append(ConfigError(where, f"{'.'.join(move.source)} is a format-1 key; {place}",
                                      doc.snippet(where)))
            continue
        blocked = _not_a_mapping(root, move.dest[:-1]) if move.dest is not None else None
        if blocked is not None:  # a format-1 file that also wrote a scalar where the key moves to
            at = docs[blocked.file].where(blocked.at)
            errors.append(ConfigError(at, f"expected a mapping here: {'.'.join(move.source)} moves into it in "
                                          f"accelbuild: 2", docs[blocked.file].snippet(at)))
            continue
        if notes:
            log.info("%s: note: %s (run accelbuild migrate %s)", where, move.note(), node.file)
        _remove(root, move.source)
        if move.dest is not None:
            moved = Node(move.value(node.value), node.file, node.at)
            current = _get(root, move.dest)
            if current is None or rank.get(node.file, 0) < rank.get(current.file, 0):
                _put(root, move.dest, moved)
    _drop_empty_sections(root, docs, family)
    _upgrade_matrix(root, docs, family, notes)
    version = root.value.get("accelbuild")
    if version is not None and is_format1({"accelbuild": version.value}):
        root.value["accelbuild"] = Node(FORMAT, version.file, version.at)
    if errors:
        raise ConfigErrors(errors)


def _drop_empty_sections(root: Node, docs: dict[str, YamlDocument], family: str) -> None:
    """A format-1 section that format 2 does not have at the top level, left empty or null."""
    core = set(core_keys())
    for section in sorted({m.source[0] for m in (_family_moves(family) or {}).values()} - core):
        node = root.value.get(section)
        if node is not None and node.value in ({}, None) and is_format1(docs[node.file].data):
            del root.value[section]


def core_keys() -> list[str]:
    """The top-level keys of format 2."""
    from accelbuild.config.schema_check import load_schema

    return list(load_schema("pipeline.schema.json")["properties"])


def _upgrade_matrix(root: Node, docs: dict[str, YamlDocument], family: str, notes: bool) -> None:
    """Matrix keys of format-1 files that name a moved key name its format-2 place."""
    matrix = root.value.get("matrix")
    if matrix is None or not isinstance(matrix.value, dict) or not is_format1(docs[matrix.file].data):
        return
    table = _family_moves(family) or {}
    renamed: dict[str, Node] = {}
    for key, values in matrix.value.items():
        move = table.get(tuple(str(key).split(".")))
        if move is None:
            renamed[key] = values
            continue
        where = docs[values.file].where(values.at[:-1] + (key,), key=True)
        if notes:
            log.info("%s: note: matrix key %s (run accelbuild migrate %s)", where, move.note(), values.file)
        if move.dest is None:
            continue
        if isinstance(values.value, list):
            values = Node([Node(move.value(v.value), v.file, v.at) for v in values.value], values.file, values.at)
        renamed[".".join(move.dest)] = values
    matrix.value = renamed


def _get(root: Node, path: PathKey) -> Node | None:
    node = root
    for part in path:
        if not isinstance(node.value, dict) or part not in node.value:
            return None
        node = node.value[part]
    return node


def _not_a_mapping(root: Node, path: PathKey) -> Node | None:
    """The first value along ``path`` that exists and is not a mapping (a move cannot go through it)."""
    node = root
    for part in path:
        child = node.value.get(part) if isinstance(node.value, dict) else None
        if child is None:
            return None
        if not isinstance(child.value, dict):
            return child
        node = child
    return None


def _remove(root: Node, path: PathKey) -> None:
    """Remove the key at ``path``, and the mappings above it that it leaves empty."""
    parents = [root]
    for part in path[:-1]:
        parents.append(parents[-1].value[part])
    del parents[-1].value[path[-1]]
    for depth in range(len(path) - 1, 0, -1):
        if parents[depth].value == {}:
            del parents[depth - 1].value[path[depth - 1]]


def _put(root: Node, path: PathKey, value: Node) -> None:
    node = root
    for part in path[:-1]:
        child = node.value.get(part)
        if child is None or not isinstance(child.value, dict):
            child = Node({}, value.file, node.at + (part,) if node.file == value.file else ())
            node.value[part] = child
        node = child
    node.value[path[-1]] = value
