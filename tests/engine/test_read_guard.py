"""The test suite's read guard: a stage that opens a file it did not declare fails, with a clear message.

The suite runs with the guard on (tests/conftest.py), so every other build test proves that the real stages
declare what they read; these tests prove that the guard fires, locally and on the Dask side of shipping.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import accelbuild
from accelbuild.config.load import load_pipelines
from accelbuild.engine import plan, read_guard, shipping, worker
from accelbuild.stages.context import StageContext

from conftest import run_cli, two_model_checkout

MODULE = "accelbuild_test_stage"  # a throwaway stage module, registered in sys.modules


@pytest.fixture
def stage_module() -> Iterator[Callable[[Callable[[StageContext], None]], str]]:
    """Install ``run`` as the throwaway stage module; gives the module's name."""
    def install(run: Callable[[StageContext], None]) -> str:
        module = types.ModuleType(MODULE)
        module.run = run  # type: ignore[attr-defined]
        sys.modules[MODULE] = module
        return MODULE

    yield install
    sys.modules.pop(MODULE, None)


@pytest.fixture(scope="module")
def cropped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two-model project built up to crop."""
    folder = two_model_checkout(tmp_path_factory.mktemp("guard") / "p")
    assert run_cli("run", "p.yaml", "--until", "crop", cwd=folder).code == 0
    return folder


def _quantize_job(folder: Path, module: str) -> plan.Job:
    jobs = plan.plan(load_pipelines([str(folder / "p.yaml")]), until="quantize")
    job = next(j for j in jobs if j.name == "p:det:quantize")
    return dataclasses.replace(job, module=module)


def _write_outputs(ctx: StageContext) -> None:
    for path in ctx.outputs.values():
        path.write_bytes(b"{}")


def _reads_an_undeclared_sibling(ctx: StageContext) -> None:
    ctx.inputs["ai"].with_name("imported.onnx").read_bytes()  # the crop stage's input, not quantize's
    _write_outputs(ctx)


def _swallows_the_guard(ctx: StageContext) -> None:
    try:
        _reads_an_undeclared_sibling(ctx)
    except Exception:
        _write_outputs(ctx)


def _reads_what_it_declares(ctx: StageContext) -> None:
    ctx.inputs["ai"].read_bytes()
    ctx.inputs["pre"].read_bytes()
    Path(accelbuild.__file__).read_bytes()  # outside the pipeline's folders: not the guard's business
    _write_outputs(ctx)
    ctx.outputs["quantize.json"].read_bytes()  # its own staged output


def _execute(job: plan.Job, folder: Path) -> object:
    return worker.execute(job, str(folder / ".accelbuild-test-cache"), force=True)


@pytest.mark.parametrize("run", [_reads_an_undeclared_sibling, _swallows_the_guard])
def test_a_stage_reading_an_undeclared_file_fails(cropped: Path, stage_module, run) -> None:
    result = _execute(_quantize_job(cropped, stage_module(run)), cropped)
    assert isinstance(result, worker.InternalFailure), result
    message = result.message
    assert "UndeclaredRead: p:det:quantize: the stage opened" in message
    assert str((cropped / "build/p/det/imported.onnx").resolve()) in message
    assert "not one of its declared inputs" in message


def test_declared_inputs_own_outputs_and_files_elsewhere_are_fine(cropped: Path, stage_module) -> None:
    result = _execute(_quantize_job(cropped, stage_module(_reads_what_it_declares)), cropped)
    assert isinstance(result, dict) and result["status"] == "ran", result


def test_the_guard_fires_on_the_worker_side_of_shipping(cropped: Path, stage_module) -> None:
    """On a Dask worker the inputs arrive in a temp folder: a file next to them that was not shipped is
    reported as an undeclared read, not as a missing file."""
    job = _quantize_job(cropped, stage_module(_reads_an_undeclared_sibling))
    returned = shipping.run_parcel(shipping.pack(job), shipping.identity())
    assert returned.failure is not None and returned.failure.kind == "internal"
    assert "UndeclaredRead" in returned.failure.message and "imported.onnx" in returned.failure.message


def test_without_the_environment_variable_nothing_is_checked(cropped: Path, stage_module,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(read_guard.ENV)
    result = _execute(_quantize_job(cropped, stage_module(_reads_an_undeclared_sibling)), cropped)
    assert isinstance(result, dict) and result["status"] == "ran", result
