"""``accelbuild migrate``: format-1 files rewritten in format 2, in place, comments kept."""

import shutil
from pathlib import Path

import pytest

from accelbuild.config.load import load_pipeline
from accelbuild.config.migrate import migrate_file, migrate_files
from accelbuild.errors import ConfigError

from conftest import REPO, run_cli, write

BLOCK = """\
# a pipeline with comments everywhere
accelbuild: 1
target:
  effort: hard      # the closed loop needs it
models:
  - path: models/tinydet.onnx
  - path: models/tinycls.onnx
closed_loop:        # try the splits
  # run it
  enabled: true     # yes
  jobs: 2
output:
  dir: out          # kept
  dfp_name: "two.dfp"
matrix:
  closed_loop.prioritize_model: [0, 1]
"""

BLOCK_2 = """\
# a pipeline with comments everywhere
accelbuild: 2
target:
  effort: hard      # the closed loop needs it
  closed_loop:  # try the splits
    # run it
    enabled: true     # yes
    jobs: 2
  dfp_name: "two.dfp"
models:
  - path: models/tinydet.onnx
  - path: models/tinycls.onnx
output:
  dir: out          # kept
matrix:
  target.closed_loop.prioritize_model: [0, 1]
"""


def _specs_equal(a: Path, b: Path) -> None:
    from accelbuild.config.load import load_file

    left, right = load_file(str(a)), load_file(str(b))
    assert [(s.variant, s.target, s.output.dir.name) for s in left] == \
        [(s.variant, s.target, s.output.dir.name) for s in right]


def test_block_layout_keeps_comments_and_loads_the_same(project: Path) -> None:
    write(project / "p.yaml", BLOCK)
    write(project / "before.yaml", BLOCK)
    result = migrate_file(project / "p.yaml")
    assert result.changed and [".".join(m.source) for m in result.moves] == [
        "closed_loop.enabled", "closed_loop.jobs", "output.dfp_name"]
    assert (project / "p.yaml").read_text() == BLOCK_2
    _specs_equal(project / "p.yaml", project / "before.yaml")


def test_flow_target_and_sections(project: Path) -> None:
    write(project / "p.yaml", "accelbuild: 1\ntarget: {effort: hard}  # hard\nmodels: [{path: models/tinydet.onnx}]\n"
                              "closed_loop: {enabled: true}  # on\noutput: {dir: o, sim_dfp: true}\n")
    migrate_file(project / "p.yaml")
    assert (project / "p.yaml").read_text() == (
        "accelbuild: 2\ntarget: {effort: hard, closed_loop: {enabled: true}, sim_dfp: true}  # hard\n"
        "models: [{path: models/tinydet.onnx}]\n# on\noutput: {dir: o}\n")


def test_no_target_section_gets_one_before_models_and_npu_names_its_package(project: Path) -> None:
    write(project / "p.yaml", "accelbuild: 1\nmodels:\n  - path: models/tinydet.onnx\nclosed_loop:\n  enabled: false\n")
    migrate_file(project / "p.yaml")
    assert (project / "p.yaml").read_text() == ("accelbuild: 2\ntarget:\n  closed_loop:\n    enabled: false\n"
                                                "models:\n  - path: models/tinydet.onnx\n")
    write(project / "n.yaml", "accelbuild: 1\ntarget:\n  family: npu\n  platform: tda4vm\n"
                              "models: [{path: models/tinycls.onnx}]\noutput:\n  dfp_name: cls.dfp\n")
    migrate_file(project / "n.yaml")
    assert (project / "n.yaml").read_text() == ("accelbuild: 2\ntarget:\n  family: npu\n  platform: tda4vm\n"
                                                "  package_name: cls.tar.gz\nmodels: [{path: models/tinycls.onnx}]\n")
    assert load_pipeline(str(project / "n.yaml")).target.package_name == "cls.tar.gz"


def test_keys_the_family_never_read_are_removed(project: Path) -> None:
    write(project / "p.yaml", "accelbuild: 1\ntarget:\n  family: cpu\nmodels: [{path: models/tinydet.onnx}]\n"
                              "closed_loop:\n  enabled: true\n  jobs: 3\n")
    migrate_file(project / "p.yaml")
    assert (project / "p.yaml").read_text() == ("accelbuild: 2\ntarget:\n  family: cpu\n  closed_loop:\n"
                                                "    enabled: true\nmodels: [{path: models/tinydet.onnx}]\n")


