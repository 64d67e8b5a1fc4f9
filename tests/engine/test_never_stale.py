"""The build is never stale: what re-runs after a parameter, code or profile change; folder outputs
through the cache; one state per project root; strict errors at the boundary."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from accelbuild import families
from accelbuild.config.load import load_pipelines
from accelbuild.engine import api, code_identity, plan
from accelbuild.engine.doit_backend import RunOptions
from accelbuild.stages.front import FRONT_STAGES

from conftest import run_cli, tree_bytes, write

PIPELINE = """\
accelbuild: 1
name: demo
target: {chip_gen: chip.yaml, num_chips: 1}
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {images: [64, 64, 3]}
    crop: {outputs: [head.p3, head.p4, head.p5]}
  - name: cls
    path: models/tinycls.onnx
benchmark: {frames: 30, host: false, accuracy: {samples: 1}}
"""
PROFILE = "profile: 1\nname: chip\ndescription: mx3 at 850 MHz\ninherits: mx3\nchip:\n  clock_mhz: {clock}\n"

FRONT = {"demo:det:import", "demo:cls:import", "demo:det:crop", "demo:cls:crop"}


@pytest.fixture
def demo(project: Path) -> Path:
    write(project / "demo.yaml", PIPELINE)
    write(project / "chip.yaml", PROFILE.format(clock=600))
    return project


def build(project: Path, *extra: str, cwd: Path | None = None, yaml: str = "demo.yaml") -> dict[str, str]:
    result = run_cli("run", yaml, "--json", *extra, cwd=cwd or project)
    assert result.code == 0, result.stderr
    return result.statuses()


def ran(statuses: dict[str, str]) -> set[str]:
    return {name for name, status in statuses.items() if status == "ran"}


def test_a_stage_parameter_reruns_that_stage_and_what_depends_on_it(demo: Path) -> None:
    build(demo)
    write(demo / "demo.yaml", PIPELINE.replace("frames: 30", "frames: 31"))
    assert ran(build(demo)) == {"demo:benchmark"}  # frames feed only the benchmark without sim_dfp
    write(demo / "demo.yaml", PIPELINE.replace("frames: 30", "frames: 31").replace(
        "    path: models/tinycls.onnx\n", "    path: models/tinycls.onnx\n    quantize: {weight_bits: 4}\n"))
    assert ran(build(demo)) == {"demo:cls:quantize", "demo:map", "demo:assemble", "demo:benchmark"}


def test_effort_change_reruns_map_and_not_the_front_stages(demo: Path) -> None:
    build(demo)
    write(demo / "demo.yaml", PIPELINE.replace("num_chips: 1", "num_chips: 1, effort: lazy"))
    statuses = build(demo)
    assert "demo:map" in ran(statuses)
    assert {statuses[name] for name in FRONT} == {"up-to-date"}
    assert statuses["demo:det:quantize"] == statuses["demo:cls:quantize"] == "up-to-date"


def test_a_profile_edit_does_not_rerun_import(demo: Path) -> None:
    build(demo)
    write(demo / "chip.yaml", PROFILE.format(clock=850))
    status = run_cli("status", "demo.yaml", cwd=demo)
    assert "parameter profile.chip.clock_mhz changed: 600 -> 850" in status.stdout
    statuses = build(demo)
    assert {statuses[name] for name in FRONT} == {"up-to-date"}
    assert statuses["demo:det:quantize"] == "up-to-date"  # the profile's precisions did not change
    assert ran(statuses) == {"demo:map", "demo:assemble", "demo:benchmark"}


def _options(folder: Path) -> RunOptions:
    state = folder / ".accelbuild"
    return RunOptions(root=folder, state_dir=state, cache_dir=state / "cache")


def test_an_edit_of_a_stages_code_reruns_it(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed implementation digest of the mx3 package re-runs the stages it shapes, and only those."""
    monkeypatch.chdir(demo)
    pipelines = load_pipelines(["demo.yaml"])
    first = api.run(pipelines, _options(demo))
    assert first.ok
    real = code_identity.code_digest

    def edited(names: tuple[str, ...]) -> str:
        return real(names) + ("-edited" if "accelbuild.targets.mx3" in names else "")

    monkeypatch.setattr(plan, "code_digest", edited)
    status = run_status(pipelines, demo)
    assert status["demo:map"] == ["accelbuild changed (the code that builds this stage)"]
    assert status["demo:det:import"] == []
    second = api.run(pipelines, _options(demo))
    statuses = {r.name: r.status for r in second.results}
    assert {statuses[name] for name in FRONT} == {"up-to-date"}
    assert ran(statuses) == {"demo:det:quantize", "demo:cls:quantize", "demo:map", "demo:assemble", "demo:benchmark"}


