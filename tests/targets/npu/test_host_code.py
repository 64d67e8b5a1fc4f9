"""Family npu, ``offload.host_compiler: tvm`` (accelbuild/targets/npu/host_code.py, host_timing.py): the Arm host
subgraphs compiled by TVM to AArch64 programs in the package, checked against onnxruntime, run in sequence,
timed; a subgraph TVM cannot import stays ONNX with its reason; without TVM nothing changes."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import onnx
import pytest

from accelbuild.targets import tvm_compiler
from accelbuild.targets.npu import report
from accelbuild.targets.npu.target import host_compiler_said
from accelbuild.testing import npu_graphs

from conftest import REPO, clean_env, run_cli, run_cli_process, write

pytestmark = pytest.mark.skipif(not tvm_compiler.available(), reason="needs the tvm extra (CI installs it)")

PIPELINE = """\
accelbuild: 1
name: h
target:
  family: npu
  platform: tda4vm
  offload: {offload}
models:
  - name: m
    path: m.onnx
    quantize: {{calibration: minmax, calibration_frames: 4}}
benchmark: {{accuracy: {{samples: 5}}}}
"""
EM_AARCH64 = 183  # ELF e_machine


def _build(folder: Path, offload: str = "{}", *args: str, expect: int = 0) -> tuple[Path, str]:
    folder.mkdir(parents=True, exist_ok=True)
    # two host subgraphs: Sin (TVM compiles it) and Celu (TVM's ONNX frontend does not import it)
    onnx.save(npu_graphs.chain(["conv", "relu", "conv", "sin", "conv", "relu", "conv", "celu", "conv"]),
              str(folder / "m.onnx"))
    write(folder / "p.yaml", PIPELINE.format(offload=offload))
    run = run_cli_process if "-j" in args else run_cli  # -j: doit's worker processes, in a process of their own
    result = run("run", "p.yaml", "--state-dir", "s", *args, cwd=folder)
    assert result.code == expect, result.stderr
    assert "Traceback" not in result.stderr
    return folder / "build" / "h", result.stderr


def _members(package: Path) -> dict[str, bytes]:
    with tarfile.open(package) as tar:
        return {i.name: tar.extractfile(i).read() for i in tar.getmembers() if i.isfile()}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return _build(tmp_path_factory.mktemp("host"))


def test_host_subgraph_is_an_aarch64_program_in_the_package(built: tuple[Path, str]) -> None:
    out, _ = built
    members = _members(out / "h.tar.gz")
    configs = {c["name"]: c for c in (json.loads(data) for name, data in members.items()
                                      if name.endswith(".json") and name != "profile.json")}
    compiled = [c for c in configs.values() if "compiler" in c]
    assert len(compiled) == 1
    config = compiled[0]
    assert config["file"] == f"{config['name']}.so" and config["source"] == f"{config['name']}.onnx"
    assert config["compiler"] == f"tvm {tvm_compiler.version()}" and config["processor"] == "arm"
    assert config["target"] == {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72",
                                "mattr": ["+neon"]}
    program = members[config["file"]]
    assert program[:4] == b"\x7fELF" and int.from_bytes(program[18:20], "little") == EM_AARCH64
    source = onnx.load_from_string(members[config["source"]])
    assert [n.op_type for n in source.graph.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear")] == ["Sin"]
    assert set(config["shapes"]) == {*config["inputs"], *config["outputs"]}


def test_every_compiled_subgraph_is_checked_and_one_tvm_cannot_import_stays_onnx(built: tuple[Path, str]) -> None:
    out, stderr = built
    record = json.loads((out / "host_code.json").read_text())
    assert record["tolerance"]["cosine"] == 0.9999 and record["format"] == "AArch64 shared object"
    rows = {r["name"]: r for r in record["subgraphs"]}
    assert len(rows) == 2
    compiled = [r for r in rows.values() if r["compiled"]]
    kept = [r for r in rows.values() if not r["compiled"]]
    assert len(compiled) == 1 and compiled[0]["check"]["cosine"] >= 0.9999 and compiled[0]["check"]["samples"] == 5
    assert len(kept) == 1 and "Celu" in kept[0]["reason"] and kept[0]["file"].endswith(".onnx")
    assert kept[0]["file"] in _members(out / "h.tar.gz")
    assert "stays float ONNX on the host" in stderr and "Celu" in stderr
    with tarfile.open(out / "host_build.tar.gz") as tar:
        assert tar.getnames() == [f"{compiled[0]['name']}.so"]


def test_benchmark_runs_the_compiled_code_and_times_it(built: tuple[Path, str], tmp_path: Path) -> None:
    out, stderr = built
    bench = json.loads((out / "benchmark.json").read_text())
    code = bench["offload"]["host_code"]
    assert code["compiler"] == f"tvm {tvm_compiler.version()}" and code["board_cpu"] == "Cortex-A72"
    row = next(r for r in code["subgraphs"] if r["compiled"])
    assert row["measured_ms"] > 0 and row["modelled_ms"] > 0 and row["scaled_ms"] > 0
    assert code["this_core"]["gmacs_per_second"] > 0 and "x86-64" in code["measured_on"]
    assert "host code: tvm" in stderr and "estimated on Cortex-A72 (scaled)" in stderr
    report = (out / "report.html").read_text()
    assert "Host code: tvm" in report and "scaled estimate" in report
    # the same package with its host code as ONNX: the subgraphs in sequence compute the same
    plain, stderr = _build(tmp_path / "onnx", "{host_compiler: onnx}")
    other = json.loads((plain / "benchmark.json").read_text())
    assert other["offload"]["host_code"] == {"compiler": "none", "reason": "offload.host_compiler is onnx"}
    assert abs(other["models"][0]["accuracy"]["cosine"] - bench["models"][0]["accuracy"]["cosine"]) < 1e-4
    assert not (plain / "host_code.json").exists()
    assert all(not name.endswith(".so") for name in _members(plain / "h.tar.gz"))
    assert "host subgraphs not compiled (float ONNX): offload.host_compiler is onnx" in stderr


def test_package_is_byte_identical_across_clean_builds(built: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = built
    again, _ = _build(tmp_path / "again", "{}", "-j", "2")
    for name in ("h.tar.gz", "host_build.tar.gz", "host_code.json"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def test_the_example_loads_the_programs_in_tvms_runtime(built: tuple[Path, str]) -> None:
    out, _ = built
    result = subprocess.run([sys.executable, str(REPO / "examples" / "npu_host_program.py"), str(out / "h.tar.gz"),
                             "--programs", str(out / "host_build.tar.gz")], capture_output=True, text=True,
                            env=clean_env(), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "1 host program(s) ran" in result.stdout
    difference = float(result.stdout.split("max abs difference from onnxruntime ")[1].split()[0])
    assert difference < 1e-5


def test_without_a_cross_linker_the_program_is_an_object_archive(tmp_path: Path) -> None:
    # a PATH with the compilers of this machine but no aarch64-linux-gnu-gcc
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("gcc", "g++", "cc", "c++", "as", "ld"):
        if shutil.which(tool):
            (tools / tool).symlink_to(shutil.which(tool))
    folder = tmp_path / "p"
    folder.mkdir()
    onnx.save(npu_graphs.chain(["conv", "relu", "conv", "sin", "conv", "relu", "conv"]), str(folder / "m.onnx"))
    write(folder / "p.yaml", PIPELINE.format(offload="{}"))
    result = subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", "p.yaml", "--state-dir", "s"], cwd=folder,
                            env={**clean_env(), "PATH": f"{Path(sys.executable).parent}:{tools}"}, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    members = _members(folder / "build" / "h" / "h.tar.gz")
    archives = [name for name in members if name.endswith(".tar")]
    assert len(archives) == 1 and not any(name.endswith(".so") for name in members)
    with tarfile.open(fileobj=io.BytesIO(members[archives[0]])) as tar:
        objects = {i.name: tar.extractfile(i).read() for i in tar.getmembers()}
        assert all(i.mtime == 0 for i in tar.getmembers())
    assert objects and all(name.endswith(".o") for name in objects)
    assert all(int.from_bytes(data[18:20], "little") == EM_AARCH64 for data in objects.values())
    record = json.loads((folder / "build" / "h" / "host_code.json").read_text())
    assert record["format"].startswith("tar of AArch64 object files") and record["linker"] is None


def test_explicit_tvm_without_the_extra_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbuild.config.load import load_pipelines
    from accelbuild.errors import ConfigErrors

    monkeypatch.setattr(tvm_compiler, "available", lambda: False)
    onnx.save(npu_graphs.chain(["conv"]), str(tmp_path / "m.onnx"))
    path = write(tmp_path / "p.yaml", PIPELINE.format(offload="{host_compiler: tvm}"))
    with pytest.raises(ConfigErrors) as raised:
        load_pipelines([str(path)])
    assert "p.yaml:6:" in str(raised.value) and "host_compiler tvm needs Apache TVM: pip install 'accelbuild[tvm]'" \
        in str(raised.value)
    write(tmp_path / "p.yaml", PIPELINE.format(offload="{}"))
    spec = load_pipelines([str(path)])[0]
    assert spec.target.host_compiler == "onnx"
    # the benchmark's record and the report name the extra
    said = host_compiler_said(spec)
    assert said == "onnx: Apache TVM is not installed (pip install 'accelbuild[tvm]')"
    html = report._host_code({"host_code": {"compiler": "none", "reason": said.partition(": ")[2]}})
    assert "not compiled: Apache TVM is not installed (pip install &#x27;accelbuild[tvm]&#x27;)" in html


def test_tvm_for_a_dsp_host_is_a_config_error(tmp_path: Path) -> None:
    from accelbuild.config.load import load_pipelines
    from accelbuild.errors import ConfigErrors

    onnx.save(npu_graphs.chain(["conv"]), str(tmp_path / "m.onnx"))
    path = write(tmp_path / "p.yaml", PIPELINE.format(offload="{host: dsp, host_compiler: tvm}"))
    with pytest.raises(ConfigErrors) as raised:
        load_pipelines([str(path)])
    assert "p.yaml:6:" in str(raised.value) and "offload.host is dsp (use host_compiler: onnx)" in str(raised.value)
    write(tmp_path / "p.yaml", PIPELINE.format(offload="{host: dsp}"))
    spec = load_pipelines([str(path)])[0]
    assert host_compiler_said(spec) == "onnx: offload.host is dsp (TVM compiles for the Arm cores only)"
