"""tools/credibility.py and tools/credibility_mx3.py: the fit of the performance models on published figures,
the page and the bands it writes (no networks exported here; scipy only where a test fits)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
import yaml

from accelbuild.targets.npu.hardware import builtin_profiles, load_npu_hardware
from tools import credibility as bench
from tools import credibility_mx3 as mx3

ROOT = Path(__file__).resolve().parents[2]
TABLE = json.loads(resources.files("accelbuild.targets").joinpath("credibility.json").read_text("utf-8"))


def test_a_held_out_band_is_the_worst_held_out_error() -> None:
    rows = [{"network": "a", "kind": "calibration", "simulated_ratio": 1.0},
            {"network": "b", "kind": "held_out", "simulated_ratio": 0.5},
            {"network": "c", "kind": "held_out", "simulated_ratio": 1.1},
            {"network": "d", "kind": "end_to_end", "simulated_ratio": 3.0}]
    result = {"points": rows, "leave_one_out": None, "in_sample": bench.summary([0.0]),
              "held_out": bench.summary([-0.5, 0.1])}
    entry = bench.band_entry(result, "digest")
    assert (entry["points"], entry["networks"], entry["band_pct"], entry["median_pct"]) == (2, 2, 50.0, 30.0)
    assert entry["held_out"] is True and entry["cross_validated"] is False


def test_a_band_records_its_direction_only_when_every_point_is_on_one_side() -> None:
    """mx3's 51 held-out measurements all ran slower than predicted (time ratios 0.047 to 0.629): the band is
    one-sided, and its nearest point 37.1% away; mixed points (every npu platform) give no direction."""
    rows = [{"network": n, "kind": "held_out", "simulated_ratio": r} for n, r in (("a", 0.5), ("b", 0.8))]
    assert bench.direction(rows, "simulated_ratio") == {"direction": "model_faster", "nearest_pct": 20.0}
    assert bench.direction([{"r": 1.25}, {"r": 1.5}], "r") == {"direction": "model_slower", "nearest_pct": 25.0}
    assert bench.direction([{"r": 0.9}, {"r": 1.1}], "r") == {}
    assert TABLE["mx3"]["mx3"]["direction"] == "model_faster" and TABLE["mx3"]["mx3"]["nearest_pct"] == 37.1
    assert not any("direction" in entry for entry in TABLE["npu"].values())


def test_the_ti_platforms_hold_one_value_of_each_core_parameter() -> None:
    """tools/credibility.py fits tda4vm, am62a and am68a jointly (the same C7x + MMA core and TIDL): each
    parameter the joint fit shares has one value in all three profiles; only the host hand-over (crossing) is
    each one's own."""
    from accelbuild.targets.npu.hardware import NPU_PROFILES
    from accelbuild.targets.profile_files import load_profile

    raws = {name: load_profile(builtin_profiles()[name], NPU_PROFILES) for name in ("tda4vm", "am62a", "am68a")}
    shared = [f.path for f in bench.group_parameters(raws) if f.platform is None]
    assert "units.MMA.depthwise_efficiency" in shared and not any(p.startswith("crossing.") for p in shared)
    for path in shared:
        assert len({bench.get(raw, path) for raw in raws.values()}) == 1, path
    page = (ROOT / "docs" / "credibility.md").read_text()
    assert "Fitted parameters (jointly with am62a, am68a: shared ones marked)" in page


def test_the_page_and_the_bands_are_the_committed_run() -> None:
    """docs/credibility.md regenerates from the run tools/credibility.py saved with it, and every band a report
    quotes is that run's (a later --write merges the platforms it did not run from the same file)."""
    run = json.loads(bench.RESULTS.read_text())
    page = bench.credibility_page(run["results"], run["commit"], run["command"], run["earlier"])
    assert page + "\n" == (ROOT / "docs" / "credibility.md").read_text()
    for result in run["results"]:
        entries = TABLE["mx3"] if result["platform"] == "mx3" else TABLE["npu"]
        assert result["band"] == entries[result["platform"]], result["platform"]



