import shutil
from pathlib import Path

import pytest

from accelbuild.config.load import load_pipeline, load_pipelines
from accelbuild.errors import ConfigErrors
from accelbuild.targets.mx3.hardware import MX3_PROFILES
from accelbuild.targets.profile_files import load_profile
from accelbuild.util.files import json_digest

from conftest import REPO, write


def test_spec_resolves_paths_and_defaults(project: Path, monkeypatch) -> None:
    write(project / "sub/p.yaml", "accelbuild: 1\nmodels:\n  - path: ../models/tinydet.onnx\n")
    monkeypatch.chdir(project)
    spec = load_pipeline("sub/p.yaml")
    assert spec.name == "p"
    assert spec.models[0].name == "tinydet"
    assert spec.models[0].path == project / "models/tinydet.onnx"
    assert spec.models[0].format == "onnx"
    assert spec.models[0].input_shapes.auto
    assert spec.output.dir == project / "sub/build/p"
    assert spec.target.dfp_name is None and spec.target.sim_dfp is False
    assert spec.target.profile_path == MX3_PROFILES.builtins()["mx3"]
    assert str(spec.where("models", 0, "path")) == "sub/p.yaml:3:11"


def _errors(project: Path, text: str) -> list[str]:
    write(project / "p.yaml", text)
    with pytest.raises(ConfigErrors) as err:
        load_pipeline(str(project / "p.yaml"))
    return [e.message for e in err.value.errors]


def test_checks_the_schema_cannot_express(project: Path) -> None:
    messages = _errors(project, """\
accelbuild: 1
target: {effort: normal, chip_gen: mx33}
models:
  - path: models/tinydet.onnx
    crop: {auto: true, outputs: [x]}
    quantize: {auto_precision: true, bits_file: nope.json}
  - path: models/tinydet.onnx
closed_loop: {enabled: true}
output: {dir: .}
""")
    assert any(m.startswith("unknown chip_gen 'mx33'") and m.endswith("did you mean 'mx3'?") for m in messages)
    assert "crop: choose one way of cropping, not inputs/outputs and auto" in messages
    assert any(m.startswith("auto_precision chooses per-layer bits itself") for m in messages)
    assert any(m.startswith("file not found: nope.json") for m in messages)
    assert any(m.startswith("model name 'tinydet' is already used by models[0]") for m in messages)
    assert any(m.startswith("closed_loop needs target.effort: hard") for m in messages)
    assert any(m.startswith("output.dir must be a folder of its own") for m in messages)


def test_profile_path_and_inheritance(project: Path) -> None:
    write(project / "hw/mine.yaml", "profile: 1\nname: mine\ninherits: mx3\nchip: {clock_mhz: 850}\n")
    write(project / "p.yaml", "accelbuild: 1\ntarget: {chip_gen: hw/mine.yaml}\nmodels: [{path: models/mlp.onnx}]\n")
    spec = load_pipeline(str(project / "p.yaml"))
    profile = load_profile(spec.target.profile_path, MX3_PROFILES)
    assert profile["chip"]["clock_mhz"] == 850
    assert profile["chip"]["weight_memory_params_8bit"] == 10_500_000
    assert json_digest(load_profile(spec.target.profile_path, MX3_PROFILES)) != json_digest(load_profile(MX3_PROFILES.builtins()["mx3"], MX3_PROFILES))


def test_pipelines_may_not_share_an_output_folder(project: Path) -> None:
    write(project / "a.yaml", "accelbuild: 1\noutput: {dir: out}\nmodels: [{path: models/mlp.onnx}]\n")
    write(project / "b.yaml", "accelbuild: 1\noutput: {dir: out}\nmodels: [{path: models/mlp.onnx}]\n")
    with pytest.raises(ConfigErrors) as err:
        load_pipelines([str(project / "a.yaml"), str(project / "b.yaml")])
    assert "is also used by" in str(err.value)


def test_a_config_validated_before_is_not_validated_again_but_a_changed_one_is(tmp_path: Path) -> None:
    """The record of validated configs (state dir) skips the schema for the same data only: any edit is
    validated again, and its mistake is reported as without the record."""
    from accelbuild.config.load import load_pipelines
    from accelbuild.config.validated import ValidatedConfigs

    shutil.copytree(REPO / "examples" / "models", tmp_path / "models")
    good = "accelbuild: 1\nname: p\nmodels:\n  - path: models/tinycls.onnx\ntarget: {num_chips: 1}\n"
    (tmp_path / "p.yaml").write_text(good)
    record = tmp_path / "state" / "validated_configs"
    first = load_pipelines([str(tmp_path / "p.yaml")], ValidatedConfigs(record))
    assert record.is_file() and len(record.read_text().split()) == 1
    again = ValidatedConfigs(record)
    assert load_pipelines([str(tmp_path / "p.yaml")], again) == first and again.added == []
    (tmp_path / "p.yaml").write_text(good.replace("num_chips: 1", "num_chips: 0"))
    with pytest.raises(ConfigErrors) as info:
        load_pipelines([str(tmp_path / "p.yaml")], ValidatedConfigs(record))
    assert str(info.value.errors[0]).endswith("p.yaml:5:21: 0 is out of range: expected an integer >= 1 and <= 16")


def test_a_profile_validated_before_is_not_validated_again_but_an_edited_one_is(tmp_path: Path) -> None:
    from accelbuild.config.load import load_pipelines
    from accelbuild.config.validated import ValidatedConfigs

    shutil.copytree(REPO / "examples" / "models", tmp_path / "models")
    (tmp_path / "chip.yaml").write_text("profile: 1\nname: chip\ndescription: an mx3 at 850 MHz\ninherits: mx3\n"
                                        "chip: {clock_mhz: 850}\n")
    (tmp_path / "p.yaml").write_text("accelbuild: 1\nname: p\nmodels:\n  - path: models/tinycls.onnx\n"
                                     "target: {chip_gen: chip.yaml}\n")
    record = tmp_path / "state" / "validated_configs"
    load_pipelines([str(tmp_path / "p.yaml")], ValidatedConfigs(record))
    assert len(record.read_text().split()) == 2  # the config and its profile
    (tmp_path / "chip.yaml").write_text((tmp_path / "chip.yaml").read_text().replace("850", "-5"))
    with pytest.raises(ConfigErrors) as info:
        load_pipelines([str(tmp_path / "p.yaml")], ValidatedConfigs(record))
    assert "chip.yaml:5:19: -5 is out of range: expected an integer >= 1 and <= 10000" in str(info.value)


def test_benchmark_device_needs_a_family_with_a_device_runtime(project: Path) -> None:
    from accelbuild.config.load import _Checker
    from accelbuild.targets.cpu.target import TARGET as CPU
    from accelbuild.targets.qnn.target import TARGET as QNN

    write(project / "p.yaml", "accelbuild: 1\ntarget: {family: cpu}\nmodels: [{path: models/tinycls.onnx}]\n"
                              "benchmark: {device: {farm: 'dask://h:8786/', resource: rpi}}\n")
    spec = load_pipeline(str(project / "p.yaml"))
    assert spec.benchmark.device is not None and spec.benchmark.device.farm == "dask://h:8786"
    checker = _Checker(spec.source, project)
    device = checker.device({"farm": "dask://h:8786/", "resource": "rpi"}, CPU)
    assert (device.farm, device.resource, device.machine) == ("dask://h:8786", "rpi", None) and not checker.errors
    checker.device({"resource": "rpi"}, QNN)
    assert "family qnn has no device runtime (no device runtime wired yet" in checker.errors[0].message
