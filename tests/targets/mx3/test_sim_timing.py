"""Timing simulation on pipelines whose answer can be worked out by hand."""

from __future__ import annotations

import pytest

from accelbuild.targets.mx3 import sharing
from accelbuild.targets.mx3.mapper import latency
from accelbuild.targets.mx3.sim import buffers, timing
from accelbuild.targets.mx3.sim.program import Program, ProgramModel

CLOCK_MHZ = 600


def _hardware(host_rate: float = 1e9, link_rate: float = 1e9, host_latency_us: float = 0.0,
              frames_in_flight: int = 4) -> dict:
    return {"clock_mhz": CLOCK_MHZ,
            "host_link": {"bytes_per_second": host_rate, "latency_us": host_latency_us,
                          "frames_in_flight": frames_in_flight},
            "chip_link": {"bytes_per_second": link_rate, "latency_us": 0.0}, "approximations": {}}


def _layer(name: str, ms: float, inputs: list[str], chip: int = 0, core: int = 0, kind: str = "mac",
           out_bytes: int = 0, fraction: float = 1.0) -> dict:
    return {"name": name, "chip": chip, "kind": kind, "first_core": core, "cores": 1,
            "cycles": ms * 1e-3 * CLOCK_MHZ * 1e6, "inputs": inputs, "start_fraction": fraction,
            "out_bytes": out_bytes}


def _model(name: str, layers: list[dict], input_bytes: int = 0, output_bytes: int = 0) -> ProgramModel:
    return ProgramModel(name, None, layers, input_bytes, output_bytes)  # type: ignore[arg-type]


def _program(layers: list[dict], hardware: dict, input_bytes: int = 0, output_bytes: int = 0) -> Program:
    return Program(None, [_model("m", layers, input_bytes, output_bytes)], hardware, [], {}, None)  # type: ignore[arg-type]


def _chain(count: int, ms: float, fraction: float) -> list[dict]:
    return [_layer(f"L{i}", ms, [f"L{i - 1}"] if i else [], core=i, fraction=fraction) for i in range(count)]


def _cost_model_latency_ms(program: Program, fps: float, binding: dict) -> float:
    """The cost model's latency rule (mapper/latency.py) on the same layers, links free."""
    model = program.models[0]
    clock = CLOCK_MHZ * 1e6
    nodes = [latency.Node(row["name"], tuple(row["inputs"]), row["chip"], row["cycles"] / clock,
                          row["start_fraction"]) for row in model.layers]
    rate = program.hardware["host_link"]["bytes_per_second"]
    pace = latency.Pace(1 / fps, model.input_bytes / rate, model.output_bytes / rate,
                        program.hardware["host_link"]["latency_us"] * 1e-6, 0.0, {},
                        latency.paced_layers(nodes, binding))
    return 1000 * latency.latency_seconds(nodes, pace)


def test_two_stage_pipeline_runs_at_its_slowest_stage() -> None:
    """A (1 ms) then B (2 ms), whole-frame hand-over (B's window is A's whole frame), free links: a frame
    leaves every 2 ms (500 FPS). The first frame takes 1 + 2 = 3 ms. In the steady state A makes frame f
    in 1 ms but holds it until B starts it (B's window still holds frame f-1): 1 + 1 + 2 = 4 ms, and the
    host starts frame f's input only when A can take it (just in time)."""
    program = _program([_layer("A", 1.0, []), _layer("B", 2.0, ["A"], kind="alu")], _hardware())
    result = timing.simulate(program, 200, jitter=0.0)
    assert result.fps == pytest.approx(500.0, rel=1e-9)
    assert result.first_latency_ms["m"] == pytest.approx(3.0, rel=1e-9)
    assert result.steady_latency_ms["m"] == pytest.approx(4.0, rel=1e-9)
    first = {layer["name"]: layer for layer in result.layers}
    assert (first["A"]["start_cycle"], first["A"]["end_cycle"]) == (0, 600_000)
    assert (first["B"]["start_cycle"], first["B"]["end_cycle"]) == (600_000, 1_800_000)
    assert result.binding["m"] == {"kind": "layer", "layer": "B", "model": "m", "chip": 0, "cores": 1,
                                   "cycles": 1_200_000.0, "busy": 1.0}
    assert _cost_model_latency_ms(program, 500.0, result.binding["m"]) == pytest.approx(4.0, rel=1e-9)


