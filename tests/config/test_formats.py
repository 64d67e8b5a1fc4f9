"""Config format 2, and format 1 read as format 2 with a positioned note per moved key."""

import logging
from pathlib import Path

import pytest

from accelbuild.config.load import load_file, load_pipeline
from accelbuild.errors import ConfigErrors
from accelbuild.targets.mx3.target import dfp_name
from accelbuild.targets.npu.target import package_name

from conftest import write

FORMAT1 = """\
accelbuild: 1
target: {effort: hard}
models:
  - path: models/tinydet.onnx
  - path: models/tinycls.onnx
closed_loop:
  enabled: true
  jobs: 2
  prioritize_model: 1
output:
  dfp_name: two.dfp
  sim_dfp: true
"""

FORMAT2 = """\
accelbuild: 2
target:
  effort: hard
  closed_loop: {enabled: true, jobs: 2, prioritize_model: 1}
  dfp_name: two.dfp
  sim_dfp: true
models:
  - path: models/tinydet.onnx
  - path: models/tinycls.onnx
"""


def _notes(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "accelbuild.config.formats"]


def test_format2_puts_family_keys_under_target(project: Path) -> None:
    write(project / "p.yaml", FORMAT2)
    spec = load_pipeline(str(project / "p.yaml"))
    loop = spec.target.closed_loop
    assert (loop.enabled, loop.jobs, loop.keep_splits, loop.prioritize_model) == (True, 2, False, 1)
    assert dfp_name(spec) == "two.dfp" and spec.target.sim_dfp is True
    assert not hasattr(spec, "closed_loop")


