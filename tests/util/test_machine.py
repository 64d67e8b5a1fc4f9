"""The machine measured figures are keyed by (its identity, not only its kind), and what is read back from a
device's description."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbuild.util import machine
from accelbuild.util.machine import Machine, logical_cores_in, this_machine


def test_identity_is_the_systems_id_digested_or_the_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(machine.MACHINE_ID_ENV, raising=False)
    one, other = tmp_path / "one", tmp_path / "other"
    one.write_text("3d1219c7c4c5404aaa1f6d2a48adfda4\n")
    other.write_text("0123456789abcdef0123456789abcdef\n")
    first = machine.machine_identity((one,))
    assert first == machine.machine_identity((tmp_path / "absent", one)) and len(first) == 16
    assert "3d1219c7" not in first and machine.machine_identity((other,)) != first
    host = machine.machine_identity((tmp_path / "absent",))  # no system id: the host name
    assert host not in (first, machine.machine_identity((other,)))
    monkeypatch.setenv(machine.MACHINE_ID_ENV, "runner-7")
    assert machine.machine_identity((one,)) == machine.machine_identity((other,)) != first


def test_the_core_count_is_read_back_from_a_description() -> None:
    board = Machine("Cortex-A76", 4, (), "aarch64").describe("1.20.0")
    assert logical_cores_in(board) == 4
    assert logical_cores_in(this_machine().describe("1")) == this_machine().logical_cores
    assert logical_cores_in("some other text") is None
