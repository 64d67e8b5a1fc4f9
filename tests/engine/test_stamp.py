"""The no-op fast path (accelbuild/engine/stamp.py): a replay prints what the full run prints, and no kind of
change is ever hidden by it: a config value, a model file, an external-data file, a data image, a profile
file, accelbuild's own code, a deleted output.

Whether a run was replayed is seen from outside: a replay leaves the invocation's stamp file as it was; a
full run drops it first and writes a new one (or none). Files are aged by ``age`` before the recording
run, because a stamp is only written when every file it covers is settled (``stamp.SETTLE_NS``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from PIL import Image

import accelbuild
from accelbuild.engine import stamp
from accelbuild.testing import models

from conftest import CliResult, run_cli, write

PIPELINE = """\
accelbuild: 1
name: p
target: {chip_gen: chip.yaml, num_chips: 1}
models:
  - name: cls
    path: models/tinycls.onnx
    input_shapes: {input: [32, 32, 3]}
    data: {path: imgs}
  - name: mlp
    path: models/ext.onnx
benchmark: {frames: 40, host: false, accuracy: {samples: 1}}
"""
PROFILE = "profile: 1\nname: chip\ndescription: mx3 at {clock} MHz\ninherits: mx3\nchip:\n  clock_mhz: {clock}\n"


def _image(path: Path, shade: int) -> None:
    pixels = np.linspace(0, 255, 40 * 36 * 3).reshape(40, 36, 3) * 0.8 + shade
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(path)


def age(*folders: Path, seconds: float = 30) -> None:
    """Every file and folder under ``folders`` last modified ``seconds`` ago (settled for a stamp)."""
    then = time.time() - seconds
    for folder in folders:
        for path in [folder, *folder.rglob("*")]:
            os.utime(path, (then, then))


@pytest.fixture
def built(project: Path) -> Path:
    """The project built, aged, and run once more so that it holds a stamp."""
    build_and_stamp(project)
    return project


def build_and_stamp(project: Path) -> CliResult:
    """Build the project, age it and run it again (a full no-op run, which writes a stamp): that run."""
    write(project / "p.yaml", PIPELINE)
    write(project / "chip.yaml", PROFILE.format(clock=600))
    (project / "imgs").mkdir()
    for i in range(3):
        _image(project / "imgs" / f"{i}.png", 10 * i)
    onnx.save(models.static_mlp(), project / "models/ext.onnx", save_as_external_data=True, location="ext.bin",
              size_threshold=0)
    assert run("p.yaml", cwd=project).code == 0
    age(project)
    full = run("p.yaml", cwd=project)
    assert set(full.statuses().values()) == {"up-to-date"}
    assert stamp_of(project) is not None, "the no-op run after an aged build writes a stamp"
    return full


def run(*args: str, cwd: Path) -> CliResult:
    return run_cli("run", *args, "--json", cwd=cwd)


def stamp_of(project: Path) -> tuple[int, int] | None:
    """(inode, mtime) of the project's one stamp file, or None."""
    stamps = list((project / ".accelbuild" / stamp.FOLDER).glob("*.json"))
    assert len(stamps) <= 1
    return (stamps[0].stat().st_ino, stamps[0].stat().st_mtime_ns) if stamps else None


def replayed(project: Path, *args: str) -> tuple[bool, CliResult]:
    before = stamp_of(project)
    result = run("p.yaml", *args, cwd=project)
    return before is not None and stamp_of(project) == before, result


def ran(result: CliResult) -> set[str]:
    return {name for name, status in result.statuses().items() if status != "up-to-date"}


def test_a_replay_prints_what_the_full_run_prints(project: Path) -> None:
    full = build_and_stamp(project)
    was_replayed, again = replayed(project)
    assert was_replayed and again.code == full.code == 0
    assert again.stdout == full.stdout
    strip = lambda text: text.rsplit(" in ", 1)[0]  # noqa: E731 (the closing line's time differs)
    assert strip(again.stderr) == strip(full.stderr)
    assert again.stderr.splitlines()[-1].startswith("accelbuild: 9 tasks: 0 ran, 9 up-to-date, 0 failed in ")


