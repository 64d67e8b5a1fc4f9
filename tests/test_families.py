"""The family registry: entry points, fragments read without importing, checks merged."""

from __future__ import annotations

import pytest

from accelbuild import families


def test_the_built_in_families_are_registered_through_entry_points() -> None:
    assert list(families.builtin()) == ["mx3", "cpu", "ethos-u", "npu", "qnn", "rknn"]
    assert families.family("npu").value == "accelbuild.targets.npu.target"
    assert families.get_target("ethos-u").family == "ethos-u"


def test_an_unknown_family_says_what_is_registered() -> None:
    with pytest.raises(families.FamilyError, match="unknown target family 'nxu'.*did you mean 'npu'"):
        families.family("nxu")


def test_checks_come_from_the_fragments() -> None:
    checks = families.all_checks()
    assert checks["max_chips"] == families.Check("max_chips", "num_chips", "max", "chips",
                                                 "Most chips used (families with chips).", "num_chips",
                                                 {"type": "integer", "minimum": 1})
    assert set(families.family("npu").checks) == {"min_fps", "max_latency_ms", "min_cosine", "max_host_layers"}
    assert checks["min_fps"].passes(10, 12) and not checks["max_host_layers"].passes(0, 1)


def test_program_files_are_chosen_by_magic_before_suffix(tmp_path) -> None:
    gz = tmp_path / "n.dfp"
    gz.write_bytes(b"\x1f\x8b rest")
    assert families.program_file(gz)[0] == "npu"  # gzip magic wins over the .dfp suffix
    dfp = tmp_path / "junk.dfp"
    dfp.write_bytes(b"not a dfp")
    assert families.program_file(dfp)[0] == "mx3"
    assert families.program_file(tmp_path / "x.bin") is None


def test_a_stage_module_belongs_to_the_family_whose_package_holds_it() -> None:
    assert families.family_of_module("accelbuild.targets.mx3.assemble_stage") == "mx3"
    assert families.family_of_module("accelbuild.targets.ethos_u.map_stage") == "ethos-u"
    assert families.family_of_module("accelbuild.stages.import_") is None  # the shared front stages
    assert families.family_of_module("accelbuild.targets.mx30.stage") is None


def test_a_family_named_is_the_only_one_asked_and_imported() -> None:
    """The artifact cache asks only the family whose stage wrote a large file: a cpu stage's file is not
    taken for an mx3 DFP, and no other family's target is imported to ask it."""
    import subprocess
    import sys

    code = ("import sys\nfrom accelbuild import families\n"
            "print(families.program_file_of('m.dfp', b'ACCELDFP', 'cpu'))\n"
            "print(sorted(m for m in sys.modules if m.endswith('.target')))\n"
            "print(families.program_file_of('m.dfp', b'ACCELDFP', 'mx3')[0])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["None", "['accelbuild.targets.cpu.target']", "mx3"]
