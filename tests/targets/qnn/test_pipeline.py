"""Family qnn with the real onnxruntime-qnn in its toolchain environment: the generated classifier compiled for
two SoCs' HTP, the context binary checked by onnxruntime-qnn outside accelbuild, emulated accuracy per frame, no
invented timing, uint16 activations, a no-op second run and the same bytes again.

The toolchain is installed once (about 540 MB; ``$ACCELBUILD_TOOLCHAINS_DIR`` keeps it between runs)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest

from accelbuild.config.load import load_pipelines
from accelbuild.engine import api
from accelbuild.engine.doit_backend import RunOptions
from accelbuild.targets.qnn.toolchain import TOOLCHAIN
from accelbuild.toolchains import install
from accelbuild.toolchains.environment import ROOT_ENV
from targets.rknn.test_pipeline import _net

from conftest import run_cli, write

PIPELINE = """\
accelbuild: 1
name: {name}
target: {{family: qnn, soc: {soc}, activations: {activations}}}
models:
  - name: net
    path: net.onnx
    quantize: {{calibration_frames: 4}}
benchmark: {{accuracy: {{samples: 6}}}}
"""
# outside accelbuild: onnxruntime-qnn loads the context model and its binary and runs it (HTP emulated)
LOAD_CONTEXT = """
import sys, numpy as np, onnxruntime as ort, onnxruntime_qnn as oq
ort.register_execution_provider_library("QNNExecutionProvider", oq.get_library_path())
devices = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]
options = ort.SessionOptions()
options.add_provider_for_devices(devices, {"backend_path": oq.get_qnn_htp_path(), "soc_model": sys.argv[2]})
session = ort.InferenceSession(sys.argv[1], options)
np.save(sys.argv[4], session.run(None, {session.get_inputs()[0].name: np.load(sys.argv[3])})[0])
"""


@pytest.fixture(scope="module")
def toolchain(tmp_path_factory: pytest.TempPathFactory):
    return install(TOOLCHAIN, Path(os.environ.get(ROOT_ENV) or tmp_path_factory.mktemp("toolchains")))


@pytest.fixture
def project(tmp_path: Path, toolchain, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ROOT_ENV, str(toolchain.folder.parent))
    monkeypatch.chdir(tmp_path)
    onnx.save(_net(), str(tmp_path / "net.onnx"))
    return tmp_path


def _options(folder: Path, force: bool = False) -> RunOptions:
    return RunOptions(root=folder, state_dir=folder / ".accelbuild", cache_dir=folder / ".accelbuild" / "cache",
                      force=force)


def _build(project: Path, soc: str, activations: str = "uint8", force: bool = False) -> tuple[api.RunSummary, Path]:
    name = f"q-{soc}-{activations}"
    write(project / f"{name}.yaml", PIPELINE.format(name=name, soc=soc, activations=activations))
    return api.run(load_pipelines([f"{name}.yaml"]), _options(project, force)), project / "build" / name


@pytest.mark.parametrize(("soc", "soc_model"), [("sm8650", 57), ("sm8550", 43)])
def test_the_htp_context_binary_its_placement_and_emulated_accuracy(project: Path, toolchain, soc: str,
                                                                     soc_model: int) -> None:
    summary, out = _build(project, soc)
    assert summary.ok, summary.failures()
    context = onnx.load(str(out / "net" / "net_ctx.onnx"), load_external_data=False)
    caches = [a.s for n in context.graph.node if n.op_type == "EPContext" for a in n.attribute
              if a.name == "ep_cache_context"]
    assert caches == [b"net_qnn.bin"] and (out / "net" / "net_qnn.bin").stat().st_size > 0
    placement = json.loads((out / "net" / "placement.json").read_text())
    quantized = onnx.load(str(out / "net" / "quantized.onnx"))
    assert [n["name"] for n in placement["nodes"]] == [n.name for n in quantized.graph.node]
    assert placement["soc_model"] == soc_model and placement["compiled_by"] == "onnxruntime-qnn 2.7.0"
    units = {n["name"]: n["unit"] for n in placement["nodes"]}
    assert all(units[f"conv{i}"] == "HTP" for i in range(3))
    assert all("reason" in n for n in placement["nodes"] if n["unit"] == "CPU")
    bench = json.loads((out / "benchmark.json").read_text())
    model = bench["models"][0]
    assert bench["fps"] is None and model["fps"] is None and model["latency_ms"] is None
    assert bench["timing"].startswith("needs a device") and bench["emulated_by"].startswith("onnxruntime-qnn 2.7.0")
    accuracy = model["accuracy"]
    assert [f["role"] for f in accuracy["frames"]] == ["calibration"] * 4 + ["held-out"] * 2
    assert accuracy["cosine"] > 0.98 and accuracy["measured_on"] == "held-out"
    # outside accelbuild: the context binary loads in onnxruntime-qnn and computes what the build recorded
    frame = project / "frame.npy"
    np.save(frame, np.random.default_rng(5).random((1, 3, 32, 48), dtype=np.float32))
    subprocess.run([str(toolchain.python), "-I", "-c", LOAD_CONTEXT, str(out / "net" / "net_ctx.onnx"),
                    str(soc_model), str(frame), str(project / "out.npy")], check=True, capture_output=True)
    emulated = np.load(project / "out.npy").ravel()
    import onnxruntime as ort

    reference = ort.InferenceSession(str(out / "net" / "ai.onnx")).run(None, {"image": np.load(frame)})[0].ravel()
    assert float(emulated @ reference / np.linalg.norm(emulated) / np.linalg.norm(reference)) > 0.98


def _convs() -> onnx.ModelProto:
    """The classifier's three Conv-ReLU layers alone."""
    model = _net()
    keep = [n for n in model.graph.node if n.op_type in ("Conv", "Relu")]
    del model.graph.node[:]
    model.graph.node.extend(keep)
    del model.graph.output[:]
    model.graph.output.extend([onnx.helper.make_tensor_value_info("r2", onnx.TensorProto.FLOAT, [1, 16, 8, 12])])
    for name in ("fc_w", "fc_b"):
        model.graph.initializer.remove(next(i for i in model.graph.initializer if i.name == name))
    return model


