"""Pipelines in CI: a matrix shares its tasks, checks fail the build with a table, status --check,
compare, run --json per-pipeline figures, and the command line's ergonomics."""

from __future__ import annotations

import collections
import io
import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO, run_cli, write

SMALL = """\
accelbuild: 1
name: p
target: {num_chips: 1}
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {images: [64, 64, 3]}
    crop: {outputs: [head.p3, head.p4, head.p5]}
benchmark: {frames: 30, host: false, accuracy: {samples: 1}}
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The shipped sweep (pipelines/sweep.yaml: 3 chip counts x 2 precisions), built once."""
    folder = tmp_path_factory.mktemp("sweep")
    shutil.copytree(REPO / "examples", folder / "examples", ignore=shutil.ignore_patterns("build"))
    shutil.copytree(REPO / "pipelines", folder / "pipelines", ignore=shutil.ignore_patterns("build"))
    result = run_cli("run", "pipelines/sweep.yaml", "--json", cwd=folder)
    assert result.code == 0, result.stderr
    return folder, result.json()


def test_a_matrix_builds_each_import_once(sweep: tuple[Path, dict]) -> None:
    folder, summary = sweep
    counts = collections.Counter((t["model"], t["stage"]) for t in summary["tasks"])
    assert counts[("det", "import")] == counts[("cls", "import")] == 1
    assert counts[("det", "crop")] == counts[("cls", "crop")] == 1
    assert counts[("det", "quantize")] == 2 and counts[("cls", "quantize")] == 1  # one per precision
    assert counts[(None, "map")] == counts[(None, "benchmark")] == 6
    variants = sorted(p["variant"] for p in summary["pipelines"])
    assert variants == sorted(f"num_chips={c},weight_bits={b}" for c in (1, 2, 4) for b in (4, 8))
    for variant in variants:
        assert (folder / "pipelines/build/tinydet-sweep" / variant / "benchmark.json").is_file()
    again = run_cli("run", "pipelines/sweep.yaml", "--json", cwd=folder)
    assert {t["status"] for t in again.json()["tasks"]} == {"up-to-date"}


def test_run_json_gives_each_pipelines_figures_and_artifacts(sweep: tuple[Path, dict]) -> None:
    folder, summary = sweep
    first = summary["pipelines"][0]
    assert first["family"] == "mx3" and first["variant"] == "num_chips=1,weight_bits=4"
    metrics = first["metrics"]
    assert metrics["fps_is"].startswith("sets per second, one frame of each of the 2 models")
    assert metrics["num_chips"] == 1
    assert {m["name"] for m in metrics["models"]} == {"det", "cls"}
    assert all(0.9 < m["cosine"] <= 1 for m in metrics["models"])
    assert [c["check"] for c in first["checks"]] == ["min_cosine", "max_chips"]
    assert Path(first["artifacts"]["tinydet.dfp" if "tinydet.dfp" in first["artifacts"] else "dfp"]).is_file()
    # tasks shared with the first variant are read where they were built
    fourth = summary["pipelines"][3]
    assert "num_chips=1,weight_bits=8" in fourth["artifacts"]["det/quantize.json"]


def test_compare_a_matrix_and_two_folders(sweep: tuple[Path, dict]) -> None:
    folder, _ = sweep
    result = run_cli("compare", "pipelines/sweep.yaml", "--json", cwd=folder)
    assert result.code == 0, result.stderr
    table = result.json()
    assert len(table["sides"]) == 6
    rows = {row["row"]: row for row in table["rows"]}
    assert rows["det cosine"]["best"].endswith("weight_bits=8") and rows["det cosine"]["higher_is_better"]
    assert rows["weight_bytes"]["best"].endswith("weight_bits=4")
    base = folder / "pipelines/build/tinydet-sweep"
    text = run_cli("compare", str(base / "num_chips=1,weight_bits=4"), str(base / "num_chips=2,weight_bits=4"),
                   cwd=folder)
    assert text.code == 0 and text.stdout.splitlines()[0].split()[-3:] == ["delta", "best", "kind"]
    assert "fps together" in text.stdout and "det cosine" in text.stdout and "sum" not in text.stdout


