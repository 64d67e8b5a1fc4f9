"""The machine description figures are keyed on, and what is read back from a device's."""

from __future__ import annotations

from accelbuild.util.machine import Machine, logical_cores_in, this_machine


def test_the_core_count_is_read_back_from_a_description() -> None:
    board = Machine("Cortex-A76", 4, (), "aarch64").describe("1.20.0")
    assert logical_cores_in(board) == 4
    assert logical_cores_in(this_machine().describe("1")) == this_machine().logical_cores
    assert logical_cores_in("some other text") is None
