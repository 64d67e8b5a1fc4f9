"""The unit-timeline simulator: calibration against published figures, agreement with the cost model,
batches, cores and host work sharing DDR, host offload, the DDR profile and the timeline."""

from __future__ import annotations

import dataclasses
import json

import pytest

from accelbuild.targets.credibility import band
from accelbuild.targets.npu.hardware import NpuHardware, builtin_profiles, load_npu_hardware
from accelbuild.targets.npu.partition import Offload, partition
from accelbuild.targets.npu.schedule import schedule
from accelbuild.targets.npu.timeline import AGREEMENT_TOLERANCE, Timeline, run_subgraph, simulate
from accelbuild.testing import models, npu_graphs
from tools.npu_calibration import evaluate

from .hand_profile import hand_x3, hand_x5
from .test_schedule import compute_then_weights

POINTS = [(name, index) for name in sorted(builtin_profiles())
          for index in range(len(load_npu_hardware(name).calibration))]


def _run(model, hw: NpuHardware, batch: int = 1, **offload) -> Timeline:
    part = partition(model, hw, Offload(**offload))
    schedules = {s.id: schedule(s.model, hw, batch_size=batch) for s in part.npu_subgraphs}
    return simulate(part, schedules, hw, offload.get("host", "arm"), model=model)


def test_the_published_points_are_listed() -> None:
    assert [(p, load_npu_hardware(p).calibration[i].model) for p, i in POINTS] == [
        ("mlsoc", "resnet50"), ("mlsoc", "resnet50"), ("tda4vm", "mobilenet_v1"), ("x5", "resnet18"),
        ("x5", "resnet18")]


@pytest.mark.parametrize("platform,index", POINTS)
def test_calibration_points_within_the_band_reports_quote(platform: str, index: int) -> None:
    """Each profile's own published points hold within the band its reports quote (docs/credibility.md)."""
    hw = load_npu_hardware(platform)
    quoted = band("npu", platform, hw.digest)
    assert quoted["calibrated"], quoted["text"]
    result = evaluate(hw, hw.calibration[index])
    assert abs(result.predicted_error) <= quoted["band_pct"] / 100, (result.predicted, result.point)
    assert abs(result.simulated_error) <= quoted["band_pct"] / 100, (result.simulated, result.point)
    timeline = result.timeline
    assert abs(timeline.agreement - 1) <= AGREEMENT_TOLERANCE or timeline.separated_by is not None


def test_a_point_measured_by_a_setup_is_priced_with_its_call_time() -> None:
    """x5's ResNet-18 points come from the classification table, whose runtime spends crossing.call_us@rdk_cls
    per call (docs/credibility.md): its latency is the profile's plus the difference, once per frame."""
    hw = load_npu_hardware("x5")
    point = next(p for p in hw.calibration if p.metric == "latency_ms")
    assert point.setup == "rdk_cls" and point.call_us > hw.crossing.call_us
    own, profiles = evaluate(hw, point), evaluate(hw, dataclasses.replace(point, setup=None, call_us=None))
    assert own.predicted - profiles.predicted == pytest.approx((point.call_us - hw.crossing.call_us) / 1e3)


def test_batching_raises_throughput_and_latency() -> None:
    mlsoc = load_npu_hardware("mlsoc")
    model = models.resnet50(size=160)
    one, eight = _run(model, mlsoc), _run(model, mlsoc, batch=8)
    assert one.batch_size == 1 and eight.batch_size == 8
    assert eight.fps > 1.5 * one.fps
    assert eight.latency_ms > one.latency_ms


def test_cores_share_the_ddr() -> None:
    x3 = hand_x3()  # DDR-bound on this network (the fitted x3 is compute-bound: no contention to see)
    single = dataclasses.replace(x3, cores=1)
    model = models.resnet18(size=160)
    two, one = _run(model, x3), _run(model, single)
    assert one.fps < two.fps < 2 * one.fps
    assert two.effects["ddr_contention"] < 0 and one.effects["ddr_contention"] == 0
    assert two.latency_ms == pytest.approx(one.latency_ms)


