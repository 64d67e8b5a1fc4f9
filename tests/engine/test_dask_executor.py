"""Builds on a real Dask cluster: a ``LocalCluster`` of process workers on 127.0.0.1 (and, for the version
check, ``dask worker`` processes started as a user would), driven through ``accelbuild run --executor``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbuild.config.load import load_pipelines
from accelbuild.engine import plan, shipping

from conftest import EXAMPLE_MODELS, REPO, CliResult, run_cli, run_cli_process, tree_bytes, two_model_checkout, write

distributed = pytest.importorskip("distributed")

CLOSED_LOOP = """\
accelbuild: 1
name: p
target: {num_chips: 2, effort: hard}
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {images: [64, 64, 3]}
    crop: {outputs: [head.p3, head.p4, head.p5]}
benchmark: {frames: 60, host: false, accuracy: {samples: 2}}
closed_loop: {enabled: true, jobs: 2, keep_splits: true}
"""


def checkout(folder: Path) -> Path:
    shutil.copytree(EXAMPLE_MODELS, folder / "models")
    write(folder / "p.yaml", CLOSED_LOOP)
    return folder


def dask_address(cluster: distributed.LocalCluster) -> str:
    return cluster.scheduler_address.replace("tcp://", "dask://")


@pytest.fixture(scope="module")
def cluster() -> Iterator[distributed.LocalCluster]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as local:
        yield local


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The closed-loop pipeline built here, without an executor."""
    folder = checkout(tmp_path_factory.mktemp("local"))
    assert run_cli_process("run", "p.yaml", "-j", "2", cwd=folder).code == 0
    return tree_bytes(folder / "build/p")


def build(folder: Path, executor: str, *extra: str, env: dict[str, str] | None = None) -> CliResult:
    result = run_cli_process("run", "p.yaml", "--json", *extra, cwd=folder, env={"ACCELBUILD_EXECUTOR": executor, **(env or {})})
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_dask_build_is_byte_identical_to_a_local_build(cluster, tmp_path: Path, reference) -> None:
    folder = checkout(tmp_path / "p")
    result = build(folder, dask_address(cluster))
    assert result.code == 0, result.stderr
    assert set(result.statuses().values()) == {"ran"}
    assert "2 worker(s), 2 thread(s)" in result.stderr
    assert f"the rest on {dask_address(cluster)}" in result.stderr  # the closed loop's splits went there too
    assert tree_bytes(folder / "build/p") == reference
    status = run_cli_process("status", "p.yaml", "--executor", dask_address(cluster), cwd=folder)
    assert status.code == 0 and "2 worker(s)" in status.stderr and "up-to-date  p:benchmark" in status.stdout


def test_a_killed_workers_task_is_retried_elsewhere(cluster, tmp_path: Path, reference) -> None:
    from accelbuild.testing.dask_faults import KillWorkerOnce

    marker = tmp_path / "killed"
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        client.register_plugin(KillWorkerOnce(str(marker), "accelbuild-quantize-"))
        try:
            folder = checkout(tmp_path / "p")
            result = build(folder, dask_address(cluster))
        finally:
            client.unregister_worker_plugin(KillWorkerOnce.name)
        assert marker.is_file()  # a worker died running the quantize task
        assert result.code == 0, result.stderr
        assert result.statuses()["p:det:quantize"] == "ran"
        assert tree_bytes(folder / "build/p") == reference
        client.wait_for_workers(2)  # the nanny brings the killed worker back for the next test


