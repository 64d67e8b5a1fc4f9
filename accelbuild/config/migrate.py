"""``accelbuild migrate``: rewrite format-1 pipeline files into format 2, in place, comments kept.

The moves are those loading applies (``config/formats.py``, from the families' fragments): each moved key's
text (``key: value  # comment``) is cut from its place and written under ``target``, with the section it
leaves removed once empty. Edits are made on the text at the positions PyYAML's composer gives, so every
other byte stays as it was. A layout that cannot be edited safely (a flow mapping over several lines, a
document in flow style) is refused at its position. The rewritten text is checked before it is written:
it must load to the same data as the original read as format 2.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from accelbuild.config import compose, formats
from accelbuild.config.formats import Move
from accelbuild.config.yaml_source import YamlDocument, load_yaml, parse_yaml
from accelbuild.errors import ConfigError, ConfigErrors, Where
from accelbuild.util.files import write_bytes_atomic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Migrated:
    """What migrating one file did: ``moves`` are empty for a file already in format 2."""

    file: str
    changed: bool
    moves: tuple[Move, ...] = ()


@dataclass(frozen=True)
class _Text:
    """A moved value as written, the comment lines above its key, and its section's comment (``# ...``)."""

    value: str
    comment: str = ""  # the rest of its line, when that is a comment (spacing kept)
    above: tuple[str, ...] = ()
    section: str = ""


@dataclass
class _Edits:
    text: str
    spans: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, replacement)

    def replace(self, start: int, end: int, new: str) -> None:
        self.spans.append((start, end, new))

    def apply(self) -> str:
        text = self.text
        for start, end, new in sorted(self.spans, key=lambda s: (s[0], s[1]), reverse=True):
            text = text[:start] + new + text[end:]
        return text


def migrate_files(paths: list[str]) -> list[str]:
    """Migrate each file; one line per file saying what was done. Every file is tried; the errors of those
    that could not be rewritten are raised together at the end (the others are written)."""
    lines, errors = [], []
    for shown in paths:
        try:
            result = migrate_file(Path(shown), shown)
        except ConfigErrors as exc:
            errors.extend(exc.errors)
            continue
        except ConfigError as exc:
            errors.append(exc)
            continue
        if not result.changed:
            lines.append(f"{shown}: already format 2, unchanged")
        else:
            moved = ", ".join(".".join(m.source) for m in result.moves)
            lines.append(f"{shown}: rewritten in format 2" + (f" (moved: {moved})" if moved else ""))
    if errors:
        raise ConfigErrors(errors)
    return lines


def migrate_file(path: Path, shown: str | None = None) -> Migrated:
    """Rewrite ``path`` into format 2 (atomically); a file already in format 2 is left as it is."""
    shown = shown or str(path)
    doc = load_yaml(path, shown)
    if not isinstance(doc.data, dict):
        raise ConfigError(doc.where(()), "not a pipeline file: expected a mapping starting with 'accelbuild: 1'")
    if not formats.is_format1(doc.data):
        version = doc.data.get("accelbuild")
        if type(version) is int and version == formats.FORMAT:
            return Migrated(shown, False)
        raise ConfigError(doc.where(("accelbuild",)), f"not a format-1 file (accelbuild: {version}); "
                                                      "migrate rewrites format 1 into format 2")
    node, _ = compose.load_chain(path, shown)  # the family may come from a base file
    family = formats.family_of(node)
    new_text, moves = rewrite(doc, family)
    _check(doc, family, new_text)
    write_bytes_atomic(path, new_text.encode("utf-8"))
    return Migrated(shown, True, tuple(moves))