def test_a_family_from_the_base_file(project: Path) -> None:
    write(project / "base.yaml", "accelbuild: 2\ntarget: {family: npu, platform: tda4vm}\n"
                                 "models: [{path: models/tinycls.onnx}]\n")
    write(project / "p.yaml", "accelbuild: 1\nextends: base.yaml\noutput:\n  dfp_name: x.dfp\n")
    migrate_file(project / "p.yaml")
    assert (project / "p.yaml").read_text() == "accelbuild: 2\nextends: base.yaml\ntarget:\n  package_name: x.tar.gz\n"


def test_format2_files_are_left_alone_and_odd_layouts_refused(project: Path) -> None:
    write(project / "two.yaml", "accelbuild: 2\nmodels: [{path: models/tinydet.onnx}]\n")
    before = (project / "two.yaml").read_bytes()
    assert migrate_files([str(project / "two.yaml")]) == [f"{project / 'two.yaml'}: already format 2, unchanged"]
    assert (project / "two.yaml").read_bytes() == before
    text = "accelbuild: 1\nmodels: [{path: models/tinydet.onnx}]\nclosed_loop: {enabled: true,\n  jobs: 2}\n"
    write(project / "flow.yaml", text)
    with pytest.raises(ConfigError) as err:
        migrate_file(project / "flow.yaml")
    assert str(err.value).startswith(f"{project / 'flow.yaml'}:3:14: migrate cannot rewrite a flow mapping over "
                                     "several lines safely")
    assert (project / "flow.yaml").read_text() == text
    write(project / "three.yaml", "accelbuild: 3\nmodels: []\n")
    with pytest.raises(ConfigError, match="not a format-1 file"):
        migrate_file(project / "three.yaml")


def test_cli_migrates_each_file_and_exits_2_on_a_refusal(project: Path) -> None:
    write(project / "a.yaml", "accelbuild: 1\nmodels: [{path: models/tinydet.onnx}]\noutput: {sim_dfp: true}\n")
    write(project / "b.yaml", "{accelbuild: 1, models: [{path: models/tinydet.onnx}], closed_loop: {jobs: 1}}\n")
    result = run_cli("migrate", "a.yaml", "b.yaml", cwd=project)
    assert result.code == 2 and "Traceback" not in result.stderr
    assert result.stdout == "" and result.stderr.startswith("b.yaml:1:1: migrate cannot rewrite a pipeline written "
                                                            "as one flow mapping safely")
    assert (project / "a.yaml").read_text() == ("accelbuild: 2\ntarget:\n  sim_dfp: true\n"
                                                "models: [{path: models/tinydet.onnx}]\n")
    result = run_cli("migrate", "a.yaml", cwd=project)
    assert result.code == 0 and result.stdout == "a.yaml: already format 2, unchanged\n"


def test_the_shipped_format1_pipelines_migrate_to_the_shipped_files(tmp_path: Path) -> None:
    """tests/fixtures/format1/ holds shipped pipelines as they were in format 1: migrate gives the shipped
    format-2 files (tests/test_phase1_bytes.py builds both to the recorded bytes)."""
    folder = tmp_path / "examples" / "valid"
    folder.mkdir(parents=True)
    for before in sorted((REPO / "tests" / "fixtures" / "format1").glob("*.yaml")):
        shutil.copy(before, folder / before.name)
        migrate_file(folder / before.name)
        assert (folder / before.name).read_text() == (REPO / "examples" / "valid" / before.name).read_text()


def test_a_key_from_a_merge_is_refused_not_guessed(project: Path) -> None:
    text = "accelbuild: 1\nmodels: [{path: models/tinydet.onnx}]\nclosed_loop:\n  <<: {enabled: true}\n"
    write(project / "p.yaml", text)
    with pytest.raises(ConfigError, match="closed_loop.enabled from a merged anchor"):
        migrate_file(project / "p.yaml")
    assert (project / "p.yaml").read_text() == text
