"""Hostile model files: each is refused with exit 2, a clear message, bounded time and memory, no writes outside.

Every case lays out a small project in a tmp folder::

    project/p.yaml            one model, path models/<file>
    project/models/<file>     the hostile file (plus whatever it points at)
    secret/secret.bin         a file outside the project, which external data may try to reach

and runs ``accelbuild run --until import`` there (``--until crop`` where a problem could only show later)
within a timeout: in a subprocess under an address-space limit for the cases whose point is a size (a
dimension, initializer, buffer or intermediate tensor claimed huge: ``claims_a_size``), in the test's
process for the others. It must exit 2 with ``p.yaml:LINE:COL: message`` or
``file: message`` and no traceback, and the only files created or changed anywhere under the tmp folder
must be in the project's build dir (``project/build``) and state dir (``project/state``, the cache
included); the secret must be untouched and its bytes must appear in no file written.
"""

from __future__ import annotations

import hashlib
import os
import re
import resource
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
import tflite
from onnx import TensorProto, helper, numpy_helper

from accelbuild.frontends.input_shapes import MAX_TENSOR_ELEMENTS
from accelbuild.testing import tflite_models

from conftest import EXAMPLE_MODELS, CliResult, clean_env, run_cli

MEMORY_LIMIT = 1536 * 1024 * 1024  # address space; `run --until import` of these models peaks near 200 MB
TIMEOUT = 30  # seconds per run (a refusal takes about half a second)
SECRET = hashlib.sha256(b"accelbuild reliability secret").digest() * 4  # 128 bytes no model contains
HOST_FILE = Path("/etc/hostname")

Setup = Callable[[Path, Path], None]  # (project folder, secret file) -> None: extra files next to the model


@dataclass(frozen=True)
class Case:
    file: str  # the model's name in project/models
    data: bytes
    expect: str  # regex the error line must match after "p.yaml:LINE:COL: "
    input_shapes: str = ""  # YAML flow text for input_shapes, if any
    setup: Setup | None = None
    until: str = "import"


# --------------------------------------------------------------------------- ONNX builders


def onnx_bytes(nodes: list, inputs: list, outputs: list, initializers: list = (), opset: int = 17) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def value(name: str, dims: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def cycle() -> bytes:
    """Node A reads B's output and B reads A's."""
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="A"),
             helper.make_node("Relu", ["a"], ["b"], name="B"),
             helper.make_node("Relu", ["a"], ["y"], name="C")]
    return onnx_bytes(nodes, [value("x", [1, 4])], [value("y", [1, 4])])


def self_loop() -> bytes:
    """A node that reads its own output."""
    nodes = [helper.make_node("Add", ["x", "a"], ["a"], name="A"), helper.make_node("Relu", ["a"], ["y"], name="B")]
    return onnx_bytes(nodes, [value("x", [1, 4])], [value("y", [1, 4])])


def relu_model(dims: list) -> bytes:
    return onnx_bytes([helper.make_node("Relu", ["x"], ["y"], name="r")], [value("x", dims)], [value("y", dims)])


def no_outputs() -> bytes:
    """A graph that computes nothing anyone can read (the ONNX checker accepts it)."""
    return onnx_bytes([helper.make_node("Relu", ["x"], ["y"], name="r")], [value("x", [1, 4])], [])


def constant_of_shape(shape: list[int]) -> bytes:
    """A ConstantOfShape to ``shape``, summed into a tiny output: only the intermediate is absurd."""
    fill = helper.make_tensor("fill", TensorProto.FLOAT, [1], [1.0])
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"], name="cos", value=fill),
             helper.make_node("ReduceSum", ["c"], ["s"], name="sum", keepdims=1),
             helper.make_node("Add", ["x", "s"], ["y"], name="add")]
    shape_init = numpy_helper.from_array(np.array(shape, np.int64), "shape")
    return onnx_bytes(nodes, [value("x", [1, 4])], [value("y", [1, 4])], [shape_init])


def tile(repeats: list[int]) -> bytes:
    nodes = [helper.make_node("Tile", ["x", "repeats"], ["t"], name="tile"),
             helper.make_node("ReduceSum", ["t"], ["s"], name="sum", keepdims=1),
             helper.make_node("Add", ["x", "s"], ["y"], name="add")]
    init = numpy_helper.from_array(np.array(repeats, np.int64), "repeats")
    return onnx_bytes(nodes, [value("x", [1, 4])], [value("y", [1, 4])], [init])


def claimed_initializer(field: str) -> bytes:
    """An initializer whose dims claim 10**12 elements, with 16 bytes (or 4 floats) of data."""
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[10**6, 10**6])
    if field == "raw_data":
        weight.raw_data = bytes(16)
    else:
        weight.float_data.extend([1.0] * 4)
    node = helper.make_node("Add", ["x", "w"], ["y"], name="add")
    return onnx_bytes([node], [value("x", [1, 4])], [value("y", [1, 4])], [weight])


