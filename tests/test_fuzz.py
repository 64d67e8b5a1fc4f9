"""Property-based fuzzing of the input readers: whatever the bytes, a result or a user error, never a crash.

Four targets, each a strategy and a property (``TARGETS``), run here on a short budget and by
``bench/fuzz.py`` on a long one:

- ``yaml``: YAML text from a grammar of config-like keys and values (anchors, tags, huge and odd numbers,
  paths, flow and block style), with random unicode spliced in, through ``parse_yaml`` and, from a file,
  ``load_pipeline``: a ``PipelineSpec`` or ``ConfigError``/``ConfigErrors``/``UserError``, every
  message positioned inside the file;
- ``schema``: random JSON-like data (and near-valid configs) dumped to YAML and through
  ``schema_check.validate`` for both schemas: a list of positioned ``ConfigError``, never an exception;
- ``dfp``: a valid DFP mutated (bit flips, interesting integers, inserts, deletes, truncation), optionally
  with its checksums recomputed so the mutation reaches the structural checks: ``parse_dfp`` returns a
  DFP (whose bytes are then canonical) or raises ``InputFileError``;
- ``tflite``: canned models from ``accelbuild.testing.tflite_models`` mutated the same way, read from a
  file by ``load_tflite``: an ONNX model or ``UserError``.

Crashes found by fuzzing are kept below as regression tests.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import onnx
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from accelbuild.config import schema_check
from accelbuild.config.load import load_pipeline
from accelbuild.config.spec import PipelineSpec
from accelbuild.config.yaml_source import parse_yaml
from accelbuild.errors import ConfigError, ConfigErrors, InputFileError, UserError, Where, render_user_error
from accelbuild.targets.mx3.dfp import describe, dfp_bytes, parse_dfp
from accelbuild.targets.mx3.dfp.format import CHECKSUM_SIZE, PREAMBLE, TABLE_ENTRY
from accelbuild.testing import tflite_models

from conftest import sample_dfp

REPO = Path(__file__).resolve().parents[1]
# Hypothesis warns when a strategy's repr grows large (recursive dictionaries do); it costs time, not truth.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")



def short(examples: int) -> settings:
    """A short budget for CI (the whole file runs in well under 30 s); bench/fuzz.py runs the same long."""
    return settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))


# =========================================================================== shared workspace


@cache
def workspace() -> Path:
    """A folder with files a fuzzed pipeline may name: a model, a profile, bits/crop JSON, a data folder."""
    folder = Path(tempfile.mkdtemp(prefix="accelbuild-fuzz-"))
    atexit.register(shutil.rmtree, folder, True)
    (folder / "models").mkdir()
    shutil.copy(REPO / "examples" / "models" / "tinycls.onnx", folder / "models" / "tinycls.onnx")
    (folder / "profiles").mkdir()
    (folder / "profiles" / "board.yaml").write_text(
        "profile: 1\nname: board\ndescription: fuzz\ninherits: mx3\nchip:\n  clock_mhz: 850\n")
    (folder / "bits.json").write_text('{"fc": 16}')
    (folder / "crop.json").write_text('{"inputs": [], "outputs": []}')
    (folder / "data").mkdir()
    return folder


# =========================================================================== YAML: a grammar of configs


def _schema_words() -> tuple[list[str], list[Any]]:
    """Every property name and every enum/const value in the pipeline schema (the grammar's vocabulary)."""
    keys: set[str] = set()
    values: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            keys.update(k for k in node.get("properties", {}) if isinstance(k, str))
            values.extend(node.get("enum", []))
            if "const" in node:
                values.append(node["const"])
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(schema_check.load_schema("pipeline.schema.json"))
    return sorted(keys), values


KEYS, ENUM_VALUES = _schema_words()
INTERESTING_INTS = [0, 1, -1, 2, 3, 4, 8, 16, 17, 63, 64, 65536, 65537, 2**31 - 1, 2**31, 2**32, 2**63, 2**64,
                    10**12, 10**30, 2**256, 2**257, -(2**63)]
SCALAR_TEXT = [
    "1", "0", "-1", "1.5", "1e400", "1.0e+400", "-1.0e+400", ".nan", ".NaN", ".inf", "-.inf", "0x1f", "0o17", "017",
    "0b101", "1_000", "1:30", "1:59:59", "190:20:30.15", "~", "null", "Null", "true", "yes", "no", "on", "off", "y",
    "2001-12-14", "2001-12-14t21:59:43.10-05:00", "''", '""', "' '", '"\\u0000"', '"\\x1b[31m"', "auto", "min",
    "models/tinycls.onnx", "../models/tinycls.onnx", "models/missing.onnx", "/etc/hostname", "models",
    "profiles/board.yaml", "profiles/missing.yaml", "bits.json", "crop.json", "data", "data/", "model.pt",
    "'models/tinycls.onnx'", "x" * 200, "!!binary aGVsbG8=", "!!set {a, b}", "!!omap [a: 1]",
    "!!python/object/apply:os.system ['true']", "!!str 1", "!!int '3'", "!!float 1", "!custom x", "*undefined",
    '"\\ud800"', "[]", "{}", "[[]]", "|\n  block", ">\n  folded",
]


@dataclass(frozen=True)
class Scalar:
    text: str


@dataclass(frozen=True)
class Mapping:
    items: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Sequence:
    items: tuple[Any, ...]


def _plain(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


scalars = st.one_of(
    st.sampled_from(SCALAR_TEXT),
    st.sampled_from(INTERESTING_INTS).map(str),
    st.integers().map(str),
    st.floats(allow_nan=False).map(repr),
    st.sampled_from(ENUM_VALUES).map(_plain),
    st.text(max_size=12).map(json.dumps),  # a double-quoted string (JSON escapes are YAML escapes)
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=8),  # printable, unquoted
).map(Scalar)
keys = st.one_of(st.sampled_from(KEYS), st.sampled_from(KEYS), st.sampled_from(KEYS), st.text(max_size=8).map(json.dumps),
                 st.sampled_from(["<<", "? [a]", "1", "true", "null", "accelbuild", "models"]))
nodes = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(st.tuples(keys, inner), max_size=6).map(lambda kv: Mapping(tuple(dict(kv).items()))),
        st.lists(inner, max_size=5).map(lambda items: Sequence(tuple(items))),
    ),
    max_leaves=40,
)


