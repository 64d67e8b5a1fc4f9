"""npu hardware profiles: built-ins, the typed view, user profiles with inherits, positioned errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from accelbuild.errors import ConfigError, InputFileError
from accelbuild.targets.npu.hardware import (
    NPU_PROFILES,
    NpuHardware,
    builtin_profiles,
    load_npu_hardware,
    npu_hardware,
)
from accelbuild.targets.profile_files import ProfileError, load_profile

from conftest import write

BUILTINS = ("am62a", "am68a", "mlsoc", "tda4vm", "x3", "x5")


def test_builtins_are_the_six_platforms() -> None:
    assert tuple(sorted(builtin_profiles())) == BUILTINS


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_loads_and_is_consistent(name: str) -> None:
    hw = load_npu_hardware(name)
    assert isinstance(hw, NpuHardware) and hw.name == name
    assert hw.unit_for("Conv") is not None and hw.unit_for("Conv").kind == "matrix"
    assert hw.unit_for("NoSuchOp") is None
    assert set(u.name for u in hw.units) <= set(hw.timeline)
    assert hw.memory.weight_buffer_bytes + hw.memory.feature_buffer_bytes <= sum(s.bytes for s in hw.memory.sram)
    assert 8 in hw.quantization.weight_bits and 8 in hw.quantization.activation_bits
    assert all(text for _, text in hw.sources)
    hash(hw)  # frozen, hashable


@pytest.mark.parametrize("name,dsp", [("tda4vm", "C7x"), ("am68a", "C7x"), ("am62a", "C7x"), ("mlsoc", "EV74"),
                                      ("x3", None), ("x5", None)])
def test_dsp_presence(name: str, dsp: str | None) -> None:
    hw = load_npu_hardware(name)
    assert hw.has_dsp is (dsp is not None)
    assert (hw.dsp.name if hw.dsp else None) == dsp
    if dsp is None:
        with pytest.raises(ValueError, match="no DSP"):
            hw.host("dsp")
    assert hw.host("arm") is hw.arm


def test_published_peaks() -> None:
    """The profiles' MACs per cycle are the published TOPS at 2 ops per MAC (TI rounds 8.19 to 8)."""
    tops = {"tda4vm": 8, "am68a": 8, "am62a": 2, "mlsoc": 50, "x3": 5, "x5": 10}
    for name, published in tops.items():
        hw = load_npu_hardware(name)
        matrix = next(u for u in hw.units if u.kind == "matrix")
        assert matrix.macs_per_cycle * hw.cores * 2 * hw.clock_hz / 1e12 == pytest.approx(published, rel=0.03)


def test_inheriting_ti_parts_keep_tidl_rules() -> None:
    base, child = load_npu_hardware("tda4vm"), load_npu_hardware("am62a")
    assert child.support == base.support and child.fusion == base.fusion
    assert child.unit("MMA").macs_per_cycle == 1024 and child.arm.name == "Cortex-A53"
    assert base.quantization.activation_symmetric and not child.quantization.activation_symmetric


def test_typed_view_of_loaded_dict() -> None:
    data = load_profile(builtin_profiles()["x5"], NPU_PROFILES)
    assert npu_hardware(data) == load_npu_hardware("x5")


def test_user_profile_inherits_by_name(tmp_path: Path) -> None:
    path = write(tmp_path / "mine.yaml", """\
profile: 1
name: mine
inherits: x5
npu: {clock_mhz: 1200}
sources:
  npu.clock_mhz: "stated assumption: overclocked board"
""")
    hw = load_npu_hardware(str(path))
    assert hw.clock_mhz == 1200 and hw.unit("TAE").macs_per_cycle == 5000


def test_user_profile_inherits_by_path(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "profile: 1\nname: a\ninherits: mlsoc\nnpu: {max_batch: 4}\n")
    path = write(tmp_path / "b.yaml", "profile: 1\nname: b\ninherits: a.yaml\n")
    assert load_npu_hardware(str(path)).max_batch == 4


