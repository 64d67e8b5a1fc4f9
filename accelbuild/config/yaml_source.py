"""Safe YAML loading that remembers where every value came from.

PyYAML's composer gives a node tree with marks; we build plain Python values from it ourselves so that
every value (and every mapping key) keeps its 1-based line and column, keyed by its path in the document
(``("models", 0, "path")``). Only the safe tags are constructed; anything else (``!!python/object``...)
is an error, never executed. Alias expansion is bounded, so "billion laughs" documents fail fast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from accelbuild.errors import ConfigError, Where

Path_ = tuple[str | int, ...]

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_NODES = 200_000
MAX_WRITTEN = 20_000  # keys and values written out: bounds the (pure-Python, ~50 us per node) parse time
MAX_DEPTH = 64
MAX_INT_BITS = 256  # far beyond any setting; keeps every integer printable (Python refuses > 4300 digits)
MAX_INT_TEXT = 1000  # characters (without '_'): longer integers are refused before they are built (1:59:59:...
                     # sexagesimal integers cost quadratic time to build)


@dataclass
class YamlDocument:
    """A parsed YAML document: its data and the position of every value and key."""

    file: str
    data: Any
    text: str
    value_pos: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    key_pos: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    _lines: list[str] | None = field(default=None, repr=False, compare=False)  # ``text``, split once

    def where(self, path: Path_, *, key: bool = False) -> Where:
        """Position of the value (or, with ``key``, the mapping key) at ``path``.

        Falls back to the closest enclosing node that has a position.
        """
        table = self.key_pos if key else self.value_pos
        probe = tuple(path)
        while probe:
            if probe in table:
                return Where(self.file, *table[probe])
            if probe in self.value_pos:
                return Where(self.file, *self.value_pos[probe])
            probe = probe[:-1]
        return Where(self.file, *self.value_pos.get((), (1, 1)))

    def has_value(self, path: Path_) -> bool:
        return tuple(path) in self.value_pos

    def snippet(self, where: Where) -> str:
        """The source line at ``where`` with a caret under the column, for error output."""
        if self._lines is None:  # split once: a file with thousands of errors asks for thousands of snippets
            self._lines = self.text.splitlines()
        lines = self._lines
        if not 1 <= where.line <= len(lines):
            return ""
        line = lines[where.line - 1]
        gutter = f"{where.line:>5} | "
        return f"{gutter}{line}\n{' ' * (len(gutter) - 2)}| {' ' * (where.col - 1)}^"


def _decode(path: Path, shown: str, raw: bytes) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            Where(shown, line, col), f"file is not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
        ) from None


def load_yaml(path: Path, shown: str | None = None) -> YamlDocument:
    """Read and parse ``path`` safely. Errors are ``ConfigError`` with ``file:line:col``."""
    shown = shown or str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(shown, "no such file") from None
    except IsADirectoryError:
        raise ConfigError(shown, "is a directory, not a pipeline YAML file") from None
    except OSError as exc:
        raise ConfigError(shown, f"cannot read: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(shown, f"file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    text = _decode(path, shown, raw)
    return parse_yaml(text, shown)


def parse_yaml(text: str, shown: str) -> YamlDocument:
    """Parse YAML text; see ``load_yaml``."""
    try:
        if not _plainly_small(text):
            _prescan(text, shown)  # refuse deep nesting (PyYAML's composer recurses) and huge documents early
        root = _compose(text)
    except yaml.MarkedYAMLError as exc:
        raise ConfigError(_mark_where(shown, exc.problem_mark or exc.context_mark),
                          f"YAML syntax error: {_syntax_message(exc)}") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise ConfigError(Where(shown, line, col),
                          f"YAML error: unacceptable character #x{code:04x}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(shown, f"YAML error: {exc}") from None
    doc = YamlDocument(file=shown, data=None, text=text)
    if root is None:
        return doc
    builder = _Builder(doc)
    builder.check_expansion(root)
    doc.data = builder.build(root, (), 0)
    return doc


def _compose(text: str) -> yaml.Node | None:
    """The node tree: libyaml's parser when PyYAML has it (several times faster: a no-op run parses every
    pipeline), PyYAML's own for anything libyaml rejects, so syntax errors read the same either way."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return yaml.compose(text, Loader=fast)
        except yaml.YAMLError:
            pass
    return yaml.compose(text, Loader=yaml.SafeLoader)


def _mark_where(shown: str, mark: yaml.Mark | None) -> Where:
    return Where(shown, mark.line + 1, mark.column + 1) if mark else Where(shown, 1, 1)


def _syntax_message(exc: yaml.MarkedYAMLError) -> str:
    """PyYAML's problem and context in one readable sentence."""
    problem, context = exc.problem, exc.context
    if problem and context and context.startswith("while"):
        mark = exc.context_mark
        start = f" that starts at {mark.line + 1}:{mark.column + 1}" if mark else ""
        return f"{problem} ({context}{start})"
    if problem and context:
        return f"{context}, but {problem.removeprefix('but ')}"
    return problem or context or "invalid YAML"


_OPEN = (yaml.BlockMappingStartToken, yaml.BlockSequenceStartToken, yaml.FlowMappingStartToken,
         yaml.FlowSequenceStartToken)
_CLOSE = (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)


_WRITTEN = (yaml.ScalarToken, yaml.AliasToken) + _OPEN  # each starts one key or value node


def _plainly_small(text: str) -> bool:
    """A document too small to break the limits: fewer brackets and less indentation than MAX_DEPTH
    levels need, and too short to hold MAX_WRITTEN values. Pipeline files are; they skip the prescan."""
    if len(text) > 16_384 or text.count("[") + text.count("{") > MAX_DEPTH:
        return False
    return max((len(line) - len(line.lstrip(" ")) for line in text.splitlines()), default=0) < MAX_DEPTH