def external(location: str, **fields: str) -> bytes:
    """Add(x, w) where w's 16 bytes are stored in the external file ``location``."""
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1, 4], data_location=TensorProto.EXTERNAL)
    for key, text in {"location": location, **fields}.items():
        entry = weight.external_data.add()
        entry.key, entry.value = key, text
    node = helper.make_node("Add", ["x", "w"], ["y"], name="add")
    return onnx_bytes([node], [value("x", [1, 4])], [value("y", [1, 4])], [weight])


def link_to_secret(name: str, whole_folder: bool = False) -> Setup:
    def setup(project: Path, secret: Path) -> None:
        target = secret.parent if whole_folder else secret
        os.symlink(target, project / "models" / name)
    return setup


def data_file(name: str, size: int) -> Setup:
    def setup(project: Path, secret: Path) -> None:
        (project / "models" / name).write_bytes(np.arange(size // 4, dtype=np.float32).tobytes())
    return setup


# --------------------------------------------------------------------------- TFLite builders


def small_tflite(external_buffers: bool) -> bytes:
    b = tflite_models.TFLiteBuilder(0)
    x = b.add_tensor("input", (1, 8, 8, 3))
    y = tflite_models.conv(b, "conv", x, 4, 3, act="RELU")
    return b.finish([x], [y], external_buffers=external_buffers)


def tflite_without_outputs() -> bytes:
    b = tflite_models.TFLiteBuilder(0)
    x = b.add_tensor("input", (1, 8, 8, 3))
    tflite_models.conv(b, "conv", x, 4, 3, act="RELU")
    return b.finish([x], [])


def patched_buffer(field: str, new: int) -> bytes:
    """The large-model format (buffers after the flatbuffer) with one buffer's offset or size replaced."""
    data = bytearray(small_tflite(external_buffers=True))
    model = tflite.Model.GetRootAs(bytes(data), 0)
    buffer = next(model.Buffers(i) for i in range(model.BuffersLength()) if model.Buffers(i).Offset() > 1)
    slot = {"offset": 6, "size": 8}[field]  # vtable slots of Buffer.offset / Buffer.size (uint64 each)
    at = buffer._tab.Pos + buffer._tab.Offset(slot)
    assert buffer._tab.Offset(slot), "the builder wrote no such field"
    data[at:at + 8] = struct.pack("<Q", new)
    return bytes(data)


def huge_constant_shape() -> bytes:
    """A conv weight whose shape claims 4 x 32768 x 32768 x 3 floats, backed by its 432 real bytes."""
    b = tflite_models.TFLiteBuilder(0)
    x = b.add_tensor("input", (1, 8, 8, 3))
    y = tflite_models.conv(b, "conv", x, 4, 3, act="RELU")
    weights = next(t for t in b.tensors if t.name.endswith("weights"))
    weights.shape = (4, 2**15, 2**15, 3)
    return b.finish([x], [y])


# --------------------------------------------------------------------------- the cases

RNG = np.random.default_rng(20240601)
TINYDET = (EXAMPLE_MODELS / "tinydet.onnx").read_bytes()
TFLITE = small_tflite(external_buffers=False)
NOT_ONNX = r"models/m\.onnx: not (an ONNX model|a valid ONNX model)"
TOO_BIG = r"would have [\d,]+ elements .*; accelbuild handles at most " + f"{MAX_TENSOR_ELEMENTS:,}"
OUTSIDE = r"models/m\.onnx: tensor 'w' stores its data in .*(must be a file in the model's own folder|leads outside)"

CASES: dict[str, Case] = {
    "onnx_random_bytes": Case("m.onnx", RNG.bytes(4096), NOT_ONNX),
    "onnx_empty": Case("m.onnx", b"", r"models/m\.onnx: empty file"),
    **{f"onnx_truncated_at_{cut}": Case("m.onnx", TINYDET[:cut], NOT_ONNX, "{images: [64, 64, 3]}")
       for cut in (2, 3, 64, 1000, len(TINYDET) // 2, len(TINYDET) - 1)},
    "onnx_cycle": Case("m.onnx", cycle(), NOT_ONNX + r": Nodes in a graph must be topologically sorted"),
    "onnx_self_loop": Case("m.onnx", self_loop(), NOT_ONNX),
    "onnx_no_outputs": Case("m.onnx", no_outputs(), r"models/m\.onnx: the model has no outputs"),
    "onnx_input_shapes_65536_by_65536": Case("m.onnx", relu_model([1, 3, "h", "w"]),
                                             r"input 'x' of model 'm' " + TOO_BIG, "{x: [65536, 65536, 3]}"),
    "onnx_dim_2_40_fixed_in_model": Case("m.onnx", relu_model([1, 3, 2**40, 2**40]), r"input 'x' of model 'm' " + TOO_BIG),
    "onnx_dim_2_40_fixed_2d": Case("m.onnx", relu_model([1, 2**40]), r"input 'x' of model 'm' " + TOO_BIG),
    "onnx_constant_of_shape_2_40": Case("m.onnx", constant_of_shape([2**20, 2**20]),
                                        r"models/m\.onnx: tensor 'c' " + TOO_BIG),
    "onnx_tile_to_2_32": Case("m.onnx", tile([2**15, 2**15]), r"models/m\.onnx: tensor 't' " + TOO_BIG),
    "onnx_initializer_claims_10_12_raw_data": Case(
        "m.onnx", claimed_initializer("raw_data"), NOT_ONNX + r": .*raw_data size \(16 bytes\) is too small"),
    "onnx_initializer_claims_10_12_float_data": Case(
        "m.onnx", claimed_initializer("float_data"), NOT_ONNX + r": .*float_data size \(4\) is too small"),
    "onnx_external_dotdot": Case("m.onnx", external("../../secret/secret.bin"), OUTSIDE),
    "onnx_external_dotdot_inside_name": Case("m.onnx", external("sub/../../../secret/secret.bin"), OUTSIDE),
    "onnx_external_absolute_path": Case("m.onnx", external(str(HOST_FILE)), OUTSIDE),
    "onnx_external_symlink_file": Case("m.onnx", external("w.bin"), OUTSIDE, setup=link_to_secret("w.bin")),
    "onnx_external_symlink_folder": Case("m.onnx", external("sub/secret.bin"), OUTSIDE,
                                         setup=link_to_secret("sub", whole_folder=True)),
    "onnx_external_offset_past_end": Case("m.onnx", external("w.bin", offset="4096", length="16"),
                                          r"models/m\.onnx: tensor 'w' stores its data in 'w\.bin' at bytes "
                                          r"4096\.\.4112, past its end \(16\)", setup=data_file("w.bin", 16)),
    "onnx_external_missing": Case("m.onnx", external("w.bin"), r"models/m\.onnx: .*does not exist next to the model"),
    "tflite_random_bytes": Case("m.tflite", RNG.bytes(4096), r"models/m\.tflite: not a TFLite file"),
    **{f"tflite_truncated_at_{cut}": Case("m.tflite", TFLITE[:cut],
                                          r"models/m\.tflite: (not a TFLite file|malformed TFLite file)")
       for cut in (4, 8, 100, len(TFLITE) // 2, len(TFLITE) - 1)},
    "tflite_buffer_offset_past_eof": Case("m.tflite", patched_buffer("offset", 1 << 20),
                                          r"models/m\.tflite: malformed TFLite file: buffer 1 \(offset 1048576, .*"
                                          r"lies past the end of the file"),
    "tflite_buffer_offset_2_64_minus_8": Case("m.tflite", patched_buffer("offset", 2**64 - 8),
                                              r"models/m\.tflite: malformed TFLite file: buffer 1 .*past the end"),
    "tflite_buffer_size_2_63": Case("m.tflite", patched_buffer("size", 2**63),
                                    r"models/m\.tflite: malformed TFLite file: buffer 1 .*past the end"),
    "tflite_no_outputs": Case("m.tflite", tflite_without_outputs(), r"models/m\.tflite: the model has no outputs"),
    "tflite_constant_shape_2_32": Case("m.tflite", huge_constant_shape(),
                                       r"models/m\.tflite: malformed TFLite file: tensor 'conv/weights' has 432 "
                                       r"bytes of data, but shape \[4, 32768, 32768, 3\]"),
}
# Problems that only a later stage could trip over: run one case through crop as well.
CASES["onnx_constant_of_shape_2_40_until_crop"] = Case(
    "m.onnx", constant_of_shape([2**20, 2**20]), r"models/m\.onnx: tensor 'c' " + TOO_BIG, until="crop")


# --------------------------------------------------------------------------- the harness


def snapshot(folder: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry under ``folder`` (symlinks not followed): kind and content digest or link target."""
    entries: dict[str, tuple[str, bytes | str]] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            rel = str(path.relative_to(folder))
            if path.is_symlink():
                entries[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                entries[rel] = ("dir", "")
            else:
                entries[rel] = ("file", hashlib.sha256(path.read_bytes()).digest())
    return entries


def changed(before: dict, after: dict) -> set[str]:
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


def lay_out(tmp_path: Path, case: Case) -> tuple[Path, Path]:
    project, secret = tmp_path / "project", tmp_path / "secret" / "secret.bin"
    (project / "models").mkdir(parents=True)
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    (project / "models" / case.file).write_bytes(case.data)
    if case.setup:
        case.setup(project, secret)
    yaml = f"accelbuild: 1\nmodels:\n  - name: m\n    path: models/{case.file}\n"
    if case.input_shapes:
        yaml += f"    input_shapes: {case.input_shapes}\n"
    (project / "p.yaml").write_text(yaml)
    return project, secret


def claims_a_size(name: str) -> bool:
    """A case about a size the file claims (2**32, 2**40, 10**12 elements, offsets near 2**64, 65536 x 65536)."""
    return re.search(r"_2_\d|10_12|65536", name) is not None


def run_limited(project: Path, until: str) -> CliResult:
    """``accelbuild run --until UNTIL`` in a subprocess within ``MEMORY_LIMIT`` bytes and ``TIMEOUT`` seconds."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    env = clean_env()
    proc = subprocess.run(
        [sys.executable, "-m", "accelbuild.cli", "run", "--until", until, "--state-dir", "state", "p.yaml"],
        cwd=project, env=env, capture_output=True, text=True, errors="replace", timeout=TIMEOUT,
        preexec_fn=limit,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def run_timed(project: Path, until: str) -> CliResult:
    """``accelbuild run --until UNTIL`` in this process, failing the test past ``TIMEOUT`` seconds."""
    started = time.monotonic()
    result = run_cli("run", "--until", until, "--state-dir", "state", "p.yaml", cwd=project)
    assert time.monotonic() - started < TIMEOUT, f"run --until {until}: over {TIMEOUT} s"
    return result


def assert_writes_confined(tmp_path: Path, project: Path, secret: Path, before: dict, host_before: tuple) -> None:
    after = snapshot(tmp_path)
    allowed = ("project/build", "project/state")
    stray = sorted(p for p in changed(before, after) if not any(p == a or p.startswith(a + "/") for a in allowed))
    assert not stray, f"files created or changed outside the build and state dirs: {stray}"
    assert secret.read_bytes() == SECRET
    for path in [*(project / "build").rglob("*"), *(project / "state").rglob("*")]:
        if path.is_file() and not path.is_symlink():
            assert SECRET[:32] not in path.read_bytes(), f"{path} holds the secret's bytes"
    assert host_stat() == host_before, f"{HOST_FILE} changed"


def host_stat() -> tuple:
    if not HOST_FILE.exists():
        return ()
    stat = HOST_FILE.stat()
    return (stat.st_size, stat.st_mtime_ns)


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if not claims_a_size(n)])
def test_hostile_model_is_refused(name: str, tmp_path: Path) -> None:
    check_refused(name, tmp_path, run_timed)


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if claims_a_size(n)])
def test_hostile_size_is_refused_in_a_limited_process(name: str, tmp_path: Path) -> None:
    check_refused(name, tmp_path, run_limited)


def check_refused(name: str, tmp_path: Path, run: Callable[[Path, str], CliResult]) -> None:
    case = CASES[name]
    project, secret = lay_out(tmp_path, case)
    before, host_before = snapshot(tmp_path), host_stat()

    result = run(project, case.until)

    assert "Traceback" not in result.stderr, result.stderr
    assert result.code == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if re.match(r"\S+:(\d+:\d+:)? ", line)
              and not line.startswith("p:m:")]  # task progress lines start with the task name
    assert errors, result.stderr
    assert re.match(r"p\.yaml:\d+:\d+: " + case.expect, errors[0]), errors[0]
    assert_writes_confined(tmp_path, project, secret, before, host_before)


def test_external_data_inside_the_model_folder_still_works(tmp_path: Path) -> None:
    """The control for the harness: a good external-data model imports, and writes only build and state."""
    case = Case("m.onnx", external("w.bin"), "", setup=data_file("w.bin", 16), until="crop")
    project, secret = lay_out(tmp_path, case)
    before, host_before = snapshot(tmp_path), host_stat()

    result = run_timed(project, case.until)

    assert result.code == 0, result.stderr
    assert (project / "build" / "p" / "m" / "imported.onnx").is_file()
    assert (project / "build" / "p" / "m" / "ai.onnx").is_file()
    assert_writes_confined(tmp_path, project, secret, before, host_before)
    model = onnx.load(project / "build" / "p" / "m" / "imported.onnx")
    weight = next(t for t in model.graph.initializer if t.name == "w")
    assert numpy_helper.to_array(weight).tolist() == [[0.0, 1.0, 2.0, 3.0]]  # read from w.bin, embedded


def test_every_case_is_distinct() -> None:
    payloads = [(case.file, case.data, case.input_shapes, case.until, case.setup) for case in CASES.values()]
    assert len(set(payloads)) == len(payloads)
    assert len(CASES) >= 30
    assert 8 <= sum(map(claims_a_size, CASES)) < len(CASES) / 2  # the size cases run in a limited process
