"""Timing simulation on pipelines whose answer can be worked out by hand."""

from __future__ import annotations

import pytest

from accelbuild.targets.mx3.sim import timing
from accelbuild.targets.mx3.sim.program import Program, ProgramModel

CLOCK_MHZ = 600


def _hardware(host_rate: float = 1e9, link_rate: float = 1e9) -> dict:
    return {"clock_mhz": CLOCK_MHZ, "host_link": {"bytes_per_second": host_rate, "latency_us": 0.0},
            "chip_link": {"bytes_per_second": link_rate, "latency_us": 0.0}, "approximations": {}}


def _layer(name: str, ms: float, inputs: list[str], chip: int = 0, core: int = 0, kind: str = "mac",
           out_bytes: int = 0) -> dict:
    return {"name": name, "chip": chip, "kind": kind, "first_core": core, "cores": 1,
            "cycles": ms * 1e-3 * CLOCK_MHZ * 1e6, "inputs": inputs, "start_fraction": 1.0, "out_bytes": out_bytes}


def _program(layers: list[dict], hardware: dict, input_bytes: int = 0, output_bytes: int = 0) -> Program:
    model = ProgramModel("m", None, layers, input_bytes, output_bytes)  # type: ignore[arg-type]
    return Program(None, [model], hardware, [], {}, None)  # type: ignore[arg-type]


def test_two_stage_pipeline_runs_at_its_slowest_stage() -> None:
    """A (1 ms) then B (2 ms), whole-frame hand-over, free links: a frame leaves every 2 ms (500 FPS);
    the first frame takes 1 + 2 = 3 ms; in the steady state the host's frames wait behind the
    back-pressure of 4 buffered frames: A starts frame f at 2f - 7 ms, the host sent it when A started
    frame f-1 (2f - 9 ms) and it is done at 2f + 3 ms: 12 ms."""
    program = _program([_layer("A", 1.0, []), _layer("B", 2.0, ["A"], kind="alu")], _hardware())
    result = timing.simulate(program, 200, jitter=0.0)
    assert result.fps == pytest.approx(500.0, rel=1e-9)
    assert result.first_latency_ms["m"] == pytest.approx(3.0, rel=1e-9)
    assert result.steady_latency_ms["m"] == pytest.approx(12.0, rel=1e-9)
    first = {layer["name"]: layer for layer in result.layers}
    assert (first["A"]["start_cycle"], first["A"]["end_cycle"]) == (0, 600_000)
    assert (first["B"]["start_cycle"], first["B"]["end_cycle"]) == (600_000, 1_800_000)


def test_host_link_bounds_the_rate() -> None:
    """1 MB per frame over a 1 GB/s link: at most 1,000 FPS even though compute allows 10,000."""
    program = _program([_layer("A", 0.1, [])], _hardware(host_rate=1e9), input_bytes=1_000_000)
    result = timing.simulate(program, 200, jitter=0.0)
    assert result.fps == pytest.approx(1000.0, rel=1e-6)


def test_chip_link_contention_slows_a_split_pipeline() -> None:
    """A on chip 0 sends 2 MB to B on chip 1 over a 1 GB/s link: 2 ms per frame > the 1 ms layers."""
    layers = [_layer("A", 1.0, [], chip=0, out_bytes=2_000_000), _layer("B", 1.0, ["A"], chip=1)]
    result = timing.simulate(_program(layers, _hardware(link_rate=1e9)), 200, jitter=0.0)
    assert result.fps == pytest.approx(500.0, rel=1e-6)


def test_shared_core_serialises_two_layers() -> None:
    """Two 1 ms layers given the same ALU core take turns: 2 ms per frame."""
    layers = [_layer("A", 1.0, [], kind="alu"), _layer("B", 1.0, ["A"], kind="alu")]
    result = timing.simulate(_program(layers, _hardware()), 200, jitter=0.0)
    assert result.fps == pytest.approx(500.0, rel=1e-6)


def test_same_seed_same_figures_and_jitter_changes_them() -> None:
    program = _program([_layer("A", 0.1, [])], _hardware(host_rate=1e9), input_bytes=1_000_000)
    first = timing.simulate(program, 300, seed=1, jitter=0.2)
    again = timing.simulate(program, 300, seed=1, jitter=0.2)
    other = timing.simulate(program, 300, seed=2, jitter=0.2)
    assert (first.fps, first.steady_latency_ms) == (again.fps, again.steady_latency_ms)
    assert first.fps != other.fps