def _prescan(text: str, shown: str) -> None:
    """Check nesting depth and document size on the token stream, before any node is composed.

    Composing holds every node in memory and costs far more per node than scanning, so a 4 MiB list of
    a million values is refused here, after ``MAX_WRITTEN`` of them, in bounded time and memory.
    """
    depth = 0
    written = 0
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(token, _WRITTEN):
            written += 1
            if written > MAX_WRITTEN:
                raise ConfigError(_mark_where(shown, token.start_mark),
                                  f"document has more than {MAX_WRITTEN} keys and values")
        if isinstance(token, _OPEN):
            depth += 1
            if depth > MAX_DEPTH + 1:  # the document's own root collection is level 0
                raise ConfigError(_mark_where(shown, token.start_mark), f"nesting deeper than {MAX_DEPTH} levels")
        elif isinstance(token, _CLOSE):
            depth -= 1


_CORE = "tag:yaml.org,2002:"
_PLAIN_TAGS = {
    yaml.ScalarNode: {_CORE + t for t in ("null", "bool", "int", "float", "str", "timestamp")},
    yaml.SequenceNode: {_CORE + "seq"},
    yaml.MappingNode: {_CORE + "map"},
}


class _Builder:
    """Turns composed nodes into Python values, recording positions, with bounded expansion."""

    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc
        self.nodes = 0
        self.constructor = yaml.SafeLoader("")

    def check_expansion(self, root: yaml.Node) -> None:
        """Refuse documents whose aliases expand past ``MAX_NODES``, at the value that expands."""
        sizes: dict[int, int] = {}

        def size(node: yaml.Node) -> int:
            if id(node) not in sizes:
                sizes[id(node)] = MAX_NODES + 1  # provisional: a self-referencing alias is unbounded
                children = _children(node)
                sizes[id(node)] = min(MAX_NODES + 1, 1 + sum(size(c) for c in children))
            return sizes[id(node)]

        node = root
        if size(node) <= MAX_NODES:
            return
        visited = set()  # a value that contains itself (`a: &a [*a]`) would send this descent round forever
        while True:
            visited.add(id(node))
            bigger = next((c for c in _children(node, keys=False) if size(c) > MAX_NODES), None)
            if bigger is not None and id(bigger) in visited:
                raise ConfigError(self._where(bigger), "this value contains itself through an alias, "
                                                       "so the document expands without end")
            if bigger is None:
                raise ConfigError(self._where(node), f"document expands to more than {MAX_NODES} values (aliases?)")
            node = bigger

    def _where(self, node: yaml.Node) -> Where:
        return Where(self.doc.file, node.start_mark.line + 1, node.start_mark.column + 1)

    def build(self, node: yaml.Node, path: Path_, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ConfigError(
                self._where(node), f"document expands to more than {MAX_NODES} values (aliases?)"
            )
        if depth > MAX_DEPTH:
            raise ConfigError(self._where(node), f"nesting deeper than {MAX_DEPTH} levels")
        self.doc.value_pos[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        self._check_tag(node)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, path + (i,), depth + 1) for i, item in enumerate(node.value)]
        return self._scalar(node)

    def _check_tag(self, node: yaml.Node) -> None:
        """Only plain YAML values: a tag like ``!!python/object`` is refused before anything is built."""
        allowed = _PLAIN_TAGS[type(node)]
        if node.tag not in allowed:
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            raise ConfigError(self._where(node), f"unsupported YAML tag {tag!r}; only plain YAML values are allowed")

    def _mapping(self, node: yaml.MappingNode, path: Path_, depth: int) -> dict[str, Any]:
        own_keys = {id(key_node) for key_node, _ in node.value}
        try:
            self.constructor.flatten_mapping(node)  # resolves `<<: *anchor` merge keys
        except yaml.constructor.ConstructorError as exc:
            raise ConfigError(_mark_where(self.doc.file, exc.problem_mark), exc.problem or "bad merge key") from None
        result: dict[str, Any] = {}
        seen_own: set[str] = set()
        for key_node, value_node in node.value:
            key = self._scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise ConfigError(self._where(key_node), "mapping keys must be plain scalars")
            key = str(key) if not isinstance(key, str) else key
            if id(key_node) in own_keys:  # a merged-in key may be overridden, an own one not twice
                if key in seen_own:
                    raise ConfigError(self._where(key_node), f"duplicate key {key!r}")
                seen_own.add(key)
            child = path + (key,)
            self.doc.key_pos[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            result[key] = self.build(value_node, child, depth + 1)
        return result

    def _scalar(self, node: yaml.Node) -> Any:
        self._check_tag(node)
        if node.tag == _CORE + "timestamp":  # no config value is a date: keep what the user wrote
            return node.value
        if node.tag == _CORE + "int" and len(node.value.replace("_", "")) > MAX_INT_TEXT:
            raise ConfigError(self._where(node), _too_large(node.value))
        try:
            value = self.constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            problem = exc.problem or "cannot construct value"
            raise ConfigError(self._where(node), problem.replace("\n", " ")) from None
        except (ValueError, OverflowError) as exc:
            raise ConfigError(self._where(node), f"invalid value: {exc}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(self._where(node), f"{node.value!r} is not a finite number")
        if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            raise ConfigError(self._where(node), _too_large(node.value))
        return value


def _too_large(text: str) -> str:
    shown = text if len(text) <= 40 else f"{text[:37]}..."
    return f"{shown!r} is too large a number for any setting ({len(text)} characters)"


def _children(node: yaml.Node, keys: bool = True) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for k, v in node.value for n in ((k, v) if keys else (v,))]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