def test_compare_refuses_incompatible_builds(project: Path, sweep: tuple[Path, dict]) -> None:
    folder, _ = sweep
    write(project / "p.yaml", SMALL)
    assert run_cli("run", "p.yaml", cwd=project).code == 0
    other = folder / "pipelines/build/tinydet-sweep/num_chips=1,weight_bits=4"
    result = run_cli("compare", str(project / "build/p"), str(other), cwd=project)
    assert result.code == 2
    assert result.stderr.startswith(f"compare: {project / 'build/p'} has models det but {other} has cls, det")
    assert run_cli("compare", str(project / "build/p"), cwd=project).stderr.startswith("compare: nothing to compare")
    assert run_cli("compare", str(project / "models"), str(other), cwd=project).stderr.startswith(
        f"compare: {project / 'models'}: not a build output folder (no benchmark.json)")


def test_a_failed_check_fails_the_build_with_a_table(project: Path) -> None:
    write(project / "p.yaml", SMALL + "checks: {min_fps: 1.0e+9, min_cosine: 0.5}\n")
    result = run_cli("run", "p.yaml", "--json", cwd=project)
    assert result.code == 1
    assert {t["status"] for t in result.json()["tasks"]} == {"ran"}
    assert result.json()["ok"] is False
    table = result.stderr[result.stderr.index("p: checks"):].splitlines()
    assert table[1].split() == ["check", "required", "measured"]
    assert table[2].split()[:3] == ["min_fps", ">=", "1,000,000,000"] and table[2].endswith("FAILED")
    assert table[3].split()[:3] == ["min_cosine", ">=", "0.5"] and table[3].endswith("ok")
    assert "1 check(s) failed" in result.stderr.splitlines()[-1]


