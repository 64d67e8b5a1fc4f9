"""One task's run: its recorded values carry the task key it ran under; a missing input is a clear failure."""

from __future__ import annotations

import shutil
from pathlib import Path

from accelbuild.config.load import load_pipelines
from accelbuild.engine import plan, task_key, worker
from accelbuild.engine.state import working_folder

from conftest import EXAMPLE_MODELS, write

PIPELINE = "accelbuild: 1\nname: p\nmodels:\n  - name: cls\n    path: models/tinycls.onnx\n"


def _import_job(folder: Path) -> plan.Job:
    (folder / "models").mkdir(parents=True)
    shutil.copy(EXAMPLE_MODELS / "tinycls.onnx", folder / "models" / "tinycls.onnx")
    write(folder / "p.yaml", PIPELINE)
    with working_folder(folder):
        return plan.plan(load_pipelines(["p.yaml"]), until="import")[0]


def test_a_run_records_its_task_key_and_inputs(tmp_path: Path) -> None:
    job = _import_job(tmp_path)
    with working_folder(tmp_path):
        values = worker.execute(job, str(tmp_path / "cache"))
        assert isinstance(values, dict), values
        assert values["key"] == worker.job_key(job) == task_key.job_key(job, worker.digests_of(values["inputs"]))
        assert values["inputs"]["model"][0] == "models/tinycls.onnx"
        assert (tmp_path / "cache" / task_key.entry_name(values["key"])).is_file()


def test_a_missing_input_fails_the_task_saying_which(tmp_path: Path) -> None:
    job = _import_job(tmp_path)
    (tmp_path / "models" / "tinycls.onnx").unlink()
    with working_folder(tmp_path):
        failure = worker.execute(job, str(tmp_path / "cache"))
    assert isinstance(failure, worker.StageFailure), failure
    assert failure.message == "p:cls:import: an input is missing: model (models/tinycls.onnx)"
