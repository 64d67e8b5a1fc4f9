"""Family npu through the CLI: every artifact of docs/contract.md, byte identity across runs and -j, the
package for inspect and bench, offload errors and checks."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import onnx
import pytest
import yaml

from accelbuild.targets import tvm_compiler

from conftest import run_cli, run_cli_process, tree_bytes, write

PIPELINE = """\
accelbuild: 1
name: n
target:
  family: npu
  platform: {platform}
  batch_size: 4
  offload: {offload}
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {{images: [256, 256, 3]}}
    quantize: {{calibration: minmax, calibration_frames: 4}}
benchmark: {{accuracy: {{samples: 6}}}}
"""
ARTIFACTS = ("det/quantized.onnx", "det/calibration.json", "det/quantize.json", "partition.json", "schedule.json",
             "layer_stats.yaml", "n.tar.gz", "perf.json", "report.html", "benchmark.json")


def _build(project: Path, platform: str = "tda4vm", offload: str = "{deny_ops: [Resize]}", *args: str,
           expect: int = 0, folder: str = "."):
    root = project / folder
    if folder != ".":
        (root / "models").mkdir(parents=True, exist_ok=True)
        for model in (project / "models").iterdir():
            (root / "models" / model.name).write_bytes(model.read_bytes())
    write(root / "p.yaml", PIPELINE.format(platform=platform, offload=offload))
    run = run_cli_process if "-j" in args else run_cli  # -j: doit's worker processes, in a process of their own
    result = run("run", "p.yaml", "--state-dir", "s", *args, cwd=root)
    assert result.code == expect, result.stderr
    assert "Traceback" not in result.stderr
    return result


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import shutil

    from conftest import EXAMPLE_MODELS

    project = tmp_path_factory.mktemp("npu")
    shutil.copytree(EXAMPLE_MODELS, project / "models")
    _build(project)
    return project / "build" / "n"


def test_every_artifact_of_the_contract(built: Path) -> None:
    for name in ARTIFACTS:
        assert (built / name).is_file(), name
    partition = json.loads((built / "partition.json").read_text())
    assert {"subgraphs", "npu_layers", "host_layers", "host_ops"} <= set(partition)
    units = [s["unit"] for s in partition["subgraphs"]]
    assert "npu" in units and "arm" in units
    assert partition["host_ops"].get("Resize") == 2  # denied: mid-graph offload
    # whether the layers after the Resizes go back to the NPU is a cost decision of the fitted profile
    # (test_partition checks the split itself with pinned costs)
    assert units[0] == "npu"
    assert partition["composition"]["max_abs_error"]["det"] <= 1e-4
    for entry in partition["subgraphs"]:
        assert {"id", "unit", "model", "nodes", "inputs", "outputs", "file"} <= set(entry)
    schedule = json.loads((built / "schedule.json").read_text())
    for s in schedule["subgraphs"]:
        assert {"desired_batch_size", "actual_batch_size", "cycles"} <= set(s)
        assert {"name", "unit", "start_cycle", "end_cycle", "ddr_bytes"} <= set(s["layers"][0])
    bench = json.loads((built / "benchmark.json").read_text())
    assert bench["simulated"] is True and bench["fps"] > 0 and bench["latency_ms"] > 0
    assert bench["batch_size"] >= 1 and bench["offload"]["host_layers"] == partition["host_layers"]
    assert bench["offload"]["subgraphs"] == len(partition["subgraphs"])
    assert bench["models"][0]["accuracy"]["cosine"] > 0.99
    trust = bench["credibility"]  # a built-in profile: the band tools/credibility.py measured
    assert trust["calibrated"] is True and f"+-{trust['band_pct']:g}%" in trust["text"]
    stats = yaml.safe_load((built / "layer_stats.yaml").read_text())
    assert stats[0]["layers"][0]["end_cycle"] >= stats[0]["layers"][0]["start_cycle"]
    report = (built / "report.html").read_text()
    for tab in ("Summary", "Temporal statistics", "Layer details", "Timeline"):
        assert tab in report
    assert "How far to trust these figures" in report and "published measurements" in report
    quantize = json.loads((built / "det/quantize.json").read_text())
    assert quantize["activations"] == "integer" and quantize["calibration"]["frames"] == 4
    assert sorted(quantize["host_nodes"]) == sorted(n for s in partition["subgraphs"] if s["unit"] != "npu"
                                                     for n in s["nodes"])


def test_package_members_and_configs(built: Path) -> None:
    with tarfile.open(built / "n.tar.gz") as tar:
        infos = tar.getmembers()
        names = [i.name for i in infos]
        assert all(i.mtime == 0 and i.uid == 0 and i.uname == "" for i in infos)
        configs = [json.load(tar.extractfile(i)) for i in infos if i.name.endswith(".json")
                   and i.name != "profile.json"]
    assert "layer_stats.yaml" in names and any(n.endswith(".npu") for n in names)
    host = [c for c in configs if c["processor"] != "npu"]
    # host subgraphs: AArch64 programs compiled by TVM with the tvm extra (test_host_code.py), else float ONNX
    assert host and all(c["file"].endswith(".so" if tvm_compiler.available() else ".onnx") for c in host)
    assert all(c.get("source", c["file"]).endswith(".onnx") and c.get("source", c["file"]) in names for c in host)
    for c in configs:
        assert {"name", "sequence", "processor", "config_params"} <= set(c)
        if c["processor"] == "npu":
            assert {"desired_batch_size", "actual_batch_size"} <= set(c["config_params"])


def test_inspect_and_bench_accept_the_package(built: Path, tmp_path: Path) -> None:
    result = run_cli("inspect", "n.tar.gz", cwd=built)
    assert result.code == 0 and "subgraph(s) in sequence" in result.stdout and "det_0.npu" in result.stdout
    result = run_cli("bench", "n.tar.gz", "--json", cwd=built)
    assert result.code == 0, result.stderr
    bench = json.loads((built / "benchmark.json").read_text())
    assert result.json()["fps"] == bench["fps"]
    write(tmp_path / "broken.tar.gz", "not a package")
    result = run_cli("inspect", "broken.tar.gz", cwd=tmp_path)
    assert result.code == 2 and "Traceback" not in result.stderr


def test_byte_identical_across_runs_and_jobs(built: Path, project: Path) -> None:
    _build(project, "tda4vm", "{deny_ops: [Resize]}", "-j", "2")
    again = tree_bytes(project / "build" / "n")
    first = tree_bytes(built)
    assert sorted(again) == sorted(first)
    # host code compiled by TVM is timed on this machine: measured figures are the contract's one exception
    measured = {"benchmark.json", "report.html"} if tvm_compiler.available() else set()
    assert [name for name in first if first[name] != again[name] and name not in measured] == []
    if measured:
        assert _simulated(first["benchmark.json"]) == _simulated(again["benchmark.json"])


def _simulated(data: bytes) -> dict:
    """benchmark.json without the host code's figures measured here."""
    bench = json.loads(data)
    code = bench["offload"]["host_code"]
    code.pop("this_core")
    for row in code["subgraphs"]:
        for key in ("measured_ms", "scaled_ms"):
            row.pop(key, None)
    return bench


