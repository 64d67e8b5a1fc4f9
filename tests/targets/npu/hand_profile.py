"""The x5 profile with the stated values the hand-computed cost tests were written against, pinned: the
built-in profile's free parameters are refitted by bench/credibility.py, and these tests check the cost
model's arithmetic, not its calibration."""

from __future__ import annotations

from accelbuild.targets.npu.hardware import NPU_PROFILES, NpuHardware, builtin_profiles, npu_hardware
from accelbuild.targets.profile_files import load_profile


def hand_x5() -> NpuHardware:
    raw = load_profile(builtin_profiles()["x5"], NPU_PROFILES)
    raw["npu"]["layer_overhead_cycles"] = 20000
    raw["units"]["TAE"].update(efficiency=0.5, depthwise_efficiency=0.25, align=[32, 32])
    raw["units"]["VAE"]["efficiency"] = 0.5
    raw["memory"]["ddr_efficiency"] = 0.5
    raw["crossing"] = {"sync_us": 100, "bytes_per_second": 1000000000}
    raw["fusion"] = [["Conv", "BatchNormalization", "Relu"], ["Conv", "Add", "Relu"], ["Conv", "Relu"],
                     ["Conv", "Clip"], ["Conv", "Add"], ["Conv", "BatchNormalization"], ["Gemm", "Relu"]]
    return npu_hardware(raw)
