"""Hardware profiles as validated data: the built-in files, their sources, user profiles and their errors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from accelbuild.config.load import load_pipeline
from accelbuild.config.schema_check import load_schema, resolve_ref, validate_merged
from accelbuild.config.yaml_source import load_yaml, parse_yaml
from accelbuild.errors import ConfigError, ConfigErrors, InputFileError
from accelbuild.targets.mx3.hardware import MX3_PROFILES, HardwareProfile, load_hardware
from accelbuild.targets.profile_files import ProfileError, load_profile
from accelbuild.util.files import json_digest

from conftest import REPO, write

SCHEMA = "hardware.schema.json"
BUILTINS = sorted(MX3_PROFILES.builtins())
SOURCE_WORDS = ("stated assumption", "MemryX", "PCI-SIG", "He et al.")


@pytest.fixture(params=BUILTINS)
def builtin(request: pytest.FixtureRequest) -> HardwareProfile:
    return load_hardware(MX3_PROFILES.builtins()[request.param])


# --- the schema -------------------------------------------------------------------------------------


def _properties(schema: dict, root: dict, path: str = ""):
    """(dotted name, sub-schema) of every property, through $refs, lists, maps and the if/then branch."""
    schema = resolve_ref(schema, root)
    for key, sub in schema.get("properties", {}).items():
        yield f"{path}{key}", sub
        yield from _properties(sub, root, f"{path}{key}.")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield f"{path}{key}", schema[key]
            yield from _properties(schema[key], root, f"{path}[]." if key == "items" else f"{path}*.")
    if isinstance(schema.get("then"), dict):
        yield from _properties(schema["then"], root, path)


def test_every_property_is_described_and_objects_are_closed() -> None:
    root = load_schema(SCHEMA)
    assert root["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    props = list(_properties(root, root))
    assert len(props) > 60
    for name, sub in props:
        assert sub.get("description") or resolve_ref(sub, root).get("description"), name
    for name, definition in root["$defs"].items():
        assert definition.get("description"), name
        if "properties" in definition and "$ref" not in definition and name != "complete":
            assert definition.get("additionalProperties") is False, name


def test_repo_schema_link_is_the_packaged_file() -> None:
    link = REPO / "schemas" / SCHEMA
    assert link.is_symlink()
    assert link.read_text() == (REPO / "accelbuild" / "schemas" / SCHEMA).read_text()


# --- the built-in profiles --------------------------------------------------------------------------


def test_builtin_profiles_validate_and_load(builtin: HardwareProfile) -> None:
    assert builtin.name in BUILTINS
    assert builtin.chip.clock_mhz == 600
    assert builtin.peak_macs_per_cycle == builtin.chip.mac_cores.count * builtin.chip.mac_cores.macs_per_cycle
    assert builtin.weight_memory_bytes == 10_500_000
    assert builtin.chip.weight_params(4) == 21_000_000 and builtin.chip.weight_params(16) == 5_250_000
    assert builtin.bytes_per_value("FP32") == 4 and builtin.bytes_per_value("BF16") == 2
    assert builtin.digest == json_digest(load_profile(MX3_PROFILES.builtins()[builtin.name], MX3_PROFILES))


def test_preprod_states_the_same_figures_as_mx3() -> None:
    mx3 = load_profile(MX3_PROFILES.builtins()["mx3"], MX3_PROFILES)
    preprod = load_profile(MX3_PROFILES.builtins()["mx3_preprod"], MX3_PROFILES)
    assert {k: v for k, v in preprod.items() if k not in ("name", "description")} == \
        {k: v for k, v in mx3.items() if k not in ("name", "description")}


def _numeric_leaves(data, path=()):
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _numeric_leaves(value, path + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _numeric_leaves(value, path + (index,))
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        yield path


def _comments_for(lines: list[str], line: int) -> str:
    """The comment on ``line`` (1-based) and the block of comment-only lines directly above it."""
    found = [lines[line - 1].partition("#")[2]]
    above = line - 2
    while above >= 0 and lines[above].lstrip().startswith("#"):
        found.append(lines[above])
        above -= 1
    return " ".join(found)


@pytest.mark.parametrize("name", BUILTINS)
def test_every_number_cites_a_source_or_a_stated_assumption(name: str) -> None:
    doc = load_yaml(MX3_PROFILES.builtins()[name])
    lines = doc.text.splitlines()
    leaves = [p for p in _numeric_leaves(doc.data) if p != ("profile",)]  # the format version
    missing = [
        ".".join(map(str, path)) for path in leaves
        if not any(word in _comments_for(lines, doc.value_pos[path][0]) for word in SOURCE_WORDS)
    ]
    assert not missing, f"numbers without a source or 'stated assumption' comment: {missing}"
    assert name != "mx3" or len(leaves) > 40


def test_calibration_fits_under_the_peak(builtin: HardwareProfile) -> None:
    cal = builtin.calibration
    assert cal is not None and cal.model == "resnet50"
    peak_macs_per_second = builtin.peak_macs_per_cycle * cal.clock_mhz * 1e6 * cal.num_chips
    assert peak_macs_per_second >= cal.gmac * 1e9 * cal.fps
    assert 0.4 <= builtin.calibration_utilisation <= 0.9
    # The reconciliation in the file's header: at 2 ops per MAC the published TOPS could not carry the
    # benchmark, so the profile reads 1 op = 1 MAC and its peak equals the published TOPS per cycle.
    tops = dict(builtin.chip.tops_at_clock)[cal.clock_mhz]
    assert tops * 1e12 / 2 / (cal.clock_mhz * 1e6) < cal.busy_macs_per_cycle_per_chip
    assert builtin.peak_macs_per_cycle == pytest.approx(tops * 1e12 / (cal.clock_mhz * 1e6))
    # ResNet-50's weights fit the calibration's chips at 8 bits.
    assert cal.params_m * 1e6 <= builtin.chip.weight_memory_params_8bit * cal.num_chips


def test_public_totals_hold(builtin: HardwareProfile) -> None:
    chip = builtin.chip
    assert chip.mac_cores.count * chip.mac_cores.weight_memory_bytes == chip.weight_memory_params_8bit
    assert 100 <= chip.mac_cores.count + chip.alu_cores.count < 1000  # "hundreds of compute engines"
    assert builtin.system.max_chips == 16 and builtin.system.module_chips == 4
    assert chip.feature_memory_bytes == 5 * 2**20
    host = builtin.host_link
    assert host.lanes == 2 and host.count == 2
    assert host.raw_bytes_per_second == pytest.approx(2 * 8e9 * 128 / 130 / 8, abs=1)
    assert host.bytes_per_second < host.raw_bytes_per_second


def test_packet_formats_trade_bytes_for_host_cpu(builtin: HardwareProfile) -> None:
    order = [builtin.packet_format(name) for name in ("FP32", "BF16", "GBFloat80")]
    assert [f.bits_per_value for f in order] == sorted((f.bits_per_value for f in order), reverse=True)
    assert [f.host_cpu_ns_per_value for f in order] == sorted(f.host_cpu_ns_per_value for f in order)
    assert not builtin.packet_format("RGB888").chip_to_host
    with pytest.raises(KeyError, match="unknown packet format 'FP16'"):
        builtin.bytes_per_value("FP16")


_EXACT = {"Sigmoid": lambda x: 1 / (1 + np.exp(-x)), "Tanh": np.tanh}


def test_assumed_approximations_have_the_stated_error(builtin: HardwareProfile) -> None:
    assert builtin.ops.approximations
    for approx in builtin.ops.approximations:
        exact = _EXACT[approx.op]
        low, high = approx.range
        knots = np.linspace(low, high, approx.segments + 1)
        x = np.linspace(low - 30, high + 30, 2_000_001)
        error = np.max(np.abs(np.interp(x, knots, exact(knots)) - exact(x)))
        assert error <= approx.max_abs_error, approx.op
        assert approx.max_abs_error < 2**-9  # below half a BF16 step near 1, as the file says
        assert builtin.ops.kind(approx.op) == "alu"


def test_op_kinds(builtin: HardwareProfile) -> None:
    assert builtin.ops.kind("Conv") == "mac"
    assert builtin.ops.kind("Relu") == "fused"
    assert builtin.ops.kind("Sigmoid") == "alu"
    assert builtin.ops.kind("Transpose") == "layout"
    assert builtin.ops.kind("NonMaxSuppression") is None


# --- user profiles ----------------------------------------------------------------------------------


def _user(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    return write(tmp_path / name, text)


def _error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        load_profile(path, MX3_PROFILES, shown=path.name)
    return err.value


def test_user_profile_inheriting_mx3_overrides_the_clock(tmp_path: Path) -> None:
    path = _user(tmp_path, "profile: 1\nname: mine\ninherits: mx3\nchip:\n  clock_mhz: 850\n")
    hw = load_hardware(path)
    assert hw.name == "mine" and hw.chip.clock_mhz == 850
    assert hw.chip.weight_memory_params_8bit == 10_500_000  # inherited
    assert hw.peak_macs_per_cycle == load_hardware(MX3_PROFILES.builtins()["mx3"]).peak_macs_per_cycle


def test_user_profile_may_inherit_a_file(tmp_path: Path) -> None:
    _user(tmp_path, "profile: 1\nname: base\ninherits: mx3\nsystem: {max_chips: 8}\n", "hw/base.yaml")
    path = _user(tmp_path, "profile: 1\nname: mine\ninherits: base.yaml\nchip: {clock_mhz: 1000}\n", "hw/mine.yaml")
    hw = load_hardware(path)
    assert (hw.system.max_chips, hw.chip.clock_mhz, hw.system.module_chips) == (8, 1000, 4)


def test_the_example_user_profile_validates() -> None:
    hw = load_hardware(REPO / "examples/valid/profiles/mx3_850mhz.yaml")
    assert hw.chip.clock_mhz == 850


def test_unknown_key_is_positioned_with_did_you_mean(tmp_path: Path) -> None:
    path = _user(tmp_path, "profile: 1\nname: mine\ninherits: mx3\nchip:\n  clock_mz: 850\n")
    assert str(_error(path)) == "mine.yaml:5:3: unknown key 'clock_mz' in chip; did you mean 'clock_mhz'?"


def test_wrong_type_fails(tmp_path: Path) -> None:
    path = _user(tmp_path, "profile: 1\nname: mine\ninherits: mx3\nchip: {clock_mhz: fast}\n")
    assert str(_error(path)) == "mine.yaml:4:19: expected an integer >= 1 and <= 10000, got 'fast'"


def test_all_problems_of_a_file_are_reported_together(tmp_path: Path) -> None:
    path = _user(tmp_path, "profile: 1\nname: mine\ninherits: mx3\nchip:\n  clock_mz: 850\n"
                           "  mac_cores: {count: 0}\nlinks: {host: {latency_us: -1}}\n")
    error = _error(path)
    assert isinstance(error, ProfileError)
    assert [str(e).split(": ")[0] for e in error.errors] == ["mine.yaml:5:3", "mine.yaml:6:22", "mine.yaml:7:28"]
    assert str(error).count("\n") == 2


def test_a_profile_without_inherits_must_be_complete(tmp_path: Path) -> None:
    path = _user(tmp_path, "profile: 1\nname: mine\ndescription: half a chip\nchip: {clock_mhz: 600}\n")
    error = _error(path)
    assert "missing required keys 'system', 'links', 'packet_formats', 'ops', 'efficiency'" in str(error)
    assert "mine.yaml:4:7: missing required keys 'clocks_mhz'" in str(error)


def test_a_profile_needs_its_own_name(tmp_path: Path) -> None:
    path = _user(tmp_path, "profile: 1\ninherits: mx3\n")
    assert str(_error(path)) == "mine.yaml:1:1: missing required key 'name' in the top level"


def test_rules_the_schema_cannot_express(tmp_path: Path) -> None:
    path = _user(tmp_path, "profile: 1\nname: mine\ninherits: mx3\nchip:\n  clock_mhz: 700\n"
                           "  mac_cores: {count: 200}\n")
    messages = [str(e) for e in _error(path).errors]
    assert messages[0] == "mine.yaml:5:3: clock_mhz 700 is not one of chip.clocks_mhz (600, 850, 1000)"
    assert messages[1].startswith("mine.yaml:6:15: chip.mac_cores.weight_memory_bytes must be the chip's "
                                  "weight memory split over its MAC cores: 10500000 // 200 = 52500")


def test_a_problem_outside_the_file_is_reported_without_position(tmp_path: Path) -> None:
    # Dropping the 600 MHz clock leaves the inherited calibration (at 600 MHz) with nothing to point at.
    path = _user(tmp_path, "profile: 1\nname: mine\ninherits: mx3\nchip:\n  clock_mhz: 850\n  clocks_mhz: [850]\n")
    assert str(_error(path)) == "mine.yaml: calibration.clock_mhz 600 is not one of chip.clocks_mhz (850)"


def test_validate_merged_positions_what_the_file_wrote() -> None:
    doc = parse_yaml("profile: 1\nname: x\nchip: {clock_mhz: fast}\n", "x.yaml")
    parent = load_profile(MX3_PROFILES.builtins()["mx3"], MX3_PROFILES)
    merged = {**parent, "name": "x", "chip": {**parent["chip"], "clock_mhz": "fast"},
              "system": {"max_chips": 0, "module_chips": 4}}
    messages = [str(e) for e in validate_merged(merged, SCHEMA, doc)]
    assert messages == [
        "x.yaml: 0 is out of range: expected an integer >= 1 and <= 16 (at system.max_chips)",
        "x.yaml:3:19: expected an integer >= 1 and <= 10000, got 'fast'",
    ]


def test_bad_inherits(tmp_path: Path) -> None:
    path = _user(tmp_path, "profile: 1\nname: mine\ninherits: mx33\n")
    with pytest.raises(InputFileError, match="inherits 'mx33', which is neither a built-in profile nor a file"):
        load_profile(path, MX3_PROFILES)
    _user(tmp_path, "profile: 1\nname: a\ninherits: b.yaml\n", "a.yaml")
    _user(tmp_path, "profile: 1\nname: b\ninherits: a.yaml\n", "b.yaml")
    with pytest.raises(InputFileError, match="cycle"):
        load_profile(tmp_path / "a.yaml", MX3_PROFILES)


def test_pipeline_reports_a_bad_profile_at_chip_gen(project: Path) -> None:
    write(project / "hw/mine.yaml", "profile: 1\nname: mine\ninherits: mx3\nchip: {clock_mz: 850}\n")
    write(project / "p.yaml", "accelbuild: 1\ntarget: {chip_gen: hw/mine.yaml}\nmodels: [{path: models/mlp.onnx}]\n")
    with pytest.raises(ConfigErrors) as err:
        load_pipeline(str(project / "p.yaml"))
    (error,) = err.value.errors
    assert error.where.line == 2
    assert error.message == "hw/mine.yaml:4:8: unknown key 'clock_mz' in chip; did you mean 'clock_mhz'?"


# --- caching and digests ----------------------------------------------------------------------------


def test_profile_digest_follows_the_content(tmp_path: Path) -> None:
    path = _user(tmp_path, "profile: 1\nname: mine\ninherits: mx3\nchip: {clock_mhz: 850}\n")
    first = json_digest(load_profile(path, MX3_PROFILES))
    path.write_text("profile: 1\nname: mine\ninherits: mx3\nchip: {clock_mhz: 600}\n")  # same size
    second = json_digest(load_profile(path, MX3_PROFILES))
    assert second != first
    assert second != json_digest(load_profile(MX3_PROFILES.builtins()["mx3"], MX3_PROFILES))  # the name differs
    path.write_text("profile: 1\nname: mine\ninherits: mx3\nchip: {clock_mhz: 850}\n")
    assert json_digest(load_profile(path, MX3_PROFILES)) == first
    assert re.fullmatch(r"[0-9a-f]{64}", first)


def test_load_profile_returns_the_callers_own_copy() -> None:
    path = MX3_PROFILES.builtins()["mx3"]
    load_profile(path, MX3_PROFILES)["chip"]["mac_cores"]["count"] = 1
    assert load_profile(path, MX3_PROFILES)["chip"]["mac_cores"]["count"] == 250


def test_hardware_profiles_are_hashable_values() -> None:
    a = load_hardware(MX3_PROFILES.builtins()["mx3"])
    b = load_hardware(MX3_PROFILES.builtins()["mx3"])
    assert a == b and hash(a) == hash(b)
    assert a.host_link.transfer_seconds(1.6e9) == pytest.approx(1 + 20e-6)
