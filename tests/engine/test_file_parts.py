"""Where artifacts split into shareable parts: ONNX initializer tensors and a family's program-file sections."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from accelbuild.engine import file_parts
from accelbuild.targets.mx3 import files as mx3_files
from accelbuild.targets.mx3.dfp import dfp_bytes

from conftest import sample_dfp


def _model(tensors: dict[str, np.ndarray]) -> onnx.ModelProto:
    names = list(tensors)
    nodes = [helper.make_node("Add", ["x", names[0]], ["y0"])]
    nodes += [helper.make_node("Add", [f"y{i - 1}", n], [f"y{i}"]) for i, n in enumerate(names[1:], start=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [256, 512])],
                              [helper.make_tensor_value_info(f"y{len(names) - 1}", onnx.TensorProto.FLOAT, [256, 512])],
                              [numpy_helper.from_array(t, n) for n, t in tensors.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_regions_are_exactly_the_large_tensors_raw_data(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    tensors = {f"w{i}": rng.standard_normal((256, 512)).astype(np.float32) for i in range(3)}
    tensors["small"] = rng.standard_normal((4, 512)).astype(np.float32)  # 8 KiB: stays in a gap
    path = tmp_path / "m.onnx"
    onnx.save(_model(tensors), path)
    data = path.read_bytes()
    found = file_parts.regions(path, data)
    assert len(data) >= file_parts.MIN_FILE
    assert [data[a:b] for a, b in found] == [tensors[f"w{i}"].tobytes() for i in range(3)]
    parts = file_parts.cover(found, len(data))
    assert parts[0][0] == 0 and parts[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    assert b"".join(data[a:b] for a, b in parts) == data


def test_dfp_regions_are_its_section_payloads() -> None:
    dfp = sample_dfp()
    data = dfp_bytes(dfp)
    found = mx3_files.parts(data)
    payloads = sorted(dfp.sections.values(), key=lambda p: hashlib.sha256(p).hexdigest())
    assert sorted((data[a:b] for a, b in found), key=lambda p: hashlib.sha256(p).hexdigest()) == payloads


def test_bytes_of_no_known_layout_have_no_regions(tmp_path: Path) -> None:
    junk = bytes(range(256)) * (file_parts.MIN_FILE // 256 + 1)
    assert file_parts.regions(tmp_path / "x.onnx", junk) == []
    assert file_parts.regions(tmp_path / "x.dfp", b"ACCELDFP" + junk) == []
    assert mx3_files.parts(b"not a dfp") == []
