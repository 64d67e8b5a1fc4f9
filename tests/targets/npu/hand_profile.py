"""Built-in profiles with the stated values the hand-computed cost tests were written against, pinned: the
built-in profile's free parameters are refitted by tools/credibility.py, and these tests check the cost
model's arithmetic, not its calibration."""

from __future__ import annotations

from accelbuild.targets.npu.hardware import NPU_PROFILES, NpuHardware, builtin_profiles, npu_hardware
from accelbuild.targets.profile_files import load_profile


def hand_x5() -> NpuHardware:
    raw = load_profile(builtin_profiles()["x5"], NPU_PROFILES)
    raw["npu"]["layer_overhead_cycles"] = 20000
    raw["npu"].pop("dma_overlap", None)  # a unit computes through its DMA
    raw["units"]["TAE"].update(efficiency=0.5, depthwise_efficiency=0.25, align=[32, 32], bits16_factor=4)
    raw["units"]["TAE"].pop("large_depthwise_efficiency", None)  # every kernel priced alike
    raw["units"]["TAE"].pop("dynamic_matmul_efficiency", None)  # every MatMul priced alike
    for shape in ("pointwise", "strided"):  # every dense kernel priced alike
        raw["units"]["TAE"].pop(f"{shape}_efficiency", None)
    for unit in ("VAE", "AAE", "TRANS"):
        raw["units"][unit]["efficiency"] = 0.5
        raw["units"][unit].pop("overhead_cycles", None)  # every layer at npu.layer_overhead_cycles
    raw["memory"].update(ddr_efficiency=0.5, feature_buffer_bytes=1572864)
    raw["crossing"] = {"sync_us": 100, "bytes_per_second": 1000000000}
    raw["fusion"] = [["Conv", "BatchNormalization", "Relu"], ["Conv", "Add", "Relu"], ["Conv", "Relu"],
                     ["Conv", "Clip"], ["Conv", "Add"], ["Conv", "BatchNormalization"], ["Gemm", "Relu"]]
    return npu_hardware(raw)


def hand_tda4vm() -> NpuHardware:
    """tda4vm with its stated values before the fit (what the partition tests' cost comparisons assume)."""
    raw = load_profile(builtin_profiles()["tda4vm"], NPU_PROFILES)
    raw["npu"]["layer_overhead_cycles"] = 6000
    raw["units"]["MMA"].update(efficiency=0.85, depthwise_efficiency=1.0)
    raw["units"]["C7x"]["efficiency"] = 0.5
    raw["memory"]["ddr_efficiency"] = 0.6
    raw["crossing"] = {"sync_us": 20, "bytes_per_second": 5000000000}
    return npu_hardware(raw)


def hand_x3() -> NpuHardware:
    """x3 with its stated values before the fit (DDR-bound enough for two cores to contend)."""
    raw = load_profile(builtin_profiles()["x3"], NPU_PROFILES)
    raw["npu"]["layer_overhead_cycles"] = 20000
    raw["units"]["TAE"].update(efficiency=0.5, depthwise_efficiency=0.25)
    for unit in ("VPU", "TRANS"):
        raw["units"][unit]["efficiency"] = 0.5
    raw["memory"]["ddr_efficiency"] = 0.5
    raw["crossing"] = {"sync_us": 120, "bytes_per_second": 800000000}
    return npu_hardware(raw)
