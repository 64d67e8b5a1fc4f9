"""What ``accelbuild inspect`` and ``bench`` do with an npu package (``<name>.tar.gz``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelbuild.targets.npu import package


def inspect(path: Path, shown: str) -> str:
    return package.describe(package.read_package(path, shown), shown, path.stat().st_size)


def bench(path: Path, shown: str, frames: int | None) -> tuple[dict[str, Any], str]:
    """The unit-timeline simulation, printed as ``hrt_model_exec perf`` does: (report, text)."""
    from accelbuild.targets.npu.simulation import simulate_package

    runs = simulate_package(package.read_package(path, shown), shown)
    models: list[dict[str, Any]] = [{"name": r.name, "frames": r.timeline.frames_in_flight, "threads": r.timeline.frames_in_flight,
               "batch_size": r.timeline.batch_size, "fps": round(runs.model_fps(r), 2),
               "fps_alone": round(r.timeline.fps, 2), "latency_ms": round(r.timeline.latency_ms, 4)}
              for r in runs.models]
    report = {"simulated": True, "package": shown, "platform": runs.hw.name,
              "fps": round(sum(m["fps"] for m in models), 2), "models": models}
    lines = [f"{shown}: platform {runs.hw.name} (simulated: modelled accelerator)"]
    lines += [f"  {m['name']}: frames in flight {m['frames']}, batch {m['batch_size']}, "
              f"average latency {m['latency_ms']:.3f} ms, frame rate {m['fps']:.2f} FPS" for m in models]
    return report, "\n".join(lines) + "\n"