def test_workers_of_another_accelbuild_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(REPO / "accelbuild", other / "accelbuild", ignore=shutil.ignore_patterns("__pycache__"))
    init = other / "accelbuild" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "0.1.0"', '__version__ = "0.0.9+other"'))
    assert "0.0.9+other" in init.read_text()
    folder = two_model_checkout(tmp_path / "p")
    workers: list[subprocess.Popen] = []
    with distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=":0") as scheduler, \
            distributed.Client(scheduler.scheduler_address, set_as_default=False) as client:
        try:
            workers.append(start_worker(scheduler.scheduler_address, {"PYTHONPATH": str(other)}))
            client.wait_for_workers(1)
            refused = build(folder, dask_address(scheduler))
            assert refused.code == 2, refused.stderr
            assert "no worker runs this build's accelbuild 0.1.0" in refused.stderr
            assert "runs accelbuild 0.0.9+other" in refused.stderr and "install the same accelbuild" in refused.stderr
            assert not (folder / "build").exists()

            workers.append(start_worker(scheduler.scheduler_address, {}))
            client.wait_for_workers(2)
            mixed = build(folder, dask_address(scheduler))
            assert mixed.code == 0, mixed.stderr
            assert "refusing Dask worker" in mixed.stderr and "0.0.9+other" in mixed.stderr
            assert set(mixed.statuses().values()) == {"ran"}
        finally:
            for worker in workers:
                worker.terminate()
                worker.wait(timeout=30)