def test_a_long_pipeline_with_a_short_period_is_not_capped_by_frames_in_flight() -> None:
    """40 layers of 0.1 ms, each needing its producer's whole frame: 4 ms of latency, one frame every
    0.1 ms, so 40 frames are inside the chip at once (a fixed 8 frames in flight would have capped it at
    8 / 4 ms = 2,000 FPS). The cost model's latency is the same 4 ms."""
    program = _program(_chain(40, 0.1, 1.0), _hardware())
    result = timing.simulate(program, 300, jitter=0.0)
    assert result.fps == pytest.approx(10_000.0, rel=1e-9)
    assert result.steady_latency_ms["m"] == pytest.approx(4.0, rel=1e-9)
    assert result.binding["m"]["kind"] == "layer" and result.binding["m"]["busy"] == 1.0
    assert _cost_model_latency_ms(program, 10_000.0, result.binding["m"]) == pytest.approx(4.0, rel=1e-9)


def test_a_skip_connection_gets_the_rows_its_longer_path_holds_back() -> None:
    """X feeds A -> B -> C and, directly, the Add that joins C: each layer needs half of its input
    before it starts. The X -> Add edge buffers the 4 half frames the long path holds back (2 frames),
    so nothing stalls: 10,000 FPS; the frame's last rows leave 0.1 ms after the Add's first (5 x 0.05 ms
    of windows + 0.1 ms)."""
    layers = [_layer("X", 0.1, [], core=0), _layer("A", 0.1, ["X"], core=1, fraction=0.5),
              _layer("B", 0.1, ["A"], core=2, fraction=0.5), _layer("C", 0.1, ["B"], core=3, fraction=0.5),
              _layer("Add", 0.1, ["X", "C"], core=0, kind="alu", fraction=0.5)]
    program = _program(layers, _hardware())
    assert buffers.buffering(program.models[0], program.hardware).edge_frames[("X", "Add")] == pytest.approx(2.0)
    result = timing.simulate(program, 300, jitter=0.0)
    assert result.fps == pytest.approx(10_000.0, rel=1e-9)
    assert result.steady_latency_ms["m"] == pytest.approx(0.3, rel=1e-9)
    assert _cost_model_latency_ms(program, 10_000.0, result.binding["m"]) == pytest.approx(0.3, rel=1e-9)


def test_host_link_bounds_the_rate() -> None:
    """1 MB per frame over a 1 GB/s link: at most 1,000 FPS even though compute allows 10,000."""
    program = _program([_layer("A", 0.1, [])], _hardware(host_rate=1e9), input_bytes=1_000_000)
    result = timing.simulate(program, 200, jitter=0.0)
    assert result.fps == pytest.approx(1000.0, rel=1e-6)
    assert result.binding["m"] == {"kind": "host_link", "direction": "to_chip", "busy": 1.0}


@pytest.mark.parametrize(("slots", "fps", "kind"), [(1, 500.0, "host_buffers"), (3, 1000.0, "host_link")])
def test_host_buffers_bind_when_too_few_transfers_are_in_flight(slots: int, fps: float, kind: str) -> None:
    """1 MB in over a 1 GB/s link (1 ms) with 1 ms of fixed latency per transfer; A takes 0.5 ms. A
    transfer holds its slot for 1 + 1 ms: one slot allows 1 / 2 ms = 500 FPS (buffering binds, as the
    cost model's rule says); three slots allow 1,500, so the link's 1,000 binds. Latency either way:
    1 ms latency + 1 ms transfer + 0.5 ms + 1 ms latency of the (empty) output."""
    hardware = _hardware(host_latency_us=1000.0, frames_in_flight=slots)
    program = _program([_layer("A", 0.5, [])], hardware, input_bytes=1_000_000)
    result = timing.simulate(program, 200, jitter=0.0)
    assert result.fps == pytest.approx(fps, rel=1e-9)
    assert result.steady_latency_ms["m"] == pytest.approx(3.5, rel=1e-9)
    assert result.binding["m"]["kind"] == kind
    predicted = sharing.allocate(buffers.streams(program), buffers.capacities(hardware, 1), buffers.interface(hardware))
    assert predicted.fps["m"] == pytest.approx(fps, rel=1e-9)
    assert predicted.binding["m"]["kind"] == ("host_buffers" if slots == 1 else "link")