def rewrite(doc: YamlDocument, family: str) -> tuple[str, list[Move]]:
    """The format-2 text of the format-1 document ``doc`` of family ``family``, and the keys it moved."""
    root = yaml.compose(doc.text)
    assert isinstance(root, yaml.MappingNode)
    edits = _Edits(doc.text)
    version = _child(root, "accelbuild")
    assert version is not None
    edits.replace(version.start_mark.index, version.end_mark.index, str(formats.FORMAT))
    found = formats.moves_in(compose._annotate(doc.data, doc.file, ()), family)
    if not found and not _matrix_moves(root, family):
        return edits.apply(), []
    if _is_flow(root):
        _refuse(doc, root, "a pipeline written as one flow mapping")
    moved: dict[tuple[str, ...], _Text] = {}  # dest -> the value as written, with its comments
    by_parent: dict[tuple[str, ...], list[Move]] = {}
    for move, _ in found:
        by_parent.setdefault(move.source[:-1], []).append(move)
    for parent_path, moves in by_parent.items():
        parent = _at(root, parent_path)
        assert isinstance(parent, yaml.MappingNode)
        emptied = {m.source[-1] for m in moves} >= {k.value for k, _ in parent.value}
        header = _section_comment(doc.text, root, parent_path) if emptied else ""
        for move in moves:
            pair = _pair(parent, move.source[-1])
            if pair is None:  # written through a merge key (<<: *anchor)
                _refuse(doc, parent, f"{'.'.join(move.source)} from a merged anchor")
            key, value = pair  # type: ignore[misc]
            if not isinstance(value, yaml.ScalarNode):
                _refuse(doc, value, f"{'.'.join(move.source)} is not a single value")
            if move.dest is not None:
                above = () if _is_flow(parent) else _comments_above(doc.text, key)
                if header and move.dest[:-1] != ("target",) + parent_path:
                    above, header = (header, *above), ""  # the section's own comment, on its first key
                moved[move.dest] = _Text(*_value_text(doc.text, value, move, bool(_is_flow(parent))), above,
                                         header)
                header = ""
        _remove_keys(doc, edits, root, parent_path, {m.source[-1] for m in moves})
    _rewrite_matrix(doc, edits, root, family)
    if moved:
        _insert_under_target(doc, edits, root, moved)
    return edits.apply(), [m for m, _ in found]


def _check(doc: YamlDocument, family: str, new_text: str) -> None:
    """The rewritten text must read as the original does (as format 2); else refuse, writing nothing."""
    old = compose._annotate(doc.data, doc.file, ())
    formats.upgrade(old, {doc.file: doc}, family=family, notes=False)
    expected = _plain(old)
    try:
        new = parse_yaml(new_text, doc.file).data
    except ConfigError:
        new = None
    if new != expected:
        raise ConfigError(doc.where(()), "migrate cannot rewrite this file safely (its layout is unusual); "
                                         "move the keys by hand (docs/pipeline-reference.md, Format 1)")


def _plain(node: compose.Node) -> Any:
    if isinstance(node.value, dict):
        return {k: _plain(v) for k, v in node.value.items()}
    if isinstance(node.value, list):
        return [_plain(v) for v in node.value]
    return node.value


def _refuse(doc: YamlDocument, node: yaml.Node, what: str) -> None:
    where = Where(doc.file, node.start_mark.line + 1, node.start_mark.column + 1)
    raise ConfigError(where, f"migrate cannot rewrite {what} safely; move the keys by hand "
                             "(docs/pipeline-reference.md, Format 1)", doc.snippet(where))


def _is_flow(node: yaml.Node) -> bool:
    """Whether a mapping or sequence node is written in flow style (``{a: 1}``, ``[1, 2]``); scalars never are."""
    return bool(getattr(node, "flow_style", False))


def _line_end(text: str, index: int) -> int:
    """The index after the newline of the line holding ``index`` (or the end of the text)."""
    end = text.find("\n", index)
    return len(text) if end < 0 else end + 1


def _child(mapping: yaml.Node, key: str) -> yaml.Node | None:
    pair = _pair(mapping, key)
    return pair[1] if pair else None