def _render_flow(node: Any) -> str:
    if isinstance(node, Scalar):
        return node.text if "\n" not in node.text else json.dumps(node.text)
    if isinstance(node, Mapping):
        return "{" + ", ".join(f"{k}: {_render_flow(v)}" for k, v in node.items) + "}"
    return "[" + ", ".join(_render_flow(v) for v in node.items) + "]"


def _render_block(node: Any, indent: int, flow_at: int) -> str:
    """Block style down to depth ``flow_at``, flow style below it."""
    pad = " " * indent
    if isinstance(node, Scalar) or flow_at <= 0 or not node.items:
        return " " + _render_flow(node)
    lines = []
    if isinstance(node, Mapping):
        for key, child in node.items:
            lines.append(f"{pad}{key}:{_render_block(child, indent + 2, flow_at - 1)}")
    else:
        for child in node.items:
            lines.append(f"{pad}-{_render_block(child, indent + 2, flow_at - 1)}")
    return "\n" + "\n".join(lines)


PIPELINE_SCHEMA = schema_check.load_schema("pipeline.schema.json")
PATHS = {"path": ["models/tinycls.onnx"] * 4 + ["models/missing.onnx", "data", "bits.json", "model.pt", "models"],
         "chip_gen": ["mx3", "mx3_preprod", "profiles/board.yaml", "profiles/missing.yaml", "mx4", "data/"],
         "bits_file": ["bits.json", "crop.json", "missing.json", "data"],
         "in_out_file": ["crop.json", "bits.json", "missing.json"], "data": ["data", "data/", "bits.json", "nowhere"],
         "dir": ["build/x", "build", ".", "..", "/tmp/accelbuild-fuzz-out"]}


def _pointer(schema: dict) -> tuple:
    """Where ``schema`` (a node of the pipeline schema, after $ref) sits in it."""
    return _POINTERS[id(schema)]


def _index(node: Any, pointer: tuple, out: dict) -> dict:
    if isinstance(node, dict):
        out.setdefault(id(node), pointer)
        for key, child in node.items():
            _index(child, pointer + (key,), out)
    elif isinstance(node, list):
        for i, child in enumerate(node):
            _index(child, pointer + (i,), out)
    return out


