"""The one task key: what must move it does, what must not (-j, the output folder, the checkout's place,
an input's mtime) doesn't; doit's up-to-date check compares exactly it."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from accelbuild.config.load import load_pipelines
from accelbuild.config.spec import DeviceSpec
from accelbuild.engine import doit_backend, plan, task_key, worker
from accelbuild.engine.cache import ArtifactCache
from accelbuild.engine.state import working_folder

from conftest import EXAMPLE_MODELS, write

D = task_key.definition("import", "code1", {"input_shapes": {"images": [64, 64, 3]}, "bits": 8})
INPUTS = {"model": "a" * 64}


def test_the_key_moves_with_definition_inputs_roles_and_version() -> None:
    base = task_key.task_key(D, INPUTS)
    assert base == task_key.task_key(D, dict(INPUTS))
    assert base == task_key.task_key(D, INPUTS, task_key.__version__)
    others = [
        task_key.task_key(task_key.definition("crop", "code1", {"input_shapes": {"images": [64, 64, 3]}, "bits": 8}),
                          INPUTS),
        task_key.task_key(task_key.definition("import", "code2", {"input_shapes": {"images": [64, 64, 3]}, "bits": 8}),
                          INPUTS),
        task_key.task_key(task_key.definition("import", "code1", {"input_shapes": {"images": [32, 64, 3]}, "bits": 8}),
                          INPUTS),
        task_key.task_key(D, {"model": "b" * 64}),
        task_key.task_key(D, {"weights": "a" * 64}),
        task_key.task_key(D, {**INPUTS, "data": "c" * 64}),
        task_key.task_key(D, INPUTS, "99.0.0"),
    ]
    assert len({base, *others}) == len(others) + 1


def test_the_key_ignores_parameter_and_input_order() -> None:
    assert task_key.definition("s", "c", {"a": 1, "b": {"x": 1, "y": 2}}) == \
        task_key.definition("s", "c", {"b": {"y": 2, "x": 1}, "a": 1})
    assert task_key.task_key(D, {"a": "1", "b": "2"}) == task_key.task_key(D, {"b": "2", "a": "1"})


def test_the_version_is_hashed_once_in_the_task_key_not_in_the_definition(monkeypatch) -> None:
    before = task_key.definition("import", "code1", {}), task_key.task_key(D, INPUTS)
    monkeypatch.setattr(task_key, "__version__", "99.0.0")
    assert task_key.definition("import", "code1", {}) == before[0]
    assert task_key.task_key(D, INPUTS) == task_key.task_key(D, INPUTS, "99.0.0") != before[1]


def test_cache_entries_local_and_remote_are_named_by_the_key() -> None:
    key = task_key.task_key(D, INPUTS)
    assert task_key.entry_name(key) == f"entries/{key[:2]}/{key}.json"
    assert task_key.object_name("ab" * 32) == f"objects/ab/{'ab' * 32}"


def test_the_invocation_key_moves_with_the_command_line_and_its_place() -> None:
    args = ("/w", ["run", "p.yaml"], {"ACCELBUILD_CACHE_DIR": "/c"}, ["/py", "3.12", ["/lib"]], "/pkg")
    base = task_key.invocation_key(*args)
    assert base == task_key.invocation_key(*args)
    moved = [
        task_key.invocation_key("/v", *args[1:]),
        task_key.invocation_key(args[0], ["run", "p.yaml", "-j", "2"], *args[2:]),
        task_key.invocation_key(*args[:2], {}, *args[3:]),
        task_key.invocation_key(*args[:3], ["/py", "3.12", ["/lib", "/more"]], args[4]),
        task_key.invocation_key(*args, version="99.0.0"),
    ]
    assert len({base, *moved}) == len(moved) + 1


def test_model_records_are_keyed_by_task_keys() -> None:
    key = task_key.task_key(D, INPUTS)
    assert task_key.model_info_key(key, "c1") != task_key.model_info_key(key, "c2")
    assert task_key.model_info_key(key, "c1") != task_key.model_info_key(task_key.task_key(D, {"model": "b" * 64}), "c1")
    base = task_key.checked_model_key("mx3", [("import", D)], INPUTS, None)
    assert base == task_key.checked_model_key("mx3", [("import", D)], INPUTS, None)
    assert base != task_key.checked_model_key("npu", [("import", D)], INPUTS, None)
    assert base != task_key.checked_model_key("mx3", [("import", D)], INPUTS, "code")
    assert base != task_key.checked_model_key("mx3", [("import", D)], INPUTS, None, "99.0.0")


CPU = """\
accelbuild: 1
name: p
target: {{family: cpu, threads: 1}}
output: {{dir: {out}}}
models:
  - name: cls
    path: models/tinycls.onnx