def test_status_check_exit_codes_and_the_cache(project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    write(project / "p.yaml", SMALL)
    assert run_cli("status", "p.yaml", "--check", cwd=project).code == 1  # never built
    assert run_cli("run", "p.yaml", cwd=project).code == 0
    assert run_cli("status", "p.yaml", "--check", cwd=project).code == 0
    # a fresh checkout with only the cache: every task would be restored, none would run
    fresh = tmp_path_factory.mktemp("fresh")
    shutil.copytree(project / "models", fresh / "models")
    shutil.copy(project / "p.yaml", fresh / "p.yaml")
    shutil.copytree(project / ".accelbuild" / "cache", fresh / "cache")
    env = {"ACCELBUILD_CACHE_DIR": str(fresh / "cache")}
    status = run_cli("status", "p.yaml", "--check", "--json", cwd=fresh, env=env)
    assert status.code == 0, status.stdout
    assert {t["status"] for t in status.json()["tasks"]} == {"cached"}
    said = run_cli("status", "p.yaml", cwd=fresh, env=env).stdout  # one verdict per task, not two
    assert "restored, not run" in said and "never built" not in said
    built = run_cli("run", "p.yaml", "--json", cwd=fresh, env=env)
    assert {t["status"] for t in built.json()["tasks"]} == {"cached"}
    write(fresh / "p.yaml", SMALL.replace("frames: 30", "frames: 31"))
    status = run_cli("status", "p.yaml", "--check", cwd=fresh, env=env)
    assert status.code == 1 and "would run   p:benchmark" in status.stdout


def test_verbosity_flags_anywhere_and_the_summary_line(project: Path) -> None:
    write(project / "p.yaml", SMALL)
    quiet = run_cli("run", "p.yaml", "-q", "--until", "crop", cwd=project)
    assert quiet.code == 0 and quiet.stderr.splitlines() == [quiet.stderr.splitlines()[-1]]
    assert quiet.stderr.startswith("accelbuild: 2 tasks: 2 ran, 0 failed in ")
    loud = run_cli("-v", "run", "p.yaml", "--until", "crop", cwd=project)
    assert loud.code == 0 and loud.stderr.splitlines()[-1].startswith("accelbuild: 2 tasks: 0 ran, 2 up-to-date")
    assert run_cli("validate", "p.yaml", "-v", cwd=project).code == 0


def test_run_on_a_model_file_says_a_pipeline_was_expected(project: Path) -> None:
    result = run_cli("run", "models/tinydet.onnx", cwd=project)
    assert result.code == 2
    assert result.stderr == ("models/tinydet.onnx: a model file; `accelbuild run` takes pipeline YAML files "
                             "(write one with `accelbuild init models/tinydet.onnx`)\n")


def test_status_json_marks_cached_tasks(project: Path) -> None:
    write(project / "p.yaml", SMALL)
    run_cli("run", "p.yaml", "--until", "import", cwd=project)
    shutil.rmtree(project / "build")
    status = run_cli("status", "p.yaml", "--json", cwd=project)
    tasks = {t["name"]: t for t in json.loads(status.stdout)["tasks"]}
    assert tasks["p:det:import"]["cached"] is True and tasks["p:det:import"]["would_run"] is False
    assert tasks["p:det:crop"]["would_run"] is True


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_names_long_tasks_on_a_terminal_only(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbuild.config.load import load_pipelines
    from accelbuild.engine import api, doit_backend
    from accelbuild.engine.doit_backend import RunOptions

    write(project / "p.yaml", SMALL)
    monkeypatch.chdir(project)
    monkeypatch.setattr(doit_backend, "PROGRESS_AFTER_SECONDS", 0.0)
    options = RunOptions(root=project, state_dir=project / "s", cache_dir=project / "c")
    terminal = _Terminal()
    assert api.run(load_pipelines(["p.yaml"]), options, until="crop", stream=terminal).ok
    assert "running: p:det:import" in terminal.getvalue() and "p:det:crop" in terminal.getvalue()
    plain = io.StringIO()
    options.force = True
    assert api.run(load_pipelines(["p.yaml"]), options, until="crop", stream=plain).ok
    assert "running" not in plain.getvalue() and "\x1b" not in plain.getvalue()
    assert [line.split()[1] for line in plain.getvalue().splitlines()] == ["ran", "ran"]


def test_status_check_counts_a_checks_threshold_the_built_figures_fail(project: Path) -> None:
    """Only a checks: threshold changed: no task reruns, but run would exit 1, so status --check does too."""
    write(project / "p.yaml", SMALL + "checks: {min_cosine: 0.5}\n")
    assert run_cli("run", "p.yaml", cwd=project).code == 0
    assert run_cli("status", "p.yaml", "--check", cwd=project).code == 0
    write(project / "p.yaml", SMALL + "checks: {min_cosine: 0.9999999}\n")
    status = run_cli("status", "p.yaml", "--check", cwd=project)
    assert status.code == 1 and "would run" not in status.stdout
    assert "min_cosine" in status.stdout and "FAILED" in status.stdout and "run exits 1" in status.stdout
    assert run_cli("run", "p.yaml", cwd=project).code == 1


def test_compare_across_families_on_end_to_end_figures_with_their_kinds(project: Path) -> None:
    """One model built for mx3, npu and ethos-u: compare sets their end-to-end figures side by side, says
    what each kind is, and calls no winner inside the figures' noise."""
    pytest.importorskip("ethosu.vela")
    for family, target in (("mx3", "{num_chips: 1}"), ("npu", "{family: npu, platform: x5}"),
                           ("ethos-u", "{family: ethos-u}")):
        write(project / f"{family}.yaml", f"accelbuild: 1\nname: {family}\ntarget: {target}\nmodels:\n"
                                          "  - name: cls\n    path: models/tinycls.onnx\n    crop: {auto: true}\n"
                                          "benchmark: {accuracy: {samples: 2}}\n")
        assert run_cli("run", f"{family}.yaml", cwd=project).code == 0
    result = run_cli("compare", "build/mx3", "build/npu", "build/ethos-u", "--json", cwd=project)
    assert result.code == 0, result.stderr
    table = result.json()
    assert table["kinds"][0] == "simulated" and table["kinds"][2].startswith("estimated by vela")
    rows = {row["row"]: row for row in table["rows"]}
    whole = rows["end-to-end fps"]
    assert all(isinstance(v, float) for v in whole["values"])
    assert "simulated + host measured" in whole["kind"] and "estimated by vela" in whole["kind"]
    assert whole["noise"] >= 0.05  # across kinds: at least a measured timing's spread
    for row in table["rows"]:
        if row["within_noise"]:
            assert row["best"] is None
    text = run_cli("compare", "build/mx3", "build/npu", "build/ethos-u", cwd=project).stdout
    assert "end-to-end fps" in text and "(simulated)" in text and "(estimated by vela" in text