_POINTERS = _index(PIPELINE_SCHEMA, (), {})


# Hypothesis favours the first choice (and shrinks towards it): True one time in 30 or so.
RARELY = st.sampled_from([False] * 29 + [True])


def _bounds(schema: dict) -> list[int]:
    low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
    high = schema.get("maximum", 2**31)
    return [low, low - 1, low + 1, high, high + 1, high - 1] if isinstance(low, int) and isinstance(high, int) else [0]


def _at(pointer: tuple) -> dict:
    node: Any = PIPELINE_SCHEMA
    for part in pointer:
        node = node[part]
    return schema_check.resolve_ref(node, PIPELINE_SCHEMA)


@st.composite
def from_schema(draw: st.DrawFn, pointer: tuple = (), key: str = "", depth: int = 0) -> Any:
    """A node shaped by the sub-schema at ``pointer``: its keys, types, enums and bounds, with a few wrong turns.

    (A pointer rather than the schema itself keeps Hypothesis's reprs of the strategy short.)
    """
    schema = _at(pointer)
    if depth > 6 or draw(RARELY):
        return draw(nodes)  # a wrong turn: any value at all
    if key in PATHS and not draw(st.sampled_from([False, True, True, True])):
        return Scalar(draw(st.sampled_from(PATHS[key])))
    if "oneOf" in schema:
        branch = draw(st.integers(0, len(schema["oneOf"]) - 1))
        return draw(from_schema(_pointer(schema) + ("oneOf", branch), key, depth))
    if "const" in schema or "enum" in schema:
        return Scalar(_plain(draw(st.sampled_from(schema.get("enum", [schema.get("const")])))))
    kind = schema.get("type", "object" if "properties" in schema else None)
    kind = draw(st.sampled_from(kind)) if isinstance(kind, list) else kind
    if kind == "object":
        props = {k: _pointer(schema) + ("properties", k) for k in schema.get("properties", {})}
        for rule in schema.get("allOf", []):  # a union keyed on a value: draw the keys of one branch too
            branch = schema_check.resolve_ref(rule["then"], PIPELINE_SCHEMA)
            props.update({k: _pointer(branch) + ("properties", k) for k in branch.get("properties", {})
                          if k not in props})
        chosen = [k for k in props if k in schema.get("required", ()) or draw(st.booleans())]
        items = [(k, draw(from_schema(props[k], k, depth + 1))) for k in chosen]
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):  # a map such as bits: {layer: 8}
            items += [(name, draw(from_schema(_pointer(schema) + ("additionalProperties",), "", depth + 1)))
                      for name in draw(st.lists(st.sampled_from(["fc", "conv", "stem.conv", "x"]), max_size=3,
                                                unique=True))]
        stray = draw(keys)
        if draw(RARELY) and stray not in chosen:
            items.append((stray, draw(nodes)))  # a stray (maybe misspelt) key
        order = draw(st.permutations(range(len(items))))
        return Mapping(tuple(items[i] for i in order))
    if kind == "array" and "items" not in schema:  # a list of anything (matrix values)
        return Sequence(tuple(draw(st.lists(nodes, min_size=1, max_size=3))))
    if kind == "array":
        least = 0 if draw(RARELY) else schema.get("minItems", 0)
        item = from_schema(_pointer(schema) + ("items",), key, depth + 1)
        return Sequence(tuple(draw(st.lists(item, min_size=least, max_size=least + 2))))
    if kind == "integer":
        return Scalar(str(draw(st.sampled_from(_bounds(schema) + INTERESTING_INTS[:6]))))
    if kind == "number":
        return Scalar(draw(st.sampled_from(["0.5", "30", "0", "-1", "1e7", "1.0e+8", ".nan", "'30'"])))
    if kind == "boolean":
        return Scalar(draw(st.sampled_from(["true", "false", "yes", "1"])))
    if kind == "string":
        return Scalar(draw(st.sampled_from(["det", "cls", "a.b-c_1", "x y", "'1'", "images", "input"])))
    return draw(nodes)