def test_host_subgraphs_and_crossings() -> None:
    tda4vm = load_npu_hardware("tda4vm")
    model = npu_graphs.chain(["conv", "conv", "sin", "conv"], channels=64, size=56)
    arm = _run(model, tda4vm)
    assert [(s.name, s.resource) for s in arm.stages] == [
        ("sg0 in", "arm"), ("sg0", "npu"), ("sg0 out", "arm"), ("sg1", "arm"), ("sg2 in", "arm"), ("sg2", "npu"),
        ("sg2 out", "arm")]
    assert arm.latency_ms == pytest.approx(sum(s.seconds for s in arm.stages) * 1e3)
    dsp = _run(model, tda4vm, host="dsp")
    assert ("sg1", "npu") in [(s.name, s.resource) for s in dsp.stages]  # the C7x takes turns with the NPU
    assert "C7x" in dsp.units and any(i.unit == "C7x" and i.label == "sg1" for i in dsp.intervals)


def test_the_runtime_call_is_paid_once_a_batch_on_the_host() -> None:
    """``crossing.call_us``: the runtime's fixed time per inference call lengthens a frame's latency once,
    however many hand-overs the partition has, and runs on the Arm while the NPU serves other frames."""
    tda4vm = load_npu_hardware("tda4vm")
    called = dataclasses.replace(tda4vm, crossing=dataclasses.replace(tda4vm.crossing, call_us=500.0))
    for layers in (["conv", "conv", "conv"], ["conv", "sin", "conv"]):
        model = npu_graphs.chain(layers, channels=64, size=56)
        without, with_call = _run(model, tda4vm), _run(model, called)
        assert with_call.stages[0].name == "call" and with_call.stages[0].resource == "arm"
        assert with_call.latency_ms - without.latency_ms == pytest.approx(0.5)
        assert [s for s in with_call.stages if s.name != "call"] == without.stages
    npu_bound = npu_graphs.chain(["conv"] * 6, channels=128, size=112)  # 6 ms a frame on the NPU
    assert _run(npu_bound, called).fps == pytest.approx(_run(npu_bound, tda4vm).fps)


def test_crossings_and_host_layers_count_their_ddr_bytes() -> None:
    """A crossing reads one side and writes the other (a float copy and an 8-bit one); a host layer reads
    and writes its float tensors. The NPU stages keep their own DDR bytes; one frame alone is unchanged."""
    tda4vm = load_npu_hardware("tda4vm")
    timeline = _run(npu_graphs.chain(["conv", "conv", "sin", "conv"], channels=64, size=56), tda4vm)
    traffic = {s.name: s.host_bytes for s in timeline.stages}
    feature_map = 64 * 56 * 56
    assert traffic["sg0 out"] == traffic["sg2 in"] == feature_map * (4 + 1)
    assert traffic["sg1"] == 2 * feature_map * 4  # Sin: one input, one output
    assert all(s.host_bytes == 0 for s in timeline.stages if s.resource == "npu")


def test_host_stages_share_the_ddr_with_each_other_and_the_npu() -> None:
    """Four Arm cores each copying 1 MB in 1 ms would move 4 GB/s; on a 2 GB/s DDR the frames wait for
    their share of it, so the rate is the DDR's. An NPU job moving bytes beside them slows them too."""
    from accelbuild.targets.npu.timeline import Stage, _steady_fps

    copy = [Stage("copy", "arm", 1e-3, 1e-3, 0, host_bytes=1_000_000)]
    servers = {"npu": 1, "arm": 4}
    assert _steady_fps(copy, servers, 8, 1, 2e9, contention=False) == pytest.approx(4000, rel=0.01)
    shared = _steady_fps(copy, servers, 8, 1, 2e9, contention=True)
    assert 1800 <= shared <= 2000 * 1.01
    assert _steady_fps(copy, servers, 1, 1, 2e9, contention=True) == pytest.approx(1000, rel=0.01)  # alone
    beside_npu = [Stage("npu", "npu", 1e-3, 1e-3, 1_600_000), *copy]
    assert _steady_fps(beside_npu, servers, 2, 1, 2e9, contention=True) < \
        _steady_fps(beside_npu, servers, 2, 1, 2e9, contention=False)