def test_uint16_activations_are_16_bit_grids(project: Path) -> None:
    onnx.save(_convs(), str(project / "net.onnx"))
    summary, out = _build(project, "sm8650", "uint16")
    assert summary.ok, summary.failures()
    quantized = onnx.load(str(out / "net" / "quantized.onnx"))
    points = {t.data_type for t in quantized.graph.initializer if t.name.endswith("zero_point")}
    assert points & {onnx.TensorProto.INT16, onnx.TensorProto.UINT16}
    assert json.loads((out / "benchmark.json").read_text())["models"][0]["accuracy"]["cosine"] > 0.99


def test_the_providers_refusal_is_exit_1_in_its_own_words(project: Path) -> None:
    """onnxruntime-qnn 2.7 lays a 16-bit GlobalAveragePool out as NHWC for the HTP, then does not take it."""
    write(project / "q.yaml", PIPELINE.format(name="q", soc="sm8650", activations="uint16"))
    result = run_cli("run", "q.yaml", cwd=project, env={ROOT_ENV: os.environ[ROOT_ENV]})
    assert result.code == 1 and "Traceback" not in result.stderr, result.stderr
    assert "q:net:map: qnn: [ONNXRuntimeError] : 1 : FAIL : Node 'gap_token_" in result.stderr


def test_the_second_run_is_a_no_op_and_a_forced_one_repeats_every_byte(project: Path) -> None:
    assert _build(project, "sm8650")[0].ok
    again, out = _build(project, "sm8650")
    assert {r.status for r in again.results} == {"up-to-date"}
    files = sorted(p for p in out.rglob("*") if p.is_file())
    first = {p: p.read_bytes() for p in files}
    assert _build(project, "sm8650", force=True)[0].ok
    assert {p: p.read_bytes() for p in files} == first


def test_qnn_keys_that_do_not_apply_are_positioned_errors(project: Path) -> None:
    write(project / "bad.yaml", "accelbuild: 1\ntarget: {family: qnn, soc: sm8650}\nmodels:\n  - path: net.onnx\n"
                                "    quantize: {activation_bits: 16}\n")
    with pytest.raises(Exception) as caught:
        load_pipelines(["bad.yaml"])
    assert "bad.yaml:5:16: unknown key 'activation_bits' in models.0.quantize: a key of family cpu, ethos-u, npu, " \
           "not of family qnn" in str(caught.value)
