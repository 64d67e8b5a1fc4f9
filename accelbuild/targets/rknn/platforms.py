"""NPU clocks the compiler's cycle estimate is converted to time at, where a public document states one."""

from __future__ import annotations

# platform -> (MHz, source). Only documented clocks: elsewhere a build reports cycles and no time unless the
# pipeline gives target.npu_clock_mhz.
DOCUMENTED_CLOCKS: dict[str, tuple[float, str]] = {
    "rk3588": (1000.0, "RK3588 TRM: the NPU runs at 1 GHz (3 cores x 1,024 int8 MACs per cycle = 6 TOPS)"),
}


def clock(platform: str, given_mhz: float | None) -> tuple[float | None, str]:
    """(MHz, where it comes from) for the cycle estimate, or (None, why there is no time)."""
    if given_mhz is not None:
        return given_mhz, "target.npu_clock_mhz"
    if platform in DOCUMENTED_CLOCKS:
        return DOCUMENTED_CLOCKS[platform]
    return None, f"no documented NPU clock for {platform}: cycles only (set target.npu_clock_mhz for a time)"