def _pair(mapping: yaml.Node, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    if isinstance(mapping, yaml.MappingNode):
        for k, v in mapping.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return k, v
    return None


def _at(root: yaml.Node, path: tuple[str, ...]) -> yaml.Node:
    node = root
    for part in path:
        child = _child(node, part)
        assert child is not None
        node = child
    return node


def _comment_after(text: str, end: int) -> str:
    """The comment after a value on its line (``# ...``), or ""."""
    rest = text[end:_line_end(text, end)].strip()
    return rest if rest.startswith("#") else ""


def _value_text(text: str, value: yaml.Node, move: Move, in_flow: bool) -> tuple[str, str]:
    """The value as written (a file name's suffix converted), with its line's comment unless in a flow
    mapping (the comment of the line stays with what remains of it)."""
    written = text[value.start_mark.index:value.end_mark.index]
    if move.suffix and isinstance(value.value, str) and value.value.endswith(move.suffix[0]):
        converted = move.value(value.value)
        written = written.replace(value.value, converted) if value.value in written else converted
    rest = "" if in_flow else text[value.end_mark.index:_line_end(text, value.end_mark.index)].rstrip("\r\n")
    return written, rest if rest.strip().startswith("#") else ""


def _comments_above(text: str, key: yaml.Node) -> tuple[str, ...]:
    """The own-line comments right above a block key (they move, and are removed, with it)."""
    return tuple(line.strip() for line in text[_comments_start(text, key):_line_start(text, key)].splitlines()
                 if line.strip())


def _line_start(text: str, node: yaml.Node) -> int:
    return text.rfind("\n", 0, node.start_mark.index) + 1


def _comments_start(text: str, key: yaml.Node) -> int:
    """Where the own-line comments right above ``key``'s line start (its line when there are none)."""
    start = _line_start(text, key)
    while start > 0:
        previous = text.rfind("\n", 0, start - 1) + 1
        if not text[previous:start].strip().startswith("#"):
            break
        start = previous
    return start


def _section_comment(text: str, root: yaml.MappingNode, path: tuple[str, ...]) -> str:
    """The comment on a block section's own line (``section:  # ...``)."""
    if not path:
        return ""
    pair = _pair(_at(root, path[:-1]), path[-1])
    if pair is None or _is_flow(pair[1]) or not isinstance(pair[1], yaml.MappingNode):
        return ""
    return _comment_after(text, pair[0].end_mark.index + 1)


def _remove_keys(doc: YamlDocument, edits: _Edits, root: yaml.MappingNode, parent_path: tuple[str, ...],
                 keys: set[str]) -> None:
    """Remove ``keys`` from the mapping at ``parent_path``, and the mapping itself once nothing is left."""
    parent = _at(root, parent_path)
    assert isinstance(parent, yaml.MappingNode)
    remaining = [(k, v) for k, v in parent.value if not (isinstance(k, yaml.ScalarNode) and k.value in keys)]
    text = doc.text
    if _is_flow(parent):
        if parent.start_mark.line != parent.end_mark.line:
            _refuse(doc, parent, "a flow mapping over several lines")
        if remaining or not parent_path:
            items = ", ".join(text[k.start_mark.index:v.end_mark.index] for k, v in remaining)
            edits.replace(parent.start_mark.index, parent.end_mark.index, "{" + items + "}")
            return
    elif remaining:
        for k, v in parent.value:
            if isinstance(k, yaml.ScalarNode) and k.value in keys:
                _remove_lines(doc, edits, k, v, with_comments=True)
        return
    # nothing left: remove the section's own key from its parent
    grand = _at(root, parent_path[:-1])
    key, value = _pair(grand, parent_path[-1])  # type: ignore[misc]
    if _is_flow(grand):
        _refuse(doc, grand, "a flow mapping holding a moved section")
    _remove_lines(doc, edits, key, value, keep_comment=bool(_is_flow(value)))


def _remove_lines(doc: YamlDocument, edits: _Edits, key: yaml.Node, value: yaml.Node,
                  with_comments: bool = False, keep_comment: bool = False) -> None:
    """Remove a block mapping entry: the lines from its key (or the comments right above it) to the end of
    its value; ``keep_comment``: the comment after the value stays, on a line of its own."""
    text = doc.text
    start = _line_start(text, key)
    if text[start:key.start_mark.index].strip():
        _refuse(doc, key, "a key that does not start its line")
    if with_comments:
        start = _comments_start(text, key)
    end_index = value.end_mark.index
    if value.end_mark.column == 0 and end_index > value.start_mark.index:  # a block ends at the next line
        end = end_index
    else:
        end = _line_end(text, end_index)
    comment = _comment_after(text, end_index) if keep_comment else ""
    edits.replace(start, end, f"{' ' * key.start_mark.column}{comment}\n" if comment else "")


def _matrix_moves(root: yaml.MappingNode, family: str) -> bool:
    matrix = _child(root, "matrix")
    table = {".".join(m.source) for m in formats.family_table(family).values()}
    return isinstance(matrix, yaml.MappingNode) and any(k.value in table for k, _ in matrix.value)


def _rewrite_matrix(doc: YamlDocument, edits: _Edits, root: yaml.MappingNode, family: str) -> None:
    """Matrix keys naming a moved key name its format-2 place (a key its family never read is removed)."""
    matrix = _child(root, "matrix")
    if not isinstance(matrix, yaml.MappingNode):
        return
    table = {".".join(m.source): m for m in formats.family_table(family).values()}
    for key, values in matrix.value:
        move = table.get(key.value)
        if move is None:
            continue
        if move.dest is None:
            if _is_flow(matrix):
                _refuse(doc, matrix, "a flow-style matrix")
            _remove_lines(doc, edits, key, values)
            continue
        edits.replace(key.start_mark.index, key.end_mark.index, ".".join(move.dest))
        if move.suffix and isinstance(values, yaml.SequenceNode):
            for item in values.value:
                if isinstance(item, yaml.ScalarNode) and item.value.endswith(move.suffix[0]):
                    edits.replace(item.start_mark.index, item.end_mark.index, move.value(item.value))


def _nest(moved: dict[tuple[str, ...], _Text]) -> tuple[dict[str, Any], dict[str, str]]:
    """``{("target", "section", "key"): value}`` as ``{"section": {"key": value}}``, and the
    comments of the sections made on the way (by their name)."""
    tree: dict[str, Any] = {}
    sections: dict[str, str] = {}
    for dest, text in moved.items():
        assert dest[0] == "target"
        node = tree
        for part in dest[1:-1]:
            node = node.setdefault(part, {})
        node[dest[-1]] = text
        if text.section and len(dest) > 2:
            sections.setdefault(dest[-2], text.section)
    return tree, sections


def _block(tree: dict[str, Any], indent: int, step: int, sections: dict[str, str]) -> str:
    out = []
    pad = " " * indent
    for key, value in tree.items():
        if isinstance(value, dict):
            comment = f"  {sections[key]}" if key in sections else ""
            out.append(f"{pad}{key}:{comment}\n{_block(value, indent + step, step, sections)}")
        else:
            out.extend(f"{pad}{line}\n" for line in value.above)
            out.append(f"{pad}{key}: {value.value}{value.comment}\n")
    return "".join(out)


def _flow(tree: dict[str, Any]) -> tuple[str, list[str]]:
    """Flow items of ``tree`` and the comments of its values (a flow mapping cannot hold them)."""
    items, comments = [], []
    for key, value in tree.items():
        if isinstance(value, dict):
            inner, more = _flow(value)
            items.append(f"{key}: {{{inner}}}")
            comments += more
        else:
            items.append(f"{key}: {value.value}")
            comments += [line.lstrip("# ") for line in value.above]
            if value.section:
                comments.append(value.section.lstrip("# "))
            if value.comment:
                comments.append(value.comment.strip().lstrip("# "))
    return ", ".join(items), comments


def _insert_under_target(doc: YamlDocument, edits: _Edits, root: yaml.MappingNode,
                         moved: dict[tuple[str, ...], _Text]) -> None:
    tree, sections = _nest(moved)
    text = doc.text
    pair = _pair(root, "target")
    if pair is None:  # a target section of its own, before models (or at the end)
        models = _pair(root, "models")
        at = text.rfind("\n", 0, models[0].start_mark.index) + 1 if models else len(text)
        indent = root.start_mark.column
        block = f"{' ' * indent}target:\n{_block(tree, indent + 2, 2, sections)}"
        if at == len(text) and text and not text.endswith("\n"):
            block = "\n" + block
        edits.replace(at, at, block)
        return
    key, target = pair
    if not isinstance(target, yaml.MappingNode):
        _refuse(doc, target, "a target that is not a mapping")
    for name in tree:
        if _child(target, name) is not None:
            _refuse(doc, _child(target, name), f"target.{name} next to its format-1 key")  # type: ignore[arg-type]
    if _is_flow(target):
        if target.start_mark.line != target.end_mark.line:
            _refuse(doc, target, "a flow mapping over several lines")
        items, comments = _flow(tree)
        close = target.end_mark.index - 1  # the closing brace
        edits.replace(close, close, (", " if target.value else "") + items)
        if comments:
            end = _line_end(text, target.end_mark.index)
            newline = end if text[end - 1:end] != "\n" else end - 1
            edits.replace(newline, newline, "  # " + "; ".join(comments))
        return
    first = target.value[0][0] if target.value else None
    indent = first.start_mark.column if first is not None else key.start_mark.column + 2
    step = max(indent - key.start_mark.column, 1)
    end_index = target.end_mark.index
    at = end_index if target.end_mark.column == 0 else _line_end(text, end_index)
    block = _block(tree, indent, step, sections)
    if at == len(text) and text and not text.endswith("\n"):
        block = "\n" + block
    edits.replace(at, at, block)