@st.composite
def pipeline_texts(draw: st.DrawFn) -> str:
    """A config-like document from the pipeline schema, sometimes with anchors, noise and broken syntax."""
    root = draw(from_schema())
    if not isinstance(root, Mapping):
        root = Mapping((("accelbuild", Scalar("1")), ("models", root)))
    text = _render_block(root, 0, draw(st.integers(0, 6))).lstrip("\n") + "\n"
    if draw(st.integers(0, 4)) == 0:  # anchors and aliases, defined or not, maybe recursive
        text = text.replace("models:", draw(st.sampled_from(["models: &m", "models: *m", "models: &m\n  - *m\n"
                                                             "x:", "models: !!seq"])), 1)
    for _ in range(draw(st.sampled_from([0, 0, 0, 0, 1, 2, 3]))):  # random unicode (or structure) spliced in
        at = draw(st.integers(0, len(text)))
        noise = draw(st.one_of(st.text(max_size=4), st.sampled_from(["\t", ":", "- ", "{", "]", "&a ", "*a",
                                                                        "!!", "\n  ", "\ufeff", "\x00", "#"])))
        text = text[:at] + noise + text[at:]
    return text


def _lines(text: str) -> int:
    """Lines as YAML counts them (\\x85, \\u2028 and \\u2029 break lines too, as in str.splitlines())."""
    return len(text.splitlines()) + 1


def check_message(error: UserError, text: str) -> None:
    """A user error renders, and every position it names lies inside the text."""
    assert "Traceback" not in render_user_error(error)
    errors = error.errors if isinstance(error, ConfigErrors) else [error]
    lines = _lines(text)
    for item in errors:
        if isinstance(item, ConfigError) and isinstance(item.where, Where):
            assert 1 <= item.where.line <= lines + 1, (item, lines)
            assert item.where.col >= 1, item


def check_yaml(text: str) -> None:
    """Property: parse_yaml and load_pipeline give a result or a positioned user error, nothing else."""
    try:
        parse_yaml(text, "fuzz.yaml")
    except ConfigError as error:
        check_message(error, text)
    path = workspace() / "fuzz.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        spec = load_pipeline(str(path))
    except (ConfigError, ConfigErrors, UserError) as error:
        check_message(error, text)
    else:
        assert isinstance(spec, PipelineSpec)


# =========================================================================== schema mapping

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**200), 2**200) | st.sampled_from(INTERESTING_INTS)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10) | st.sampled_from(ENUM_VALUES),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=5),
    max_leaves=30,
)


@st.composite
def config_data(draw: st.DrawFn) -> Any:
    """Random JSON, or a near-valid config: known sections with random values and stray keys."""
    if draw(st.integers(0, 3)) == 0:
        return draw(json_values)
    model = {"path": "models/tinycls.onnx", **draw(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=4))}
    data: dict[str, Any] = {"accelbuild": draw(st.sampled_from([1, 1, 2, "1", None])), "models": [model]}
    for section in ("target", "benchmark", "closed_loop", "output"):
        if draw(st.booleans()):
            data[section] = draw(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=4))
    data.update(draw(st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), json_values, max_size=2)))
    return data


def check_schema(data: Any) -> None:
    """Property: validate() returns positioned ConfigErrors for any JSON-like data, for both schemas."""
    text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    try:
        doc = parse_yaml(text, "fuzz.yaml")
    except ConfigError:
        return  # not this property's business (e.g. deeper than the loader allows)
    for schema in ("pipeline.schema.json", "hardware.schema.json"):
        errors = schema_check.validate(doc, schema)
        assert isinstance(errors, list)
        for error in errors:
            assert isinstance(error, ConfigError) and isinstance(error.where, Where), error
            assert error.message and "Traceback" not in error.message
            assert 1 <= error.where.line <= _lines(text), (error, text)
        if not errors and schema == "pipeline.schema.json":
            root = schema_check.load_schema(schema)
            schema_check.apply_defaults(json.loads(json.dumps(doc.data)), root, root)


# =========================================================================== byte mutations

INTERESTING_WORDS = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 2**63 - 1, 2**64 - 1]
positions = st.integers(0, 2**20)
mutations = st.lists(st.one_of(
    st.tuples(st.just("flip"), positions, st.integers(0, 7)),
    st.tuples(st.just("byte"), positions, st.integers(0, 255)),
    st.tuples(st.just("word"), positions, st.sampled_from(INTERESTING_WORDS), st.sampled_from([1, 2, 4, 8])),
    st.tuples(st.just("insert"), positions, st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), positions, st.integers(1, 64)),
    st.tuples(st.just("truncate"), positions),
), min_size=1, max_size=6)


