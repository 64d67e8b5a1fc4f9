"""The library API drives the build in-process as the CLI does: load, plan, build, status, metrics, compare,
clean and inspect_model on a tiny pipeline, and a mistake raised with the CLI's positioned message."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbuild import api
from accelbuild.errors import UserError

from conftest import two_model_checkout, write


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = two_model_checkout(tmp_path)
    monkeypatch.chdir(folder)
    return folder


def test_a_build_through_the_api_then_nothing_to_do(checkout: Path) -> None:
    pipelines = api.load("p.yaml")
    jobs = api.plan(pipelines)
    assert [j.stage for j in jobs].count("import") == 2 and jobs[-1].stage == "benchmark"
    summary = api.build(pipelines, api.options())
    assert summary.ok and {r.status for r in summary.results} == {"ran"}
    figures = api.metrics(pipelines[0])
    assert figures is not None and figures["kind"] == "simulated" and figures["fps"] > 0
    assert {m["name"] for m in figures["models"]} == {"det", "cls"}
    assert [e.name for e in api.status(pipelines) if e.would_run] == []
    assert {r.status for r in api.build(pipelines).results} == {"up-to-date"}
    side = api.compare(checkout / "build" / "p", checkout / "build" / "p")
    assert side["kinds"] == ["simulated", "simulated"]
    removed = api.clean(pipelines)
    assert removed and not (checkout / "build" / "p" / "benchmark.json").exists()


def test_a_mistake_raises_the_clis_positioned_message(checkout: Path) -> None:
    write(checkout / "bad.yaml", "accelbuild: 1\ntarget:\n  num_chip: 2\nmodels:\n  - path: models/tinycls.onnx\n")
    with pytest.raises(UserError) as caught:
        api.load("bad.yaml")
    assert "bad.yaml:3:3: unknown key 'num_chip' in target; did you mean 'num_chips'?" in str(caught.value)


def test_inspect_model_reads_a_model_as_a_build_imports_it(checkout: Path) -> None:
    info = api.inspect_model(checkout / "models" / "tinycls.onnx")
    assert [i["name"] for i in info.inputs] == ["input"] and info.outputs
