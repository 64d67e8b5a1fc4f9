"""What ``accelbuild inspect`` and ``bench`` do with an mx3 DFP, and ``run --show-mapping`` with a build."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def inspect(path: Path, shown: str) -> str:
    from accelbuild.targets.mx3.dfp import describe, read_dfp

    return describe(read_dfp(path, shown), path.stat().st_size)


def parts(data: bytes) -> list[tuple[int, int]]:
    """The DFP's section payloads, as (start, end) byte ranges: what the artifact cache stores once each
    (the closed loop's splits share their weights and graphs sections). Nothing for bytes that are not a
    readable DFP layout (the cache then stores the file whole)."""
    from accelbuild.targets.mx3.dfp.format import MAGIC, PREAMBLE, TABLE_ENTRY

    if len(data) < PREAMBLE.size or not data.startswith(MAGIC):
        return []
    _, _, _, header_length, count = PREAMBLE.unpack_from(data)
    table = PREAMBLE.size + header_length
    if table + TABLE_ENTRY.size * count > len(data):
        return []
    spans = []
    for i in range(count):
        _, offset, length, _ = TABLE_ENTRY.unpack_from(data, table + i * TABLE_ENTRY.size)
        spans.append((offset, offset + length))
    return sorted(spans)


def bench(path: Path, shown: str, frames: int | None) -> tuple[dict[str, Any], str]:
    """The timing simulation of a DFP: (report, text)."""
    from accelbuild.targets.mx3.sim import timing
    from accelbuild.targets.mx3.sim.program import load_program

    program = load_program(path, shown)
    config = program.simcfg or {}
    frames = frames or int(config.get("frames_default", 200))
    result = timing.simulate(program, frames, seed=int(config.get("seed", 0)))
    report: dict[str, Any] = {
        "simulated": True, "dfp": shown, "frames": frames, "num_chips": program.dfp.header.num_chips,
        "fps": round(result.fps, 2), "latency_ms": round(max(result.steady_latency_ms.values()), 4),
        "models": [{"name": m, "fps": round(result.model_fps[m], 2),
                    "latency_ms": round(result.steady_latency_ms[m], 4),
                    "first_frame_latency_ms": round(result.first_latency_ms[m], 4)} for m in result.model_fps],
    }
    lines = [f"{shown}: {program.dfp.header.chip_gen} x {report['num_chips']} chip(s), {frames} frames "
             "(simulated: modelled accelerator)",
             f"  total {report['fps']:.1f} FPS, latency {report['latency_ms']:.3f} ms"]
    lines += [f"  {m['name']}: {m['fps']:.1f} FPS, latency {m['latency_ms']:.3f} ms "
              f"(first frame {m['first_frame_latency_ms']:.3f} ms)" for m in report["models"]]
    return report, "\n".join(lines) + "\n"


def show_mapping(output_dir: Path) -> str:
    from accelbuild.targets.mx3.mapper.view import render

    path = output_dir / "mapping.json"
    if not path.is_file():
        return "no mapping.json (the map stage has not run)\n"
    return render(json.loads(path.read_text()))