def mutate(data: bytes, ops: list[tuple]) -> bytes:
    out = bytearray(data)
    for op in ops:
        at = op[1] % (len(out) + 1)
        if op[0] == "flip" and at < len(out):
            out[at] ^= 1 << op[2]
        elif op[0] == "byte" and at < len(out):
            out[at] = op[2]
        elif op[0] == "word":
            size = op[3]
            out[at:at + size] = (op[2] & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        elif op[0] == "insert":
            out[at:at] = op[2]
        elif op[0] == "delete":
            del out[at:at + op[2]]
        elif op[0] == "truncate":
            del out[at:]
    return bytes(out)


# =========================================================================== DFP


@cache
def base_dfp() -> bytes:
    return dfp_bytes(sample_dfp())


def reseal(data: bytes) -> bytes:
    """Recompute every section digest the table can reach and the trailing file checksum."""
    out = bytearray(data)
    if len(out) >= PREAMBLE.size:
        _, _, _, header_length, count = PREAMBLE.unpack_from(out)
        table = PREAMBLE.size + header_length
        for index in range(min(count, 64)):
            at = table + index * TABLE_ENTRY.size
            if at + TABLE_ENTRY.size > len(out):
                break
            name, offset, length, _ = TABLE_ENTRY.unpack_from(out, at)
            if offset + length <= len(out):
                digest = hashlib.sha256(out[offset:offset + length]).digest()
                out[at:at + TABLE_ENTRY.size] = TABLE_ENTRY.pack(name, offset, length, digest)
    if len(out) > CHECKSUM_SIZE:
        out[-CHECKSUM_SIZE:] = hashlib.sha256(out[:-CHECKSUM_SIZE]).digest()
    return bytes(out)


def check_dfp(case: tuple[list[tuple], bool]) -> None:
    """Property: parse_dfp returns a DFP (canonical bytes, describable) or raises InputFileError."""
    ops, sealed = case
    data = mutate(base_dfp(), ops)
    if sealed:
        data = reseal(data)
    try:
        dfp = parse_dfp(data, "fuzz.dfp")
    except InputFileError as error:
        assert str(error).startswith("fuzz.dfp: ") and error.message
        return
    assert dfp_bytes(dfp) == data  # whatever is accepted is the one canonical encoding of its content
    describe(dfp, len(data))


# =========================================================================== TFLite

TFLITE_MODELS: dict[str, Callable[[], bytes]] = {
    "mobilenet_like": tflite_models.mobilenet_like,
    "detection_head": tflite_models.detection_head,
    "fp16_weights": tflite_models.fp16_weights,
    "sparse_weights": tflite_models.sparse_weights,
    "quantized_int8": lambda: tflite_models.quantized_cnn("int8"),
    "quantized_uint8": lambda: tflite_models.quantized_cnn("uint8", float_io=True),
}


@cache
def base_tflite(name: str) -> bytes:
    return TFLITE_MODELS[name]()


def check_tflite(case: tuple[str, list[tuple]]) -> None:
    """Property: load_tflite returns an ONNX model or raises UserError."""
    from accelbuild.frontends.tflite import load_tflite

    name, ops = case
    path = workspace() / "fuzz.tflite"
    path.write_bytes(mutate(base_tflite(name), ops))
    try:
        model = load_tflite(path)
    except UserError as error:
        assert str(error).startswith(str(path)), error
        return
    assert isinstance(model, onnx.ModelProto)  # (a model without outputs is refused by the import stage)


# =========================================================================== targets


@dataclass(frozen=True)
class Target:
    name: str
    strategy: st.SearchStrategy
    check: Callable[[Any], None]


TARGETS = (
    Target("yaml", pipeline_texts(), check_yaml),
    Target("schema", config_data(), check_schema),
    Target("dfp", st.tuples(mutations, st.booleans()), check_dfp),
    Target("tflite", st.tuples(st.sampled_from(sorted(TFLITE_MODELS)), mutations), check_tflite),
)


@short(200)
@given(pipeline_texts())
@example("accelbuild: 1\nmodels:\n  - path: models/tinycls.onnx\n")
@example("accelbuild: 1\nmodels: [{path: models/tinycls.onnx, quantize: {bits: {0x" + "f" * 400 + ": 8}}}]\n")
def test_yaml_loader_returns_spec_or_user_error(text: str) -> None:
    check_yaml(text)


@short(150)
@given(config_data())
def test_schema_errors_are_positioned(data: Any) -> None:
    check_schema(data)


@short(1000)
@given(st.tuples(mutations, st.booleans()))
def test_dfp_reader_returns_dfp_or_input_file_error(case: tuple[list[tuple], bool]) -> None:
    check_dfp(case)


@short(600)
@given(st.tuples(st.sampled_from(sorted(TFLITE_MODELS)), mutations))
def test_tflite_reader_returns_model_or_user_error(case: tuple[str, list[tuple]]) -> None:
    check_tflite(case)


def test_unmutated_inputs_are_accepted() -> None:
    """The fuzzers start from inputs that pass: a mutation is what makes a case fail."""
    check_dfp(([], False))
    assert parse_dfp(base_dfp(), "base.dfp")
    for name in TFLITE_MODELS:
        check_tflite((name, []))
    path = workspace() / "ok.yaml"
    path.write_text("accelbuild: 1\nmodels:\n  - path: models/tinycls.onnx\n")
    assert isinstance(load_pipeline(str(path)), PipelineSpec)


# =========================================================================== regressions found by fuzzing


@contextlib.contextmanager
def time_limit(seconds: int):
    """Turn a hang into a failure (SIGALRM; the tests run in the main thread)."""
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("text, line_col", [
    ("a: &m [1, *m]\n", "1:4"),
    ("a: &m\n  - *m\n", "1:4"),
    ("a: &a {<<: *a}\n", "1:4"),
    ("x: 1\nb: [1, &a {b: [2, *a]}]\n", "2:8"),
])
def test_value_containing_itself_is_refused_not_a_hang(text: str, line_col: str) -> None:
    """Found by the yaml fuzzer: check_expansion descended into the same node for ever."""
    with time_limit(5), pytest.raises(ConfigError) as info:
        parse_yaml(text, "p.yaml")
    assert str(info.value) == f"p.yaml:{line_col}: this value contains itself through an alias, " \
                              "so the document expands without end"


@pytest.mark.parametrize("text", [
    "frames: 0x" + "f" * 4000 + "\n",  # > 4300 decimal digits: jsonschema's message crashed (exit 1)
    "? 0x" + "f" * 4000 + "\n: 1\n",  # the same as a mapping key: str(key) crashed
    "seed: " + "9" * 5000 + "\n",  # int() refused it with a message about sys.set_int_max_str_digits
])
def test_integers_too_large_to_print_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "p.yaml")
    assert "is too large a number for any setting" in info.value.message
    assert str(info.value).startswith(("p.yaml:1:", "p.yaml:2:"))