def test_format1_loads_as_format2_with_a_note_at_each_moved_key(project: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    write(project / "one.yaml", FORMAT1)
    write(project / "two.yaml", FORMAT2)
    with caplog.at_level(logging.INFO, logger="accelbuild"):
        one = load_pipeline(str(project / "one.yaml"))
    two = load_pipeline(str(project / "two.yaml"))
    assert one.target == two.target
    shown = str(project / "one.yaml")
    assert _notes(caplog) == [
        f"{shown}:7:3: note: closed_loop.enabled is a format-1 key; accelbuild: 2 puts it at "
        f"target.closed_loop.enabled (run accelbuild migrate {shown})",
        f"{shown}:8:3: note: closed_loop.jobs is a format-1 key; accelbuild: 2 puts it at "
        f"target.closed_loop.jobs (run accelbuild migrate {shown})",
        f"{shown}:9:3: note: closed_loop.prioritize_model is a format-1 key; accelbuild: 2 puts it at "
        f"target.closed_loop.prioritize_model (run accelbuild migrate {shown})",
        f"{shown}:11:3: note: output.dfp_name is a format-1 key; accelbuild: 2 puts it at "
        f"target.dfp_name (run accelbuild migrate {shown})",
        f"{shown}:12:3: note: output.sim_dfp is a format-1 key; accelbuild: 2 puts it at "
        f"target.sim_dfp (run accelbuild migrate {shown})",
    ]


def test_a_moved_key_keeps_its_position_for_errors(project: Path) -> None:
    write(project / "p.yaml", FORMAT1.replace("effort: hard", "effort: normal").replace("prioritize_model: 1",
                                                                                      "prioritize_model: 5"))
    with pytest.raises(ConfigErrors) as err:
        load_pipeline(str(project / "p.yaml"))
    where = {e.message.split(" ")[0]: (e.where.line, e.where.col) for e in err.value.errors}
    assert where == {"closed_loop": (7, 12), "prioritize_model": (9, 21)}


def test_a_format1_key_in_a_format2_file_is_an_error_at_the_key(project: Path) -> None:
    write(project / "p.yaml", "accelbuild: 2\nmodels: [{path: models/tinydet.onnx}]\nclosed_loop:\n  enabled: true\n")
    with pytest.raises(ConfigErrors) as err:
        load_pipeline(str(project / "p.yaml"))
    assert [str(e) for e in err.value.errors] == [
        f"{project / 'p.yaml'}:4:3: closed_loop.enabled is a format-1 key; accelbuild: 2 puts it at "
        "target.closed_loop.enabled"]


def test_a_key_the_family_never_read_is_ignored_with_a_note(project: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(project / "p.yaml", "accelbuild: 1\ntarget: {family: cpu}\nmodels: [{path: models/tinydet.onnx}]\n"
                              "closed_loop: {enabled: true, jobs: 3}\noutput: {dfp_name: x.dfp}\n")
    with caplog.at_level(logging.INFO, logger="accelbuild"):
        spec = load_pipeline(str(project / "p.yaml"))
    assert spec.target.closed_loop is True
    notes = _notes(caplog)
    assert len(notes) == 3
    assert ":4:30: note: closed_loop.jobs is a format-1 key its family does not read: it is ignored" in notes[1]
    assert ":5:10: note: output.dfp_name is a format-1 key its family does not read" in notes[2]


def test_npu_package_name_from_format1_dfp_name(project: Path) -> None:
    write(project / "p.yaml", "accelbuild: 1\ntarget: {family: npu, platform: tda4vm}\n"
                              "models: [{path: models/tinycls.onnx}]\noutput: {dfp_name: cls.dfp}\n")
    assert package_name(load_pipeline(str(project / "p.yaml"))) == "cls.tar.gz"
    write(project / "q.yaml", "accelbuild: 2\ntarget: {family: npu, platform: tda4vm}\n"
                              "models: [{path: models/tinycls.onnx}]\n")
    assert package_name(load_pipeline(str(project / "q.yaml"))) == "q.tar.gz"


def test_extends_mixes_formats_keys_merged_then_moved(project: Path) -> None:
    """A format-2 file over a format-1 base (and the reverse): the nearer file's value wins, and a format-1
    base's moved keys survive a child's target that names its family (as they did in format 1)."""
    write(project / "base.yaml", FORMAT1)
    write(project / "child.yaml", "accelbuild: 2\nextends: base.yaml\ntarget:\n  family: mx3\n  effort: hard\n"
                                  "  closed_loop: {jobs: 3}\n")
    spec = load_pipeline(str(project / "child.yaml"))
    assert (spec.target.closed_loop.enabled, spec.target.closed_loop.jobs) == (True, 3)
    assert dfp_name(spec) == "two.dfp"
    write(project / "base2.yaml", FORMAT2)
    write(project / "child2.yaml", "accelbuild: 1\nextends: base2.yaml\nclosed_loop: {jobs: 5}\n")
    spec = load_pipeline(str(project / "child2.yaml"))
    assert (spec.target.closed_loop.enabled, spec.target.closed_loop.jobs) == (True, 5)


def test_matrix_keys_of_either_format(project: Path) -> None:
    write(project / "one.yaml", FORMAT1 + "matrix:\n  closed_loop.jobs: [1, 2]\n")
    write(project / "two.yaml", FORMAT2 + "matrix:\n  target.closed_loop.jobs: [1, 2]\n")
    for name in ("one", "two"):
        specs = load_file(str(project / f"{name}.yaml"))
        assert [(s.variant, s.target.closed_loop.jobs) for s in specs] == [("jobs=1", 1), ("jobs=2", 2)]


NPU_QUANTIZE = """\
accelbuild: 2
target:
  family: npu
  platform: tda4vm
  quantize: {weight_bits: 16, activation_bits: 16, calibration_frames: 4}
models:
  - name: a
    path: models/tinycls.onnx
  - name: b
    path: models/tinycls.onnx
    quantize: {activation_bits: 8}
"""


def test_target_quantize_gives_defaults_each_model_overrides_key_by_key(project: Path) -> None:
    write(project / "p.yaml", NPU_QUANTIZE)
    a, b = load_pipeline(str(project / "p.yaml")).models
    assert (a.quantize.weight_bits, a.quantize.own.bits, a.quantize.own.calibration_frames) == (16, 16, 4)
    assert (b.quantize.weight_bits, b.quantize.own.bits, b.quantize.own.calibration_frames) == (16, 8, 4)
    assert a.quantize.own.calibration == "percentile"  # the family's schema default
    write(project / "m.yaml", "accelbuild: 2\nextends: p.yaml\nmatrix:\n  models.a.quantize.activation_bits: [8, 16]\n")
    assert [m.models[0].quantize.own.bits for m in load_file(str(project / "m.yaml"))] == [8, 16]


def test_a_models_quantize_keys_are_its_familys(project: Path) -> None:
    write(project / "p.yaml", "accelbuild: 2\nmodels:\n  - path: models/tinycls.onnx\n    quantize: {calibration: mse}\n")
    with pytest.raises(ConfigErrors) as err:
        load_pipeline(str(project / "p.yaml"))
    assert [str(e) for e in err.value.errors] == [
        f"{project / 'p.yaml'}:4:16: unknown key 'calibration' in models.0.quantize: a key of family cpu, ethos-u, "
        "npu, qnn, rknn, not of family mx3"]
    write(project / "q.yaml", NPU_QUANTIZE.replace("weight_bits: 16", "weight_bits: 4"))
    with pytest.raises(ConfigErrors) as err:  # a value from target.quantize: its error is at its line
        load_pipeline(str(project / "q.yaml"))
    assert [(e.where.line, e.where.col, e.message) for e in err.value.errors] == [
        (5, 27, "4-bit weights are stored by mx3 only; family npu stores 8 or 16 bits")]  # once, for both models


def test_a_move_into_a_value_that_is_not_a_mapping_is_an_error(project: Path) -> None:
    write(project / "p.yaml", "accelbuild: 1\ntarget: {closed_loop: 5}\nmodels: [{path: models/tinydet.onnx}]\n"
                              "closed_loop: {enabled: true}\n")
    with pytest.raises(ConfigErrors) as err:
        load_pipeline(str(project / "p.yaml"))
    assert [str(e) for e in err.value.errors] == [
        f"{project / 'p.yaml'}:2:23: expected a mapping here: closed_loop.enabled moves into it in accelbuild: 2"]
