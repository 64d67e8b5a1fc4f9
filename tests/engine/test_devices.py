"""Benchmarks measured on devices of a real Dask farm: a scheduler and ``dask worker`` processes started as
docs/devices.md starts them, each with its own ``--resources``, driven through ``accelbuild run``.
Where each task ran is read from the workers' own record (``accelbuild.testing.dask_records``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import CliResult, run_cli, run_cli_process, write

distributed = pytest.importorskip("distributed")

PIPELINE = """\
accelbuild: 1
name: p
target: {{family: {family}, threads: 1}}
models:
  - name: cls
    path: models/tinycls.onnx
benchmark: {{frames: 20, accuracy: {{samples: 2}}, device: {{{device}}}}}
"""


def start_worker(address: str, resources: str, *extra: str) -> subprocess.Popen:
    """``dask worker ADDRESS --resources "NAME=1"``, as docs/devices.md turns a machine into a device."""
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("dask")), "worker", address, "--nthreads", "1", "--no-dashboard",
         "--host", "127.0.0.1", "--resources", resources, *extra],
        env={**os.environ}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Farm:
    def __init__(self, scheduler: distributed.LocalCluster, client: distributed.Client, record: Path) -> None:
        self.scheduler, self.client, self.record = scheduler, client, record
        self.address = scheduler.scheduler_address.replace("tcp://", "dask://")

    def ran(self) -> list[tuple[str, str, str]]:
        from accelbuild.testing.dask_records import read

        return read(str(self.record))


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    from accelbuild.testing.dask_records import RecordTasks

    record = tmp_path_factory.mktemp("farm") / "tasks.txt"
    workers: list[subprocess.Popen] = []
    with distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=":0") as scheduler, \
            distributed.Client(scheduler.scheduler_address, set_as_default=False) as client:
        try:
            workers.append(start_worker(scheduler.scheduler_address, "boardA=1"))
            workers.append(start_worker(scheduler.scheduler_address, "boardB=1"))
            client.wait_for_workers(2, timeout=60)
            client.register_plugin(RecordTasks(str(record)))
            yield Farm(scheduler, client, record)
        finally:
            for worker in workers:
                worker.terminate()
                worker.wait(timeout=30)


def checkout(folder: Path, device: str, family: str = "cpu") -> Path:
    (folder / "models").mkdir(parents=True, exist_ok=True)
    from conftest import EXAMPLE_MODELS

    (folder / "models/tinycls.onnx").write_bytes((EXAMPLE_MODELS / "tinycls.onnx").read_bytes())
    write(folder / "p.yaml", PIPELINE.format(family=family, device=device))
    return folder


def run(folder: Path, *extra: str, env: dict[str, str] | None = None) -> CliResult:
    result = run_cli_process("run", "p.yaml", "--json", *extra, cwd=folder, env=env, timeout=240)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def benchmark_tasks(farm: Farm, resource: str) -> list[tuple[str, str, str]]:
    return [r for r in farm.ran() if r[2].startswith(f"accelbuild-benchmark-{resource}-")]


def test_benchmark_runs_on_the_tagged_device_and_restores_only_for_it(farm: Farm, tmp_path: Path) -> None:
    folder = checkout(tmp_path / "p", f"farm: '{farm.address}', resource: boardA")
    first = run(folder)
    assert first.code == 0, first.stderr
    assert set(first.statuses().values()) == {"ran"}
    bench = json.loads((folder / "build/p/benchmark.json").read_text())
    assert bench["measured"] is True
    assert bench["measured_on"]["device"] == "boardA" and "onnxruntime" in bench["measured_on"]["machine"]
    assert bench["models"][0]["end_to_end"]["host_measured_on"].startswith("device boardA (")
    assert "measured on device boardA (" in (folder / "build/p/report.html").read_text()
    ran = benchmark_tasks(farm, "boardA")
    assert len(ran) == 1 and ran[0][1] == "boardA"  # the boardA worker's own record
    assert all(r[1] == "boardA" for r in farm.ran())  # nothing else went to the farm: it ran here

    (folder / "build").rename(folder / "old")  # the same device again: restored from the cache
    again = run(folder)
    assert again.code == 0, again.stderr
    assert again.statuses()["p:benchmark"] == "cached" and len(benchmark_tasks(farm, "boardA")) == 1

    write(folder / "p.yaml", PIPELINE.format(family="cpu", device="resource: boardB"))
    other = run(folder, "--device-farm", farm.address)  # another device re-measures; the farm from the CLI
    assert other.code == 0, other.stderr
    assert other.statuses()["p:benchmark"] == "ran" and other.statuses()["p:cls:assemble"] == "up-to-date"
    assert [r[1] for r in benchmark_tasks(farm, "boardB")] == ["boardB"]
    assert json.loads((folder / "build/p/benchmark.json").read_text())["measured_on"]["device"] == "boardB"
    status = run_cli_process("status", "p.yaml", "--device-farm", farm.address, cwd=folder)
    assert status.code == 0 and "up-to-date  p:benchmark" in status.stdout, status.stdout + status.stderr
    text = run_cli("compare", "old/p", "build/p", cwd=folder).stdout  # each side labelled with its device
    assert "old/p: measured on device boardA (" in text and "build/p: measured on device boardB (" in text


def test_no_device_with_the_resource_is_a_usage_error_before_any_build(farm: Farm, tmp_path: Path) -> None:
    folder = checkout(tmp_path / "p", f"farm: '{farm.address}', resource: boardZ")
    result = run(folder)
    assert result.code == 2, result.stderr
    assert "no device with resource boardZ" in result.stderr and "boardA" in result.stderr
    assert "--resources \"boardZ=1\"" in result.stderr
    assert not (folder / "build").exists()


def test_a_device_without_a_farm_is_a_usage_error(tmp_path: Path) -> None:
    folder = checkout(tmp_path / "p", "resource: boardA")
    result = run(folder)
    assert result.code == 2 and "names no farm" in result.stderr and "--device-farm" in result.stderr
    write(folder / "p.yaml", PIPELINE.format(family="cpu", device="farm: 'tcp://127.0.0.1:1', resource: boardA"))
    result = run(folder)
    assert result.code == 2 and "p.yaml:7:" in result.stderr and "Traceback" not in result.stderr
    write(folder / "p.yaml", PIPELINE.format(family="cpu", device="resource: boardA"))
    result = run(folder, "--device-farm", "127.0.0.1:1")
    assert result.code == 2 and "--device-farm 127.0.0.1:1: unknown executor" in result.stderr


def test_a_family_without_a_device_runtime_rejects_the_key(tmp_path: Path) -> None:
    folder = checkout(tmp_path / "p", "resource: boardA", family="mx3")
    (folder / "p.yaml").write_text((folder / "p.yaml").read_text().replace("threads: 1", "num_chips: 1"))
    result = run(folder)
    assert result.code == 2, result.stderr
    assert "p.yaml:7:" in result.stderr and "family mx3 has no device runtime" in result.stderr


def test_a_device_killed_mid_measurement_is_measured_again(farm: Farm, tmp_path: Path) -> None:
    from accelbuild.testing.dask_faults import KillWorkerOnce

    marker = tmp_path / "killed"
    farm.client.register_plugin(KillWorkerOnce(str(marker), "accelbuild-benchmark-boardA-"))
    try:
        folder = checkout(tmp_path / "p", f"farm: '{farm.address}', resource: boardA")
        write(folder / "p.yaml", (folder / "p.yaml").read_text().replace("frames: 20", "frames: 21"))
        result = run(folder)
    finally:
        farm.client.unregister_worker_plugin(KillWorkerOnce.name)
    assert marker.is_file()  # the device worker died measuring; its nanny brought it back with its resource
    assert result.code == 0, result.stderr
    assert json.loads((folder / "build/p/benchmark.json").read_text())["measured_on"]["device"] == "boardA"
    farm.client.wait_for_workers(2, timeout=60)


def test_a_device_that_dies_for_good_fails_its_task_naming_it(farm: Farm, tmp_path: Path) -> None:
    from accelbuild.testing.dask_faults import KillWorkerOnce

    lonely = start_worker(farm.scheduler.scheduler_address, "lonely=1", "--no-nanny")
    try:
        farm.client.wait_for_workers(3, timeout=60)
        marker = tmp_path / "killed"
        farm.client.register_plugin(KillWorkerOnce(str(marker), "accelbuild-benchmark-lonely-"))
        folder = checkout(tmp_path / "p", f"farm: '{farm.address}', resource: lonely")
        started = time.monotonic()
        result = run(folder, env={"ACCELBUILD_DEVICE_WAIT": "2"})
        farm.client.unregister_worker_plugin(KillWorkerOnce.name)
        assert marker.is_file()
        assert result.code == 1, result.stderr
        assert "p:benchmark" in result.stderr and "device lonely" in result.stderr
        assert "no worker with resource lonely is left" in result.stderr
        assert time.monotonic() - started < 120
        assert not (folder / "build/p/benchmark.json").exists()  # nothing half-written
        assert json.loads(result.stdout)["tasks"][-1]["status"] == "failed"
    finally:
        lonely.kill()
        lonely.wait(timeout=30)


def test_the_closed_loop_measures_every_candidate_on_the_device(farm: Farm, tmp_path: Path) -> None:
    folder = checkout(tmp_path / "p", f"farm: '{farm.address}', resource: boardA")
    write(folder / "p.yaml", (folder / "p.yaml").read_text() + "closed_loop: {enabled: true}\n")
    before = len([r for r in farm.ran() if "-measure-" in r[2]])
    result = run(folder)
    assert result.code == 0, result.stderr
    record = json.loads((folder / "build/p/cls/closed_loop.json").read_text())
    assert record["measured_on"]["device"] == "boardA" and record["cost"]["measured"] == len(record["candidates"])
    measured = [r for r in farm.ran() if "-measure-" in r[2]][before:]
    assert len(measured) == len(record["candidates"]) and {r[1] for r in measured} == {"boardA"}

    write(folder / "p.yaml", (folder / "p.yaml").read_text().replace("boardA", "boardB"))
    other = run(folder, "-j", "2")  # another device: every candidate measured again, there (from a worker process)
    assert other.code == 0, other.stderr
    again = json.loads((folder / "build/p/cls/closed_loop.json").read_text())
    assert again["measured_on"]["device"] == "boardB" and again["cost"]["from_cache"] == 0
    assert {r[1] for r in farm.ran() if "-measure-boardB-" in r[2]} == {"boardB"}


def test_a_device_killed_during_the_closed_loop_measures_again(farm: Farm, tmp_path: Path) -> None:
    from accelbuild.testing.dask_faults import KillWorkerOnce

    marker = tmp_path / "killed"
    farm.client.register_plugin(KillWorkerOnce(str(marker), "accelbuild-measure-boardA-"))
    try:
        folder = checkout(tmp_path / "p", f"farm: '{farm.address}', resource: boardA")
        write(folder / "p.yaml", (folder / "p.yaml").read_text().replace("frames: 20", "frames: 22")
              + "closed_loop: {enabled: true}\n")
        result = run(folder)
    finally:
        farm.client.unregister_worker_plugin(KillWorkerOnce.name)
    assert marker.is_file()
    assert result.code == 0, result.stderr
    assert "device boardA: its worker died mid-measurement; measuring the" in result.stderr
    record = json.loads((folder / "build/p/cls/closed_loop.json").read_text())
    assert record["measured_on"]["device"] == "boardA" and record["cost"]["measured"] == len(record["candidates"])
    farm.client.wait_for_workers(2, timeout=60)