def test_fail_on_fallback_lists_the_host_layers(project: Path) -> None:
    result = _build(project, "x5", "{deny_ops: [Resize], fail_on_fallback: true}", expect=1)
    assert "fail_on_fallback" in result.stderr and "Resize" in result.stderr


def test_too_many_subgraphs_names_the_splitting_layers(project: Path) -> None:
    result = _build(project, "mlsoc", "{deny_ops: [Resize], max_subgraphs: 1}", expect=1)
    assert "max_subgraphs 1" in result.stderr and "neck" in result.stderr


def test_unknown_deny_layer_is_positioned(project: Path) -> None:
    result = _build(project, "tda4vm", "{deny_layers: [neck.p4.upp]}", expect=2)
    assert "p.yaml:7:" in result.stderr and "did you mean 'neck.p4.up'" in result.stderr


def test_checks_apply(project: Path) -> None:
    text = PIPELINE.format(platform="am62a", offload="{deny_ops: [Resize], host_compiler: onnx}") + \
        "checks: {max_host_layers: 1}\n"
    write(project / "p.yaml", text)
    result = run_cli("run", "p.yaml", "--state-dir", "s", cwd=project)
    assert result.code == 1 and "max_host_layers" in result.stdout + result.stderr


def test_quantized_model_runs_as_it_is(built: Path) -> None:
    import numpy as np
    import onnxruntime as ort

    model = onnx.load(str(built / "det/quantized.onnx"))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {i.name: np.zeros([d or 1 for d in i.shape], np.float32) for i in sess.get_inputs()}
    assert sess.run(None, feed)