def test_an_accelerator_ms_point_is_the_npu_subgraphs_and_the_call_without_conversions() -> None:
    """SiMa's zoo times the compiled MLA stage in accelerator mode: such a point prices the NPU subgraphs' stages
    and the runtime's call (what perf.json lists), in the fit's cost model and the simulator alike, and none of
    the host's conversions; the zoo's call time is its own."""
    from accelbuild.testing import npu_graphs

    zoo = [p for p in bench.POINTS if p.source == bench.SIMA_ZOO]
    assert {p.metric for p in zoo} == {"accelerator_ms"} and {bench.setup_of(p) for p in zoo} == {"sima_zoo"}
    hw = load_npu_hardware("mlsoc")
    model = npu_graphs.chain(["conv", "conv", "conv"], channels=64, size=64)
    alone, whole = (bench.Point("mlsoc", "chain", m, 1.0, "test") for m in ("accelerator_ms", "latency_ms"))
    products = bench.ProductFigures(hw)
    case = bench.prepare(alone, model, hw)
    cost, simulated = products.figure(case)
    stages = products.run(case)[1].stages
    npu = sum(s.seconds for s in stages if s.resource == "npu") * 1e3
    assert simulated == pytest.approx(npu + hw.crossing.call_us * 1e-3) and hw.crossing.call_us > 0
    assert simulated < products.figure(bench.prepare(whole, model, hw))[1]  # the conversions are the difference
    assert bench.fast_figure(case, hw, {}) == pytest.approx(cost)  # the fit needs no host part for it


def test_edgenext_frame_rates_are_not_points() -> None:
    """The X5 table's EdgeNeXt FPS is 1000 / its single-thread latency, not a 4-thread measurement."""
    edgenext = [p for p in bench.POINTS if p.platform == "x5" and p.network.startswith("edgenext")]
    assert len(edgenext) == 4 and {p.metric for p in edgenext} == {"latency_ms"}


def test_the_fits_layers_at_other_values_are_the_layers_a_build_finds() -> None:
    """The fit finds each subgraph's layers once, on the profile as stated, and moves only their array share
    with the fitted values (``at_values``): at other values they are the layers ``layers_of`` finds afresh."""
    import dataclasses

    from accelbuild.targets.npu.graph_info import GraphInfo
    from accelbuild.targets.npu.layers import layers_of
    from accelbuild.testing import npu_graphs

    info = GraphInfo.of(npu_graphs.chain(["conv", "relu", "dwconv", "sigmoid", "conv1x1", "pool5"]))
    stated = load_npu_hardware("x5")
    fitted = dataclasses.replace(stated, units=tuple(
        dataclasses.replace(u, efficiency=u.efficiency / 3, depthwise_efficiency=u.depthwise_efficiency * 2,
                            pointwise_efficiency=u.efficiency / 4)
        if u.kind == "matrix" else dataclasses.replace(u, efficiency=u.efficiency / 2) for u in stated.units))
    found = layers_of(info, stated)
    assert bench.at_values(found, info, fitted) == layers_of(info, fitted) != found


def test_the_fits_plan_memo_gives_the_figures_of_planning_afresh() -> None:
    """A fit's finite-difference steps move one fitted value at a time: with the plans looked up (PlanMemo)
    every figure is the one planning each subgraph again gives, and the steps that move no layer of the
    network (a crossing value, a unit it does not use) plan nothing."""
    import numpy as np

    from accelbuild.targets.npu.hardware import NPU_PROFILES
    from accelbuild.targets.profile_files import load_profile
    from accelbuild.testing import npu_graphs

    raws = {"x5": load_profile(builtin_profiles()["x5"], NPU_PROFILES)}
    layers = ["conv", "relu", "dwconv", "conv1x1", "transpose", "conv", "pool5"]
    models = {"large_maps": npu_graphs.chain(layers, channels=256, size=112),
              "large_weights": npu_graphs.chain(layers, channels=512, size=14)}
    points = [bench.Point("x5", name, metric, 1.0, bench.RDK_X5) for name in models for metric in ("latency_ms", "fps")]
    cases = [bench.prepare(p, models[p.network], load_npu_hardware("x5")) for p in points]
    free = bench.group_parameters(raws, points)
    base = np.array([bench.stated(raws["x5"], f) for f in free])
    memo, figures, moving = bench.PlanMemo(), 0, set()
    for moved in [None, *range(len(free))]:
        values = base if moved is None else base * np.where(np.arange(len(base)) == moved, 0.7, 1.0)
        hw = bench.Hardware(raws, free, values).of(points[0])
        for case in cases:
            fixed = bench.host_part(case, raws["x5"])
            figure = bench.fast_figure(case, hw, fixed, memo)
            assert figure == bench.fast_figure(case, hw, fixed, None), moved
            if moved is not None and figure != bench.fast_figure(case, bench.Hardware(raws, free, base).of(case.point),
                                                                  fixed, None):
                moving.add(free[moved].path)
            figures += 1
    assert {"memory.ddr_efficiency", "memory.feature_buffer_bytes", "npu.layer_overhead_cycles",
            "units.TAE.efficiency", "units.TAE.depthwise_efficiency", "units.TRANS.overhead_cycles",
            "npu.dma_overlap", "units.TAE.pointwise_efficiency"} <= moving
    assert 0 < len(memo) < figures / 2  # the FPS point and the crossing steps planned nothing new


