"""Toolchain environments for real: a venv made with this interpreter and pip from the package index, reused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from accelbuild.errors import StageError
from accelbuild.toolchains import Toolchain, ToolchainError, VendorRefusal, find, install, require, run_driver
from accelbuild.toolchains.environment import RECORD, user_environment

HERE = (sys.version_info[0], sys.version_info[1])
PROBE = Toolchain("probe", ("six==1.16.0",), (HERE, (HERE[0], HERE[1] + 1)))
DRIVER = Path(__file__).with_name("probe_driver.py")


@pytest.fixture(scope="module")
def toolchains(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("toolchains")


@pytest.fixture(scope="module")
def probe(toolchains: Path):
    return install(PROBE, toolchains)


def test_the_identity_is_the_declaration_alone() -> None:
    same = Toolchain("probe", ("Six==1.16.0",), PROBE.python)
    assert same.identity == PROBE.identity == f"probe; python >={HERE[0]}.{HERE[1]},<{HERE[0]}.{HERE[1] + 1}; six==1.16.0"
    assert Toolchain("probe", ("six==1.17.0",), PROBE.python).digest != PROBE.digest


def test_every_package_must_be_pinned() -> None:
    with pytest.raises(ValueError, match="pinned"):
        Toolchain("loose", ("six>=1.16",), PROBE.python)


def test_install_makes_an_environment_that_holds_the_pins(probe, toolchains: Path) -> None:
    assert probe.folder == toolchains / PROBE.folder_name
    assert "six==1.16.0" in probe.packages
    assert json.loads((probe.folder / RECORD).read_text())["identity"] == PROBE.identity
    assert not list(toolchains.glob(".*partial*"))


def test_an_installed_environment_is_found_and_reused(probe, toolchains: Path) -> None:
    stamp = (probe.folder / RECORD).stat().st_mtime_ns
    assert require(PROBE, toolchains) == probe
    assert (probe.folder / RECORD).stat().st_mtime_ns == stamp
    assert find(Toolchain("probe", ("six==1.15.0",), PROBE.python), toolchains) is None


def test_the_driver_runs_in_the_toolchains_interpreter(probe, tmp_path: Path) -> None:
    answer = run_driver(probe, DRIVER, "where", {"echo": [1, "two"]}, tmp_path)
    assert Path(answer["prefix"]) == probe.folder
    assert answer["six"] == "1.16.0" and answer["echo"] == [1, "two"]
    assert answer["accelbuild_importable"] is False  # the toolchain never sees accelbuild's packages


def test_a_vendor_refusal_is_a_stage_failure_in_the_vendors_words(probe, tmp_path: Path) -> None:
    with pytest.raises(VendorRefusal) as caught:
        run_driver(probe, DRIVER, "refuse", {}, tmp_path)
    assert caught.value.exit_code == 1
    assert str(caught.value) == "probe: E build: Unsupported op 'Frobnicate' at node frob_1 (the vendor's own words)"


def test_a_driver_failure_names_the_error_and_the_log(probe, tmp_path: Path) -> None:
    with pytest.raises(StageError, match="ZeroDivisionError") as caught:
        run_driver(probe, DRIVER, "crash", {"zero": 0}, tmp_path)
    assert "driver.log" in str(caught.value) and not isinstance(caught.value, VendorRefusal)


def test_a_driver_the_vendor_library_crashes_says_so_and_keeps_its_log(probe, tmp_path: Path) -> None:
    with pytest.raises(StageError, match=r"abort was stopped by signal 6 \(SIGABRT") as caught:
        run_driver(probe, DRIVER, "abort", {}, tmp_path)
    assert "driver.log" in str(caught.value) and (tmp_path / "driver.log").exists()


def test_a_package_that_cannot_be_installed_is_a_user_error_with_the_fix(toolchains: Path) -> None:
    broken = Toolchain("broken", ("six==0.0.0",), PROBE.python)
    with pytest.raises(ToolchainError) as caught:
        install(broken, toolchains)
    assert caught.value.exit_code == 2
    assert "accelbuild toolchain install broken" in str(caught.value)
    assert list(toolchains.glob("broken-*")) == [] and not list(toolchains.glob(".broken*partial*"))


def test_no_interpreter_in_range_says_which_were_tried(toolchains: Path) -> None:
    ancient = Toolchain("ancient", ("six==1.16.0",), ((2, 6), (2, 7)))
    with pytest.raises(ToolchainError, match=r"needs Python >=2.6,<2.7; tried"):
        install(ancient, toolchains)


def test_a_users_environment_is_keyed_on_what_it_holds(probe) -> None:
    env = user_environment(PROBE, probe.python)
    assert env.folder is None and "six==1.16.0" in env.packages
    with pytest.raises(ToolchainError, match="does not exist"):
        user_environment(PROBE, Path("/nonexistent/bin/python"))