def run_status(pipelines, folder: Path) -> dict[str, list[str]]:
    return {e.name: e.reasons for e in api.explain(pipelines, _options(folder))}


def test_code_digest_follows_the_source(tmp_path: Path) -> None:
    digest = code_identity.code_digest(("accelbuild.stages.crop",))
    assert digest == code_identity.code_digest(("accelbuild.stages.crop", "accelbuild.stages.crop"))
    assert digest != code_identity.code_digest(("accelbuild.stages.import_",))
    with pytest.raises(ValueError):
        code_identity.code_digest(("accelbuild.no_such_module",))


def test_the_code_that_draws_random_inputs_is_part_of_every_stage_that_uses_them() -> None:
    """accelbuild.accuracy draws seeded random inputs through accelbuild.data: a change of their rules must
    rebuild what was measured on them (each stage's code digest covers both)."""
    codes = [stage.code for stage in FRONT_STAGES] + [families.get_target(name).code for name in families.builtin()]
    users = [code for code in codes if "accelbuild.accuracy" in code]
    assert len(users) == len(FRONT_STAGES) + len(families.builtin())
    assert all("accelbuild.data" in code for code in users)


def test_a_cache_hit_restores_the_closed_loop_splits_folder(demo: Path) -> None:
    loop = PIPELINE.replace("num_chips: 1}", "num_chips: 2, effort: hard}") + \
        "closed_loop: {enabled: true, jobs: 1, keep_splits: true}\n"
    write(demo / "demo.yaml", loop)
    build(demo)
    splits = tree_bytes(demo / "build/demo/splits")
    assert splits and all(name.endswith(("split.dfp", "split.json")) for name in splits)
    shutil.rmtree(demo / "build")
    shutil.rmtree(demo / ".accelbuild" / "doit.sqlite3", ignore_errors=True)
    (demo / ".accelbuild" / "doit.sqlite3").unlink(missing_ok=True)
    statuses = build(demo)
    assert statuses["demo:assemble"] == "cached"
    assert tree_bytes(demo / "build/demo/splits") == splits
    (demo / "build/demo/splits/00/split.json").write_text("{}")  # an edited split is an edited output
    assert "output edited" in run_cli("status", "demo.yaml", cwd=demo).stdout
    write(demo / "demo.yaml", loop.replace("keep_splits: true", "keep_splits: false"))
    build(demo)
    assert not (demo / "build/demo/splits").exists()


def test_subfolder_and_root_builds_share_one_state(demo: Path) -> None:
    (demo / ".git").mkdir()  # the project root
    (demo / "sub").mkdir()
    assert set(build(demo, cwd=demo / "sub", yaml="../demo.yaml").values()) == {"ran"}
    assert (demo / ".accelbuild").is_dir() and not (demo / "sub" / ".accelbuild").exists()
    assert set(build(demo).values()) == {"up-to-date"}
    status = run_cli("status", "../demo.yaml", cwd=demo / "sub")
    assert "would run" not in status.stdout and "edited" not in status.stdout


def test_a_moved_checkout_keeps_its_state(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    (demo / ".git").mkdir()
    build(demo)
    moved = tmp_path_factory.mktemp("moved") / "checkout"
    shutil.copytree(demo, moved, symlinks=True)
    assert set(build(moved).values()) == {"up-to-date"}


def test_output_dir_naming_a_file_is_a_positioned_error(demo: Path) -> None:
    write(demo / "out", "not a folder")
    write(demo / "demo.yaml", PIPELINE + "output: {dir: out}\n")
    result = run_cli("run", "demo.yaml", cwd=demo)
    assert result.code == 2
    assert result.stderr.startswith("demo.yaml:12:15: output folder out cannot be used: it is a file; output.dir must "
                                    "name a folder")
    assert "Traceback" not in result.stderr