def test_mixed_precision_per_layer_costs_what_the_profile_says(project: Path) -> None:
    """{weights, activations} per layer from the YAML: recorded in quantize.json, and the simulated 16-bit
    layer is charged the profile's bits16_factor (tda4vm's MMA: 4x), so the NPU takes longer."""
    # (host code is tests/targets/npu/test_host_code.py's: these builds keep their host subgraphs ONNX)
    eight = _build(project, "tda4vm", "{host_compiler: onnx}", folder="eight")
    text = PIPELINE.format(platform="tda4vm", offload="{host_compiler: onnx}").replace(
        "quantize: {calibration: minmax, calibration_frames: 4}",
        "quantize: {calibration: minmax, calibration_frames: 4, bits: {stem.conv: {weights: 16, activations: 16},"
        " stage1.down.conv: {activations: 16}}}")
    root = project / "mixed"
    (root / "models").mkdir(parents=True)
    for model in (project / "models").iterdir():
        (root / "models" / model.name).write_bytes(model.read_bytes())
    write(root / "p.yaml", text)
    result = run_cli("run", "p.yaml", "--state-dir", "s", cwd=root)
    assert result.code == 0, result.stderr
    layers = {layer["name"]: (layer["bits"], layer["activation_bits"])
              for layer in json.loads((root / "build/n/det/quantize.json").read_text())["layers"]}
    assert layers["stem.conv"] == (16, 16) and layers["stage1.down.conv"] == (8, 16)
    assert layers["stage1.c2f.cv1.conv"] == (8, 8)

    def stem_cycles(folder: Path) -> int:
        schedule = json.loads((folder / "build/n/schedule.json").read_text())
        return next(layer["compute_cycles"] for sg in schedule["subgraphs"] for layer in sg["layers"]
                    if layer["name"] == "stem.conv")
    assert stem_cycles(root) > 2 * stem_cycles(project / "eight")
    assert eight.code == 0


def test_split_bits_on_mx3_are_refused_with_a_position(tmp_path: Path) -> None:
    import shutil

    from conftest import EXAMPLE_MODELS

    shutil.copytree(EXAMPLE_MODELS, tmp_path / "models")
    write(tmp_path / "p.yaml", "accelbuild: 1\nname: m\nmodels:\n  - name: det\n    path: models/tinydet.onnx\n"
                               "    input_shapes: {images: [256, 256, 3]}\n"
                               "    quantize: {bits: {stem.conv: {weights: 16}}}\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 2 and "not separate weights/activations bits" in result.stderr
    assert "p.yaml:7:" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("platform", ["tda4vm", "x5"])
def test_no_op_casts_neither_split_the_npu_part_nor_leave_it(tmp_path: Path, platform: str) -> None:
    """40 layers alternating float -> float Casts and Convs (a converter's no-ops): import removes the Casts, so
    the chain is one NPU subgraph within max_subgraphs 16 (kept, they split it into 20), every Conv on the NPU."""
    from accelbuild.testing import npu_graphs

    (tmp_path / "models").mkdir()
    onnx.save(npu_graphs.chain(["cast", "conv"] * 20, channels=16, size=16), tmp_path / "models" / "casts.onnx")
    write(tmp_path / "p.yaml", f"""\
accelbuild: 1
name: c
target: {{family: npu, platform: {platform}, offload: {{max_subgraphs: 16, host_compiler: onnx}}}}
models:
  - {{name: casts, path: models/casts.onnx, quantize: {{calibration_frames: 2}}}}
""")
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--until", "map", cwd=tmp_path)
    assert result.code == 0, result.stderr
    partition = json.loads((tmp_path / "build" / "c" / "partition.json").read_text())
    assert [s["unit"] for s in partition["subgraphs"]] == ["npu"]
    assert partition["host_layers"] == 0 and partition["npu_layers"] == 20
    npu_nodes = partition["subgraphs"][0]["nodes"]
    assert sorted(npu_nodes) == sorted(f"l{i}.conv" for i in range(1, 40, 2))
    imported = json.loads((tmp_path / "build" / "c" / "casts" / "import.json").read_text())
    removed = next(r for r in imported["passes"] if r["pass"] == "remove_identities")
    assert removed["changes"] == 20