def test_timeline_units_and_ddr_profile() -> None:
    x5 = load_npu_hardware("x5")
    timeline = _run(models.resnet18(size=128), x5)
    assert timeline.units == ["TAE", "VAE", "AAE", "TRANS", "LOAD", "STORE", "Cortex-A55"]
    used = {i.unit for i in timeline.intervals}
    assert {"TAE", "AAE", "LOAD", "STORE", "Cortex-A55"} <= used <= set(timeline.units)
    assert all(i.end_us >= i.start_us >= 0 for i in timeline.intervals)
    assert max(i.end_us for i in timeline.intervals) == pytest.approx(timeline.latency_ms * 1e3)
    moved = sum(timeline.ddr_gbps) * timeline.ddr_bin_us * 1e3
    assert moved == pytest.approx(timeline.ddr_bytes_per_frame, rel=1e-6)
    assert max(timeline.ddr_gbps) <= x5.memory.effective_ddr_bytes_per_second / 1e9 * 1.001


def test_record_is_json_and_deterministic() -> None:
    hw = load_npu_hardware("x5")
    model = npu_graphs.residual_net(4, channels=32, size=32)
    first = json.dumps(_run(model, hw).record(), sort_keys=True)
    assert json.dumps(_run(model, hw).record(), sort_keys=True) == first
    record = json.loads(first)
    assert {"fps", "latency_ms", "batch_size", "cost_model_fps", "agreement", "separated_by", "ddr",
            "intervals", "units", "stages"} <= set(record)


def test_steady_state_overlaps_frames_and_never_beats_the_busiest_resource() -> None:
    """One frame's host subgraph runs while another's NPU subgraph does (each resource serves stages in
    the order they became ready); the rate is the busiest resource's, and one frame in flight is the
    whole chain's latency."""
    from accelbuild.targets.npu.timeline import Stage, _steady_fps

    chain = [Stage("a", "npu", 1e-3, 1e-3, 0), Stage("b", "arm", 1e-3, 1e-3, 0),
             Stage("c", "npu", 1e-3, 1e-3, 0), Stage("d", "arm", 0.5e-3, 0.5e-3, 0)]
    servers = {"npu": 1, "arm": 2}
    assert abs(_steady_fps(chain, servers, 3, 1, 1e9, contention=False) - 500.0) < 5  # NPU: 2 ms a frame
    assert abs(_steady_fps(chain, servers, 1, 1, 1e9, contention=False) - 1 / 3.5e-3) < 3
    assert _steady_fps(chain, servers, 50, 1, 1e9, contention=False) <= 500.0 * 1.001


def test_weights_loaded_ahead_take_the_ddr_channels_idle_gaps() -> None:
    hw = hand_x5()
    model = compute_then_weights()
    part = partition(model, hw, Offload())
    (sub,) = part.npu_subgraphs
    sched = schedule(sub.model, hw)
    run = run_subgraph(sched, hw)
    fc = sched.layers[-1]
    ahead = [i for i in run.intervals if i[3] == "fc (ahead)"]
    (fc_compute,) = [i for i in run.intervals if i[3] == "fc" and i[0] == "TAE"]
    assert len(ahead) == 1 and ahead[0][2] <= fc_compute[1]  # loaded before the MatMul opens
    assert ahead[0][4] == fc.prefetch_bytes
    loads = sum(i[4] for i in run.intervals if i[0] == hw.memory.load_unit)
    assert loads == sum(p.load_bytes for p in sched.layers)  # loading ahead moves bytes, never drops them
    assert abs(run.cycles / sched.cycles - 1) <= AGREEMENT_TOLERANCE
