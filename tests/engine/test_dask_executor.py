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

from conftest import EXAMPLE_MODELS, REPO, CliResult, run_cli, tree_bytes, two_model_checkout, write

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
    assert run_cli("run", "p.yaml", "-j", "2", cwd=folder).code == 0
    return tree_bytes(folder / "build/p")


def build(folder: Path, executor: str, *extra: str, env: dict[str, str] | None = None) -> CliResult:
    result = run_cli("run", "p.yaml", "--json", *extra, cwd=folder, env={"ACCELBUILD_EXECUTOR": executor, **(env or {})})
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
    status = run_cli("status", "p.yaml", "--executor", dask_address(cluster), cwd=folder)
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