def test_chip_link_contention_slows_a_split_pipeline() -> None:
    """A on chip 0 sends 2 MB to B on chip 1 over a 1 GB/s link: 2 ms per frame > the 1 ms layers."""
    layers = [_layer("A", 1.0, [], chip=0, out_bytes=2_000_000), _layer("B", 1.0, ["A"], chip=1)]
    result = timing.simulate(_program(layers, _hardware(link_rate=1e9)), 200, jitter=0.0)
    assert result.fps == pytest.approx(500.0, rel=1e-6)
    assert result.binding["m"] == {"kind": "chip_link", "from_chip": 0, "to_chip": 1, "busy": 1.0}


def test_shared_core_serialises_two_layers() -> None:
    """Two 1 ms layers given the same ALU core take turns: 2 ms per frame."""
    layers = [_layer("A", 1.0, [], kind="alu"), _layer("B", 1.0, ["A"], kind="alu")]
    result = timing.simulate(_program(layers, _hardware()), 200, jitter=0.0)
    assert result.fps == pytest.approx(500.0, rel=1e-6)


def test_models_sharing_the_host_link_keep_their_own_rates() -> None:
    """Model a: 0.6 MB in, 0.1 ms of compute; model b: 0.1 MB in, 1 ms. One 1 GB/s link: b needs only
    0.1 GB/s and gets it (1,000 FPS, its compute); a gets the other 0.9 GB/s (1,500 FPS). The models are
    not tied to each other's frames: the total, 2,500 FPS, is a sum of two models' frames."""
    a = _model("a", [_layer("A", 0.1, [], core=0)], input_bytes=600_000)
    b = _model("b", [_layer("B", 1.0, [], core=1)], input_bytes=100_000)
    program = Program(None, [a, b], _hardware(), [], {}, None)  # type: ignore[arg-type]
    result = timing.simulate(program, 300, jitter=0.0)
    assert result.model_fps["a"] == pytest.approx(1500.0, rel=1e-9)
    assert result.model_fps["b"] == pytest.approx(1000.0, rel=1e-9)
    assert result.fps == pytest.approx(2500.0, rel=1e-9)
    assert result.binding["a"]["kind"] == "host_link" and result.binding["b"]["kind"] == "layer"


def test_a_shared_input_stream_runs_every_model_at_the_slowest_pace() -> None:
    """share_input: one 0.1 MB input feeds a (0.1 ms) and b (0.5 ms): both run at b's 2,000 FPS."""
    a = _model("a", [_layer("A", 0.1, [], core=0)], input_bytes=100_000)
    b = _model("b", [_layer("B", 0.5, [], core=1)], input_bytes=100_000)
    program = Program(None, [a, b], _hardware(), [], {}, None, share_input=True)  # type: ignore[arg-type]
    result = timing.simulate(program, 300, jitter=0.0)
    assert result.model_fps == pytest.approx({"a": 2000.0, "b": 2000.0}, rel=1e-9)
    assert result.binding["a"] == result.binding["b"] and result.binding["a"]["layer"] == "B"


def test_same_seed_same_figures_and_jitter_changes_them() -> None:
    program = _program([_layer("A", 0.1, [])], _hardware(host_rate=1e9), input_bytes=1_000_000)
    first = timing.simulate(program, 300, seed=1, jitter=0.2)
    again = timing.simulate(program, 300, seed=1, jitter=0.2)
    other = timing.simulate(program, 300, seed=2, jitter=0.2)
    assert (first.fps, first.steady_latency_ms) == (again.fps, again.steady_latency_ms)
    assert first.fps != other.fps