def start_worker(address: str, env: dict[str, str]) -> subprocess.Popen:
    """``dask worker ADDRESS --nthreads 1`` as a separate process, as docs/remote.md starts them."""
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("dask")), "worker", address, "--nthreads", "1", "--no-dashboard",
         "--host", "127.0.0.1"],
        env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize(("executor", "message"), [
    ("tcp://127.0.0.1:8786", "unknown executor"),
    ("dask://127.0.0.1", "expected dask://HOST:PORT"),
    ("dask://127.0.0.1:1", "cannot reach the Dask scheduler"),
])
def test_bad_executor_is_a_usage_error(tmp_path: Path, executor: str, message: str) -> None:
    folder = two_model_checkout(tmp_path / "p")
    result = build(folder, executor, env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"})
    assert result.code == 2 and message in result.stderr, result.stderr
    assert not (folder / "build").exists()


# -- the content shipping itself, in process --------------------------------------------------------------


def _import_job(folder: Path) -> plan.Job:
    jobs = plan.plan(load_pipelines([str(folder / "p.yaml")]))
    return next(j for j in jobs if j.name == "p:det:import")


def test_a_shipped_job_gives_the_bytes_of_a_local_run_and_refuses_altered_bytes(tmp_path: Path) -> None:
    folder = two_model_checkout(tmp_path / "p")
    job = _import_job(folder)
    parcel = shipping.pack(job)
    assert parcel.inputs == {"model": "tinydet.onnx"}  # by content, relative: no path of this machine
    returned = shipping.run_parcel(parcel, shipping.identity())
    assert returned.failure is None and set(returned.outputs) == {"imported.onnx", "import.json"}
    staged = {name: tmp_path / "staged" / name for name in job.outputs}
    shipping.unpack(returned, staged)
    assert run_cli("run", "p.yaml", "--until", "import", cwd=folder).code == 0
    for name, path in staged.items():
        assert path.read_bytes() == job.outputs[name].read_bytes()

    tampered = dataclasses.replace(returned, outputs={**returned.outputs, "import.json": b"{}"})
    with pytest.raises(OSError, match="arrived altered"):
        shipping.unpack(tampered, staged)
    with pytest.raises(shipping.WorkerMismatch, match="install the same accelbuild"):
        shipping.run_parcel(parcel, ("0.0.0", "0" * 64))


def test_a_stage_error_on_a_worker_comes_back_as_the_same_user_error(tmp_path: Path) -> None:
    folder = two_model_checkout(tmp_path / "p")
    job = _import_job(folder)
    (folder / "models/tinydet.onnx").write_bytes(b"not a model")
    returned = shipping.run_parcel(shipping.pack(job), shipping.identity())
    assert returned.failure is not None and returned.failure.kind == "user"
    with pytest.raises(shipping.RemoteUserError):
        shipping.unpack(returned, {})


def test_connect_accepts_the_workers_of_this_accelbuild(cluster) -> None:
    from accelbuild.engine.dask_executor import DaskExecutor

    executor = DaskExecutor.connect(dask_address(cluster))
    try:
        assert len(executor.workers()) == 2 and executor.slots == 2 and not executor.refused
    finally:
        executor.close()


# -- a pre section reaches the worker, for every family ---------------------------------------------------

# (target and benchmark, model file, crop point, the pre section's weighted node): the model cropped after its
# first layer, so pre.onnx is that layer and every accuracy figure goes through it. npu gets tinycls: the mlp's
# layers all stay on its host, where the figures are exact whatever the inputs.
PRE_SECTION_CASES = {
    "mx3": ("target: {num_chips: 1}\nbenchmark: {frames: 20, host: false, accuracy: {samples: 4, seed: 0}}\n",
            "mlp.onnx", "fc1", "fc1"),
    "npu": ("target: {family: npu, platform: x5}\nbenchmark: {frames: 20, host: false, accuracy: {samples: 4, seed: 0}}\n",
            "tinycls.onnx", "stem.relu", "stem.conv"),
    "ethos-u": ("target: {family: ethos-u, accelerator: ethos-u55-128}\n"
                "benchmark: {host: false, accuracy: {samples: 4, seed: 0}}\n",
                "mlp.onnx", "fc1", "fc1"),
}


def pre_section_checkout(folder: Path, family: str) -> Path:
    target, model, point, _ = PRE_SECTION_CASES[family]
    (folder / "models").mkdir(parents=True)
    shutil.copy(EXAMPLE_MODELS / model, folder / "models" / "m.onnx")
    write(folder / "p.yaml", f"accelbuild: 1\nname: p\n{target}"
          f"models:\n  - name: m\n    path: models/m.onnx\n    crop: {{inputs: [{point}]}}\n")
    return folder


def accuracy_figures(folder: Path) -> tuple[dict, dict]:
    """The quantize stage's and the benchmark's accuracy against float (both measured through pre.onnx)."""
    import json

    quantize = json.loads((folder / "build/p/m/quantize.json").read_text())
    benchmark = json.loads((folder / "build/p/benchmark.json").read_text())
    return quantize["output"], benchmark["models"][0]["accuracy"]


@pytest.mark.parametrize("family", list(PRE_SECTION_CASES))
def test_a_pre_section_reaches_the_worker(cluster, tmp_path: Path, family: str) -> None:
    """The stages that read pre.onnx (quantize; mx3 and npu benchmark; ethos-u map and benchmark) get it on a
    Dask worker: the build's bytes are a local build's, and its figures follow the pre section's content."""
    import onnx
    from onnx import numpy_helper

    if family == "ethos-u":
        pytest.importorskip("ethosu.vela")
        pytest.importorskip("ai_edge_litert")
    local = pre_section_checkout(tmp_path / "local", family)
    assert run_cli("run", "p.yaml", cwd=local).code == 0
    remote = pre_section_checkout(tmp_path / "remote", family)
    result = build(remote, dask_address(cluster))
    assert result.code == 0, result.stderr
    assert result.statuses()["p:m:quantize"] == "ran" and result.statuses()["p:benchmark"] == "ran"
    assert tree_bytes(remote / "build/p") == tree_bytes(local / "build/p")
    pre = onnx.load(remote / "build/p/m/pre.onnx")
    assert pre.graph.node and not any(p.key == "accelbuild.section" for p in pre.metadata_props)
    before = accuracy_figures(remote)
    assert before[1]["max_abs_err"] > 0  # quantization error to measure: figures that depend on the inputs

    model = onnx.load(remote / "models/m.onnx")  # another first layer: the pre section's content changes
    first = next(n for n in model.graph.node if n.name == PRE_SECTION_CASES[family][3])
    weight = next(t for t in model.graph.initializer if t.name == first.input[1])
    weight.CopyFrom(numpy_helper.from_array(-1.5 * numpy_helper.to_array(weight)[::-1].copy(), weight.name))
    onnx.save(model, remote / "models/m.onnx")
    again = build(remote, dask_address(cluster))
    assert again.code == 0, again.stderr
    assert (remote / "build/p/m/pre.onnx").read_bytes() != (local / "build/p/m/pre.onnx").read_bytes()
    after = accuracy_figures(remote)
    for old, new in zip(before, after):
        assert new["max_abs_err"] != old["max_abs_err"], (before, after)