def test_bad_user_profile_is_positioned(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", """\
profile: 1
name: bad
inherits: tda4vm
npu:
  clock_mhz: fast
  cores: 0
""")
    with pytest.raises(ConfigError) as info:
        load_npu_hardware(str(path))
    text = str(info.value)
    assert re.search(r"bad\.yaml:5:14: expected an integer", text), text
    assert re.search(r"bad\.yaml:6:10: 0 is out of range", text), text


def test_rules_beyond_the_schema(tmp_path: Path) -> None:
    path = write(tmp_path / "rules.yaml", """\
profile: 1
name: rules
inherits: x5
units:
  VAE: {ops: [Relu, Conv]}
  TAE: {depthwise_efficiency: 99, large_depthwise_efficiency: 40}
fusion:
  - [Conv, Rleu]
timeline: [TAE, VAE, AAE, TRANS, LOAD, STORE, NPU]
support: {op_max_rank: {Rehsape: 10}, op_max_kernel: {AvgPool: 7}}
""")
    with pytest.raises(ProfileError) as info:
        load_npu_hardware(str(path))
    text = str(info.value)
    assert "rules.yaml:5:" in text and "Conv is listed in units.TAE.ops and units.VAE.ops" in text
    assert "rules.yaml:6:" in text and "depthwise_efficiency is 99 reduction lanes, more than the" in text
    assert "large_depthwise_efficiency is 40 reduction lanes, more than the 16 of align[0]" in text
    assert "rules.yaml:8:" in text and "names Rleu, which no unit runs; did you mean 'Relu'?" in text
    assert "rules.yaml:9:" in text and "timeline names NPU" in text
    assert "rules.yaml:10:" in text and "op_max_rank names Rehsape, which is no ONNX operator; did you mean 'Reshape'?" \
        in text
    assert "op_max_kernel names AvgPool, which is no ONNX operator; did you mean 'AveragePool'?" in text


def test_every_number_needs_a_source(tmp_path: Path) -> None:
    text = (builtin_profiles()["x5"]).read_text()
    text = text.replace('  npu.tile_overhead_cycles: "stated assumption: 0.3 us per tile"\n', "")
    path = write(tmp_path / "unsourced.yaml", text.replace("name: x5", "name: unsourced"))
    with pytest.raises(ConfigError, match=r"unsourced\.yaml:\d+:\d+: npu\.tile_overhead_cycles has no source"):
        load_npu_hardware(str(path))


def test_source_must_name_a_field(tmp_path: Path) -> None:
    path = write(tmp_path / "typo.yaml", """\
profile: 1
name: typo
inherits: x5
sources:
  npu.clock_mzh: "a typo"
""")
    with pytest.raises(ConfigError, match=r"typo\.yaml:5:\d+: sources names npu\.clock_mzh, which is no field"):
        load_npu_hardware(str(path))


def test_unknown_platform_suggests() -> None:
    with pytest.raises(ConfigError, match="unknown npu platform 'tda4v'; did you mean 'tda4vm'"):
        load_npu_hardware("tda4v")


def test_missing_parent(tmp_path: Path) -> None:
    path = write(tmp_path / "orphan.yaml", "profile: 1\nname: orphan\ninherits: nowhere.yaml\n")
    with pytest.raises(InputFileError, match="neither a built-in profile nor a file"):
        load_npu_hardware(str(path))


def test_a_calibration_points_setup_comes_with_its_call_time(tmp_path: Path) -> None:
    """A point measured by another runtime names its setup and that setup's host time per call, both or
    neither: a setup without its time could not be priced as the credibility page prices it."""
    point = "{model: resnet18, input_size: 224, metric: fps, value: 400, batch_size: 1, source: s, setup: rdk_cls}"
    path = write(tmp_path / "half.yaml", f"profile: 1\nname: half\ninherits: x5\ncalibration:\n  - {point}\n")
    with pytest.raises(ConfigError, match=r"half\.yaml:5:\d+: .*call_us"):
        load_npu_hardware(str(path))
    x5 = load_npu_hardware("x5").calibration
    assert [p.setup for p in x5] == ["rdk_cls"] * 2 and all(p.call_us and p.call_us > 100 for p in x5)


def test_a_kernel_shape_efficiency_is_a_share(tmp_path: Path) -> None:
    path = write(tmp_path / "shape.yaml", "profile: 1\nname: shape\ninherits: x5\nunits:\n  TAE:\n"
                                          "    strided_efficiency: 1.5\n")
    with pytest.raises(ConfigError, match=r"shape\.yaml:6:25: 1\.5 is out of range"):
        load_npu_hardware(str(path))
    path.write_text("profile: 1\nname: shape\ninherits: x5\nunits:\n  TAE:\n    pointwise_efficiency: 0.2\n"
                    "sources:\n  units.TAE.pointwise_efficiency: \"stated assumption\"\n")
    tae = load_npu_hardware(str(path)).unit("TAE")
    assert tae.pointwise_efficiency == 0.2 and tae.strided_efficiency == load_npu_hardware("x5").unit("TAE").strided_efficiency


def test_a_dma_overlap_is_a_share(tmp_path: Path) -> None:
    path = write(tmp_path / "over.yaml", "profile: 1\nname: over\ninherits: tda4vm\nnpu:\n  dma_overlap: 1.5\n")
    with pytest.raises(ConfigError, match=r"over\.yaml:5:16: 1\.5 is out of range"):
        load_npu_hardware(str(path))
    path.write_text("profile: 1\nname: over\ninherits: tda4vm\nnpu:\n  dma_overlap: 0.5\n"
                    "sources:\n  npu.dma_overlap: \"stated assumption\"\n")
    assert load_npu_hardware(str(path)).dma_overlap == 0.5
