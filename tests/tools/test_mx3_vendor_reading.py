"""tools/mx3_vendor_reading.py: its one fitted term and its second reading of the profile (no builds here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from accelbuild.targets.mx3.hardware import load_hardware
from tools import mx3_vendor_reading as reading

ROOT = Path(__file__).resolve().parents[2]



def test_the_fitted_frame_time_is_the_one_the_measurements_were_made_with() -> None:
    period = np.array([0.2e-3, 0.5e-3, 1.0e-3, 2.0e-3])
    measured_fps = 1.0 / (period + 0.62e-3)
    assert reading.fit_frame_time(period, measured_fps) == pytest.approx(0.62e-3, abs=1e-9)
    assert reading.fit_frame_time(period, 1.0 / period) == 0.0


def test_the_second_reading_halves_the_mac_rate_and_nothing_else(tmp_path: Path) -> None:
    stated = load_hardware(reading.mx3.BUILTIN)
    halved = load_hardware(reading.halved_profile(tmp_path))
    assert halved.chip.mac_cores.macs_per_cycle * 2 == stated.chip.mac_cores.macs_per_cycle
    assert halved.peak_macs_per_cycle * 2 == stated.peak_macs_per_cycle
    assert halved.chip.alu_cores == stated.chip.alu_cores and halved.host_link == stated.host_link


def test_the_four_terms_are_the_ones_the_measurements_were_made_with() -> None:
    pytest.importorskip("scipy", reason="the bench's fits need scipy; accelbuild and its tests do without it")
    period = np.array([0.2e-3, 0.5e-3, 1.0e-3, 2.0e-3, 0.3e-3, 4.0e-3])
    activations = np.array([1e6, 4e6, 2e5, 8e6, 3e6, 5e5])
    layers = np.array([30.0, 120.0, 60.0, 200.0, 15.0, 90.0])
    truth = np.array([1.5, 0.3, 0.02, 2.0])
    measured_fps = 1.0 / reading.four_terms(truth, period, activations, layers)
    fitted = reading.fit_four_terms(period, activations, layers, measured_fps)
    assert fitted == pytest.approx(truth, rel=1e-3)
