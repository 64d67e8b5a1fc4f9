"""Pipelines made of several files: ``extends`` chains and ``matrix`` variants.

``extends: ../base.yaml`` deep-merges the file over its base (mappings merge key by key, lists are
replaced whole, ``models`` merge by model name, a ``target`` naming its ``family`` replaces the base's, and
``key: null`` removes an inherited key); bases may extend further bases (a cycle is an error).
``matrix`` expands one pipeline into a variant per combination of the listed values, each overriding the
value at a dotted key (``target.num_chips``, ``models.det.quantize.weight_bits``).

The result is a ``ComposedDocument``: the merged data plus, for every node, the file and position it
came from, so an error about a value points into the file that holds it, and a relative path is
resolved against that file's folder.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbuild.config.yaml_source import YamlDocument, load_yaml
from accelbuild.errors import ConfigError, Where

PathKey = tuple[str | int, ...]
MAX_EXTENDS_DEPTH = 16
MAX_VARIANTS = 256


@dataclass
class Node:
    """A value with the file and in-file path it came from (children are Nodes too)."""

    value: Any  # dict[str, Node] | list[Node] | scalar
    file: str
    at: PathKey


@dataclass
class ComposedDocument:
    """Merged data with per-node origins; the same interface as ``YamlDocument`` for messages."""

    file: str  # the file the user named
    data: Any
    docs: dict[str, YamlDocument]
    origins: dict[PathKey, tuple[str, PathKey]] = field(default_factory=dict)
    key_origins: dict[PathKey, tuple[str, PathKey]] = field(default_factory=dict)

    def _origin(self, path: PathKey, key: bool) -> tuple[YamlDocument, PathKey]:
        table = self.key_origins if key else self.origins
        probe = tuple(path)
        while probe:
            if probe in table:
                file, at = table[probe]
                return self.docs[file], at
            if probe in self.origins:
                file, at = self.origins[probe]
                return self.docs[file], at
            probe = probe[:-1]
        return self.docs[self.file], ()

    def where(self, path: PathKey, *, key: bool = False) -> Where:
        doc, at = self._origin(path, key)
        return doc.where(at, key=key)

    def snippet(self, where: Where) -> str:
        doc = self.docs.get(where.file) if isinstance(where, Where) else None
        return doc.snippet(where) if doc is not None else ""

    def has_value(self, path: PathKey) -> bool:
        return tuple(path) in self.origins

    def folder_of(self, path: PathKey) -> Path:
        """The folder of the file that wrote the value at ``path`` (relative paths resolve against it)."""
        doc, _ = self._origin(path, False)
        return Path(doc.file).parent


def _annotate(value: Any, file: str, at: PathKey) -> Node:
    if isinstance(value, dict):
        return Node({k: _annotate(v, file, at + (k,)) for k, v in value.items()}, file, at)
    if isinstance(value, list):
        return Node([_annotate(v, file, at + (i,)) for i, v in enumerate(value)], file, at)
    return Node(value, file, at)


def _model_key(model: Node) -> str | None:
    if not isinstance(model.value, dict):
        return None
    name = model.value.get("name")
    if name is not None and isinstance(name.value, str):
        return name.value
    path = model.value.get("path")
    return Path(path.value).stem if path is not None and isinstance(path.value, str) else None


def _merge(base: Node, over: Node, path: PathKey) -> Node:
    """``over`` on top of ``base``: mappings merge, lists replace, the models list merges by name; a
    ``target`` that names its ``family`` replaces the inherited one whole (another family's keys do not
    apply); a key set to null removes the inherited value (the key takes its default)."""
    if path == ("target",) and isinstance(over.value, dict) and "family" in over.value:
        return over
    if isinstance(base.value, dict) and isinstance(over.value, dict):
        merged = dict(base.value)
        for key, value in over.value.items():
            if value.value is None and key in base.value:
                del merged[key]
                continue
            merged[key] = _merge(base.value[key], value, path + (key,)) if key in base.value else value
        return Node(merged, over.file, over.at)
    if path == ("models",) and isinstance(base.value, list) and isinstance(over.value, list):
        by_name = {_model_key(m): m for m in over.value}
        result = [_merge(m, by_name.pop(_model_key(m)), path + (i,)) if _model_key(m) in by_name else m
                  for i, m in enumerate(base.value)]
        result += [m for m in over.value if _model_key(m) in by_name]
        return Node(result, over.file, over.at)
    return over


def _flatten(node: Node, path: PathKey, doc: ComposedDocument) -> Any:
    doc.origins[path] = (node.file, node.at)
    if isinstance(node.value, dict):
        out = {}
        for key, child in node.value.items():
            doc.key_origins[path + (key,)] = (child.file, child.at)
            out[key] = _flatten(child, path + (key,), doc)
        return out
    if isinstance(node.value, list):
        return [_flatten(child, path + (i,), doc) for i, child in enumerate(node.value)]
    return node.value


def load_chain(path: Path, shown: str) -> tuple[Node, dict[str, YamlDocument]]:
    """The file at ``path`` merged over its ``extends`` chain, as an annotated tree."""
    docs: dict[str, YamlDocument] = {}
    chain: list[Path] = []
    layers: list[Node] = []
    current, current_shown, named_at, written = path, shown, None, shown
    while True:
        resolved = current.resolve()
        if resolved in chain:
            assert named_at is not None
            raise ConfigError(named_at, f"extends {written!r} is a cycle: it leads back to {docs_first(docs)}",
                              docs[named_at.file].snippet(named_at))
        if len(chain) >= MAX_EXTENDS_DEPTH:
            raise ConfigError(named_at or shown, f"extends chain is deeper than {MAX_EXTENDS_DEPTH} files")
        doc = _load_extended(current, current_shown, named_at, written, docs)
        docs[doc.file] = doc
        chain.append(resolved)
        if not isinstance(doc.data, dict):
            raise ConfigError(doc.where(()), "a pipeline file must be a mapping", doc.snippet(doc.where(())))
        data = dict(doc.data)
        parent = data.pop("extends", None)
        layers.append(_annotate(data, doc.file, ()))
        if parent is None:
            break
        named_at = doc.where(("extends",))
        if not isinstance(parent, str) or not parent:
            raise ConfigError(named_at, "extends must be the path of a pipeline YAML file", doc.snippet(named_at))
        written = parent
        current = Path(os.path.normpath(current.parent / parent))
        current_shown = os.path.normpath(os.path.join(os.path.dirname(current_shown), parent))
    node = layers[-1]
    for layer in reversed(layers[:-1]):
        node = _merge(node, layer, ())
    return node, docs


def docs_first(docs: dict[str, YamlDocument]) -> str:
    return next(iter(docs))


def _load_extended(path: Path, shown: str, named_at: Where | None, written: str,
                   docs: dict[str, YamlDocument]) -> YamlDocument:
    if named_at is None:
        return load_yaml(path, shown)
    if not path.is_file():
        raise ConfigError(named_at, f"extends {written!r}: no such file", docs[named_at.file].snippet(named_at))
    return load_yaml(path, shown)


def compose(node: Node, docs: dict[str, YamlDocument], file: str) -> ComposedDocument:
    doc = ComposedDocument(file=file, data=None, docs=docs)
    doc.data = _flatten(node, (), doc)
    return doc


# -- matrix ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    name: str  # "num_chips=2,weight_bits=4"
    document: ComposedDocument


def variant_name(keys: list[str], values: tuple[Any, ...]) -> str:
    """``k=v`` pairs joined by ``,`` with the last segment of each key (DESIGN: matrix)."""
    return ",".join(f"{key.rsplit('.', 1)[-1]}={_show(value)}" for key, value in zip(keys, values))


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def expand_matrix(node: Node, docs: dict[str, YamlDocument], file: str,
                  resolve_key: Any) -> list[Variant] | None:
    """One variant per combination of ``matrix`` values, or None without a matrix.

    ``resolve_key(dotted, where)`` turns a dotted key into a path in the data (raising a positioned
    error for a key that names no field).
    """
    if not isinstance(node.value, dict) or "matrix" not in node.value:
        return None
    matrix = node.value.pop("matrix")
    whole = compose(_copy(node), docs, file)  # the pipeline without its matrix: what the keys must name
    keys_at = {}
    if not isinstance(matrix.value, dict) or not matrix.value:
        where = docs[matrix.file].where(matrix.at)
        raise ConfigError(where, "matrix must map dotted keys to lists of values",
                          docs[matrix.file].snippet(where))
    for key, values in matrix.value.items():
        key_where = docs[values.file].where(values.at[:-1] + (key,), key=True)
        if not isinstance(values.value, list) or not values.value:
            where = docs[values.file].where(values.at)
            raise ConfigError(where, f"matrix key {key!r} needs a non-empty list of values",
                              docs[values.file].snippet(where))
        keys_at[key] = resolve_key(key, key_where, whole)
    keys = list(matrix.value)
    combos = list(itertools.product(*(matrix.value[k].value for k in keys)))
    if len(combos) > MAX_VARIANTS:
        where = docs[matrix.file].where(matrix.at)
        raise ConfigError(where, f"matrix makes {len(combos)} variants; at most {MAX_VARIANTS}",
                          docs[matrix.file].snippet(where))
    variants = []
    for combo in combos:
        tree = _copy(node)
        for key, value_node in zip(keys, combo):
            _set(tree, keys_at[key], value_node)
        name = variant_name(keys, tuple(v.value for v in combo))
        variants.append(Variant(name, compose(tree, docs, file)))
    return variants


def _copy(node: Node) -> Node:
    if isinstance(node.value, dict):
        return Node({k: _copy(v) for k, v in node.value.items()}, node.file, node.at)
    if isinstance(node.value, list):
        return Node([_copy(v) for v in node.value], node.file, node.at)
    return Node(node.value, node.file, node.at)


def _set(tree: Node, path: PathKey, value: Node) -> None:
    """Put ``value`` at ``path``, creating mappings on the way (the value keeps its matrix position)."""
    node = tree
    for part in path[:-1]:
        if isinstance(node.value, dict):
            if part not in node.value or not isinstance(node.value[part].value, (dict, list)):
                node.value[part] = Node({}, value.file, value.at)
            node = node.value[part]
        else:
            node = node.value[part]
    if isinstance(node.value, dict):
        node.value[path[-1]] = value
    else:
        node.value[path[-1]] = value