benchmark: {{frames: 10, host: false, accuracy: {{samples: 1}}}}
"""


def _checkout(folder: Path, out: str = "build") -> Path:
    (folder / "models").mkdir(parents=True)
    shutil.copy(EXAMPLE_MODELS / "tinycls.onnx", folder / "models" / "tinycls.onnx")
    write(folder / "p.yaml", CPU.format(out=out))
    return folder


def _keys(folder: Path, device: DeviceSpec | None = None) -> dict[str, str]:
    with working_folder(folder):
        pipeline = load_pipelines(["p.yaml"])[0]
        if device is not None:
            pipeline = dataclasses.replace(pipeline, benchmark=dataclasses.replace(pipeline.benchmark, device=device))
        jobs = plan.plan([pipeline], until="import")
        return {job.name: worker.job_key(job) for job in jobs}


def test_planned_keys_ignore_the_output_folder_the_checkout_place_and_mtimes(tmp_path: Path) -> None:
    base = _keys(_checkout(tmp_path / "a"))
    assert base == _keys(_checkout(tmp_path / "elsewhere" / "b", out="other/build"))
    model = tmp_path / "a" / "models" / "tinycls.onnx"
    os.utime(model, ns=(1, 1))
    assert _keys(tmp_path / "a") == base
    model.write_bytes(model.read_bytes() + b"\0")
    assert _keys(tmp_path / "a") != base


def test_the_measuring_device_rekeys_the_benchmark_only(tmp_path: Path) -> None:
    folder = _checkout(tmp_path / "a")
    with working_folder(folder):
        pipeline = load_pipelines(["p.yaml"])[0]
        definitions = []
        for machine in ("board one", "board two"):
            device = DeviceSpec("dask://127.0.0.1:1", "npu0", machine)
            bound = dataclasses.replace(pipeline, benchmark=dataclasses.replace(pipeline.benchmark, device=device))
            definitions.append({job.name: job.param_digest for job in plan.plan([bound])})
    changed = sorted(name for name in definitions[0] if definitions[0][name] != definitions[1][name])
    assert changed == ["p:benchmark"]


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, dict]:
    """An input and the values a run of a task reading it records (its key and input record)."""
    (tmp_path / "m.bin").write_bytes(b"model")
    with working_folder(tmp_path):
        record = worker.input_record({"model": "m.bin"})
    assert record is not None
    return tmp_path, {"key": task_key.task_key(D, worker.digests_of(record)), "inputs": record}


def test_doit_is_up_to_date_exactly_while_the_key_holds(recorded: tuple[Path, dict]) -> None:
    folder, values = recorded
    inputs = {"model": "m.bin"}
    with working_folder(folder):
        assert doit_backend.key_unchanged(None, values, D, inputs)
        assert not doit_backend.key_unchanged(None, {}, D, inputs)  # never built
        assert not doit_backend.key_unchanged(None, values, task_key.definition("import", "other", {}), inputs)
        os.utime("m.bin", ns=(7, 7))  # touched: hashed again, same bytes
        assert doit_backend.key_unchanged(None, values, D, inputs)
        Path("m.bin").write_bytes(b"MODEL")
        assert not doit_backend.key_unchanged(None, values, D, inputs)
        os.unlink("m.bin")
        assert not doit_backend.key_unchanged(None, values, D, inputs)


def test_an_unchanged_stat_reuses_the_recorded_digest(recorded: tuple[Path, dict]) -> None:
    folder, values = recorded
    with working_folder(folder):
        forged = {"model": [*values["inputs"]["model"][:4], "f" * 64]}
        assert worker.input_record({"model": "m.bin"}, forged) == forged  # not read again
        os.utime("m.bin", ns=(7, 7))
        assert worker.digests_of(worker.input_record({"model": "m.bin"}, forged)) == worker.digests_of(values["inputs"])


def test_the_cache_is_looked_up_under_the_task_key(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    key = task_key.task_key(D, INPUTS)
    (tmp_path / "out.json").write_bytes(b"{}")
    cache.store(key, {"out.json": tmp_path / "out.json"})
    assert (tmp_path / "cache" / task_key.entry_name(key)).is_file()
    assert cache.listing(key) is not None and cache.listing(task_key.task_key(D, {"model": "b" * 64})) is None