def test_a_run_right_after_a_build_writes_no_stamp(project: Path) -> None:
    write(project / "p.yaml", PIPELINE.replace("    data: {path: imgs}\n", "").replace("chip_gen: chip.yaml, ", ""))
    onnx.save(models.static_mlp(), project / "models/ext.onnx")
    assert run("p.yaml", cwd=project).code == 0
    assert set(run("p.yaml", cwd=project).statuses().values()) == {"up-to-date"}
    assert stamp_of(project) is None  # its outputs are too fresh to be trusted by their stat


def test_force_is_never_replayed_and_what_it_rewrote_is_checked_in_full(built: Path) -> None:
    assert set(run("p.yaml", "--force", cwd=built).statuses().values()) == {"ran"}
    was_replayed, again = replayed(built)
    assert not was_replayed and ran(again) == set()


def test_a_config_value_changed_in_place_with_its_old_stat(built: Path) -> None:
    config = built / "p.yaml"
    before = config.stat()
    with open(config, "r+b") as handle:  # same size, same inode, and the old mtime put back
        handle.write(config.read_bytes().replace(b"frames: 40", b"frames: 41"))
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (config.stat().st_size, config.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    was_replayed, result = replayed(built)
    assert not was_replayed and ran(result) == {"p:benchmark"}


def test_a_model_file(built: Path) -> None:
    onnx.save(models.tiny_classifier(seed=5), built / "models/tinycls.onnx")
    was_replayed, result = replayed(built)
    assert not was_replayed and "p:cls:import" in ran(result)


def test_an_external_data_file(built: Path) -> None:
    data = bytearray((built / "models/ext.bin").read_bytes())
    data[:4] = bytes(4)  # one weight zeroed, in place
    (built / "models/ext.bin").write_bytes(bytes(data))
    was_replayed, result = replayed(built)
    assert not was_replayed and "p:mlp:import" in ran(result)


def test_a_data_image_changed_and_one_added(built: Path) -> None:
    _image(built / "imgs/1.png", 99)
    was_replayed, result = replayed(built)
    assert not was_replayed and "p:cls:quantize" in ran(result)
    age(built)
    assert set(run("p.yaml", cwd=built).statuses().values()) == {"up-to-date"}
    _image(built / "imgs/3.png", 50)
    was_replayed, result = replayed(built)
    assert not was_replayed and "p:cls:quantize" in ran(result)


def test_a_profile_file(built: Path) -> None:
    write(built / "chip.yaml", PROFILE.format(clock=850))
    was_replayed, result = replayed(built)
    assert not was_replayed and "p:map" in ran(result)


def test_accelbuild_code(built: Path) -> None:
    """A source file of accelbuild with another modification time (content unchanged, so nothing runs):
    the fast path checks in full. cli.py is in no stage's code digest, yet it decides what a run prints."""
    source = Path(accelbuild.__file__).parent / "cli.py"
    before = source.stat()
    try:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns - 10**9))
        was_replayed, result = replayed(built)
    finally:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert not was_replayed and ran(result) == set()


def test_a_deleted_output(built: Path) -> None:
    (built / "build/p/benchmark.json").unlink()
    was_replayed, result = replayed(built)
    assert not was_replayed and "p:benchmark" in ran(result)
    assert (built / "build/p/benchmark.json").is_file()


def test_a_replay_of_failing_checks_fails_the_same_way(built: Path) -> None:
    write(built / "p.yaml", PIPELINE + "checks: {min_fps: 1.0e+12}\n")
    first = run("p.yaml", cwd=built)
    assert first.code == 1
    age(built)
    assert run("p.yaml", cwd=built).code == 1
    was_replayed, again = replayed(built)
    assert was_replayed and again.code == 1
    assert "accelbuild: failed: p (checks: min_fps)" in again.stderr and "min_fps" in again.stderr
