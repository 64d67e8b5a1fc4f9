"""extends and matrix: merging, positions in the file that holds a value, variants and their keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbuild.config.compose import variant_name
from accelbuild.config.load import load_file, load_pipelines
from accelbuild.errors import ConfigError, ConfigErrors

from conftest import write

BASE = """\
accelbuild: 1
name: base
target: {num_chips: 2, effort: lazy}
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {images: [64, 64, 3]}
    quantize: {weight_bits: 8, bits: {stem.conv: 16}}
  - name: cls
    path: models/tinycls.onnx
benchmark: {frames: 30}
"""


def _messages(path: Path) -> list[str]:
    with pytest.raises((ConfigError, ConfigErrors)) as info:
        load_pipelines([str(path)])
    exc = info.value
    return [str(e) for e in (exc.errors if isinstance(exc, ConfigErrors) else [exc])]


def test_extends_merges_mappings_replaces_lists_and_merges_models_by_name(project: Path) -> None:
    write(project / "base.yaml", BASE)
    write(project / "ci/fast.yaml", "accelbuild: 1\nextends: ../base.yaml\nname: fast\ntarget: {num_chips: 1}\n"
                                    "models:\n  - name: det\n    quantize: {weight_bits: 4}\n"
                                    "  - name: extra\n    path: ../models/mlp.onnx\n")
    spec, = load_file(str(project / "ci/fast.yaml"))
    assert spec.name == "fast"
    assert (spec.target.num_chips, spec.target.effort) == (1, "lazy")  # mapping merged key by key
    assert [m.name for m in spec.models] == ["det", "cls", "extra"]
    det = spec.models[0]
    assert det.quantize.weight_bits == 4 and det.quantize.bits == {"stem.conv": 16}
    assert det.path == project / "models/tinydet.onnx"  # relative to base.yaml, which wrote it
    assert spec.models[2].path == project / "models/mlp.onnx"  # relative to fast.yaml
    assert spec.output.dir == project / "ci/build/fast"


def test_extends_chains_and_errors_point_into_the_file_holding_the_value(project: Path) -> None:
    write(project / "a.yaml", BASE.replace("effort: lazy", "effort: lazzy"))
    write(project / "b.yaml", "accelbuild: 1\nextends: a.yaml\nbenchmark: {frames: 0}\n")
    write(project / "c.yaml", "accelbuild: 1\nextends: b.yaml\n")
    assert _messages(project / "c.yaml") == [
        f"{project / 'a.yaml'}:3:32: 'lazzy' is not one of 'lazy', 'normal', 'hard'; did you mean 'lazy'?",
        f"{project / 'b.yaml'}:3:21: 0 is out of range: expected an integer >= 1 and <= 1000000",
    ]


def test_extends_cycle_and_missing_base(project: Path) -> None:
    write(project / "x.yaml", "accelbuild: 1\nextends: y.yaml\n")
    write(project / "y.yaml", "accelbuild: 1\nextends: x.yaml\nmodels: [{path: models/mlp.onnx}]\n")
    assert _messages(project / "x.yaml") == [
        f"{project / 'y.yaml'}:2:10: extends 'x.yaml' is a cycle: it leads back to {project / 'x.yaml'}"]
    write(project / "z.yaml", "accelbuild: 1\nextends: nowhere.yaml\n")
    assert _messages(project / "z.yaml") == [f"{project / 'z.yaml'}:2:10: extends 'nowhere.yaml': no such file"]


def test_matrix_variants_names_folders_and_values(project: Path) -> None:
    write(project / "base.yaml", BASE)
    write(project / "sweep.yaml", "accelbuild: 1\nextends: base.yaml\nname: sweep\nmatrix:\n"
                                  "  target.num_chips: [1, 2, 4]\n  models.det.quantize.weight_bits: [4, 8]\n")
    specs = load_file(str(project / "sweep.yaml"))
    assert [s.variant for s in specs] == [
        "num_chips=1,weight_bits=4", "num_chips=1,weight_bits=8", "num_chips=2,weight_bits=4",
        "num_chips=2,weight_bits=8", "num_chips=4,weight_bits=4", "num_chips=4,weight_bits=8"]
    assert specs[2].name == "sweep[num_chips=2,weight_bits=4]"
    assert specs[2].output.dir == project / "build/sweep/num_chips=2,weight_bits=4"
    from accelbuild.targets.mx3.target import dfp_name
    assert dfp_name(specs[2]) == "sweep.dfp"
    assert (specs[5].target.num_chips, specs[5].models[0].quantize.weight_bits) == (4, 8)
    assert variant_name(["a.b.c", "d"], (True, None)) == "c=true,d=null"


@pytest.mark.parametrize("key, message", [
    ("target.num_chip", "matrix key 'target.num_chip' names no field: no key 'num_chip' in target; "
                        "did you mean 'num_chips'?"),
    ("models.dett.quantize.weight_bits", "matrix key 'models.dett.quantize.weight_bits': no model named 'dett' "
                                         "(models: det, cls); did you mean 'det'?"),
    ("models.det.quantise.weight_bits", "matrix key 'models.det.quantise.weight_bits' names no field: no key "
                                        "'quantise' in models.0; did you mean 'quantize'?"),
    ("target.platform", "matrix key 'target.platform' names no field: no key 'platform' in target"),
])
def test_a_matrix_key_that_names_no_field_is_an_error_at_the_key(project: Path, key: str, message: str) -> None:
    write(project / "base.yaml", BASE)
    write(project / "m.yaml", f"accelbuild: 1\nextends: base.yaml\nmatrix:\n  {key}: [1, 2]\n")
    first = _messages(project / "m.yaml")[0]
    assert first.startswith(f"{project / 'm.yaml'}:4:3: {message}")


def test_a_bad_matrix_value_points_at_the_value(project: Path) -> None:
    write(project / "base.yaml", BASE)
    write(project / "m.yaml", "accelbuild: 1\nextends: base.yaml\nmatrix:\n  target.num_chips: [1, 0]\n")
    assert _messages(project / "m.yaml") == [
        f"{project / 'm.yaml'}:4:25: 0 is out of range: expected an integer >= 1 and <= 16"]


def test_a_check_the_family_has_no_figure_for_is_an_error(project: Path) -> None:
    write(project / "base.yaml", BASE + "checks: {min_fps: 10, max_host_layers: 0}\n")
    assert _messages(project / "base.yaml") == [
        f"{project / 'base.yaml'}:12:23: check max_host_layers does not apply to family mx3: its builds have no "
        "such figure (checks here: max_chips, max_latency_ms, min_cosine, min_fps)"]


def test_a_child_that_sets_the_family_replaces_the_target_and_null_removes_a_key(project: Path) -> None:
    """family: npu over an mx3 base: the base's chip_gen and num_chips do not follow it; a key set to null
    removes the inherited value; a mistake in the child's target points at the child's line."""
    write(project / "base.yaml", BASE.replace("target: {num_chips: 2, effort: lazy}",
                                              "target: {family: mx3, chip_gen: mx3, num_chips: 2, effort: lazy}"))
    write(project / "npu.yaml", "accelbuild: 1\nextends: base.yaml\nname: on-npu\n"
                                "target: {family: npu, platform: x5}\n"
                                "models:\n  - name: det\n    quantize: {bits: null}\n")
    [spec] = load_pipelines([str(project / "npu.yaml")])
    assert spec.target.family == "npu" and spec.target.platform == "x5"
    det = next(m for m in spec.models if m.name == "det")
    assert det.quantize.bits == {} or not det.quantize.bits  # the base's per-layer bits are removed
    assert det.quantize.weight_bits == 8                     # the rest of the base's quantize stays
    write(project / "typo.yaml", "accelbuild: 1\nextends: base.yaml\nname: t\ntarget: {family: npu, platfrom: x5}\n")
    messages = _messages(project / "typo.yaml")
    assert all(str(project / "typo.yaml") in m for m in messages), messages
    assert any("platfrom" in m and "did you mean 'platform'" in m for m in messages), messages