@pytest.mark.parametrize("text, bound", [
    ("frames: 1" + ":59" * 300_000 + "\n", 3.0),  # base-60 integer: quadratic to build (21 s before)
    ("models: [" + "1," * 1_000_000 + "1]\n", 3.0),  # 2 MB list: composed whole before refusal (~40 s, 800 MB)
])
def test_huge_documents_are_refused_in_bounded_time(text: str, bound: float) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError):
        parse_yaml(text, "p.yaml")
    assert time.monotonic() - started < bound


def test_many_schema_errors_cost_linear_time() -> None:
    """9,000 wrong per-layer bits: each error used to re-split the file for its snippet (quadratic)."""
    text = "accelbuild: 2\nmodels:\n  - path: m.onnx\n    quantize:\n      bits:\n" + "".join(
        f"        layer{i}: 3\n" for i in range(9000))
    doc = parse_yaml(text, "p.yaml")
    started = time.monotonic()
    root = schema_check.load_schema("pipeline.schema.json")  # a model's quantize keys are its family's (mx3)
    errors = schema_check.validate(doc, "pipeline.schema.json") + schema_check.validate_at(
        doc, ("models", 0, "quantize"), root["$defs"]["quantize_mx3"], root)
    assert len(errors) == 9000
    assert time.monotonic() - started < 5.0
    assert len({e.where.line for e in errors}) == 9000