def test_each_vendor_row_is_built_for_the_chips_its_program_was_compiled_for() -> None:
    """MemryX's run names each DFP's chips (``cascade_plus<N>x``, 1 without); Frigate's figures are the module's."""

    assert (mx3.chips("k_resnet50"), mx3.chips("k_mobilenetv1"), mx3.chips("yolov8m_cls_224"),
            mx3.chips("k_densenet201"), mx3.chips("yolox_s_640")) == (4, 1, 3, 8, mx3.NUM_CHIPS)
    for network, (row, _) in mx3.MEASURED.items():
        config = yaml.safe_load(mx3.pipeline_yaml(network, Path(f"{network}.onnx")))
        assert config["target"]["num_chips"] == mx3.chips(network), row
    sources = {network: source for network, _, _, source in mx3.published()}
    assert "DFP compiled for 1 chip," in sources["mp_hand_landmark_lite"]
    assert "DFP compiled for 2 chips," in sources["resnet18"]


def test_a_measurement_setups_own_call_time_prices_only_its_points() -> None:
    """Horizon's classification table (another runtime release) gets its own crossing.call_us: its points are
    priced on it, the YOLO table's on the profile's value, which is what the profile file keeps."""
    import numpy as np

    from accelbuild.targets.npu.hardware import NPU_PROFILES
    from accelbuild.targets.profile_files import load_profile

    raws = {"x5": load_profile(builtin_profiles()["x5"], NPU_PROFILES)}
    classification = bench.Point("x5", "resnet18", "latency_ms", 2.95, bench.RDK_CLS)
    yolo = bench.Point("x5", "yolov8n_640", "latency_ms", 7.0, bench.RDK_X5)
    free = bench.group_parameters(raws, [classification, yolo])
    keys = [f.key for f in free]
    assert keys.count("crossing.call_us") == 1 and "crossing.call_us@rdk_cls" in keys
    values = np.array([bench.stated(raws["x5"], f) for f in free])
    values[keys.index("crossing.call_us")], values[keys.index("crossing.call_us@rdk_cls")] = 5.0, 300.0
    hws = bench.Hardware(raws, free, values)
    assert (hws.of(yolo).crossing.call_us, hws.of(classification).crossing.call_us) == (5.0, 300.0)
    assert bench.with_values(raws["x5"], free, values, "x5")["crossing"]["call_us"] == 5.0


def test_a_setups_own_call_time_is_written_to_the_points_it_measured(tmp_path: Path) -> None:
    """--write puts crossing.call_us@rdk_cls into the x5 calibration points marked setup: rdk_cls (not into the
    profile's crossing.call_us, which prices the YOLO table), and the committed profile holds the saved run's."""
    path = tmp_path / "x5.yaml"
    path.write_text(builtin_profiles()["x5"].read_text())
    bench.write_profile_values(path, {"crossing.call_us": 2.5, "crossing.call_us@rdk_cls": 123.4}, "fitted here")
    raw = yaml.safe_load(path.read_text())
    assert raw["crossing"]["call_us"] == 2.5
    assert [p["call_us"] for p in raw["calibration"]] == [123.4, 123.4]
    assert not any("@" in key for key in raw["sources"])
    run = json.loads(bench.RESULTS.read_text())
    fitted = next(r["fitted"] for r in run["results"] if r["platform"] == "x5")
    assert {p.call_us for p in load_npu_hardware("x5").calibration} == {fitted["crossing.call_us@rdk_cls"]}


def test_a_calibration_point_of_an_unknown_setup_stops_the_write(tmp_path: Path) -> None:
    """A setup name the bench does not fit (a typo) would keep its points' call_us stale: --write refuses it."""
    path = tmp_path / "x5.yaml"
    text = builtin_profiles()["x5"].read_text()
    path.write_text(text.replace("setup: rdk_cls", "setup: rdk_clss", 1))
    with pytest.raises(ValueError, match="names setup rdk_clss, which this bench does not know"):
        bench.write_profile_values(path, {"crossing.call_us@rdk_cls": 123.4}, "fitted here")
    assert path.read_text() == text.replace("setup: rdk_cls", "setup: rdk_clss", 1)
