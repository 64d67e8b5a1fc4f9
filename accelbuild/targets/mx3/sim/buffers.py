"""The buffering the timing simulation assumes, derived from a program (row-streaming dataflow).

A layer holds rows, not frames. In the simulation's frame-level terms a buffer is a number of frames,
possibly a fraction of one (rows / rows per frame):

- **Edge** (producer P -> consumer C): P may start frame f once C has consumed up to stream position
  ``f - edge_frames[P, C]`` (position ``g + x`` = fraction x of frame g). For a plain edge this is C's
  window, the share of a frame its kernel needs before it can start (``start_fraction``): a producer runs
  ahead of its consumer by the consumer's window only. Where C also waits for a longer path (a skip
  connection), the compiler sizes the edge's buffer for the rows that path holds back (a delay line on
  C's side). A chip boundary on the way adds the data in transit (the link's latency at the compiled
  frame period). So no edge binds a pipeline running at its slowest layer's pace, and a long pipeline is
  not capped by a frame count.
- **Link** (P's tensor over a chip boundary): the sending side holds only the rows a reader's window
  needs plus those in transit (``send_frames``); delay lines are on the receiving side, so a producer
  cannot run ahead of a link that is slower than it.
- **Host interface**: ``frames_in_flight`` transfers per model and direction (the profile's
  ``links.host.frames_in_flight``); the input port streams rows to the first layers, so the host starts
  a frame's transfer just in time for them; the output port holds one frame (``OUTPUT_PORT_FRAMES``)
  while the host reads it out, plus, for an output made earlier than the frame's last one, the rows it
  waits for them (``port_frames``).
- **Links**: each model's transfers move at the bandwidth the sharing rules give it
  (``accelbuild.targets.mx3.sharing``, the cost model's rules).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbuild.targets.mx3 import sharing
from accelbuild.targets.mx3.sim.program import Program, ProgramModel

OUTPUT_PORT_FRAMES = 1  # the chip's output port holds the frame the host is reading out


@dataclass(frozen=True)
class Buffering:
    edge_frames: dict[tuple[str, str], float]  # (producer, consumer) -> frames the edge holds
    send_frames: dict[tuple[str, int], float]  # (producer, chip boundary) -> frames queued to cross it
    port_frames: dict[str, float]  # last layer -> frames the output port holds of its output


def interface(hw: dict[str, Any]) -> sharing.Interface:
    host = hw["host_link"]
    return sharing.Interface(int(host["frames_in_flight"]), float(host["latency_us"]) * 1e-6)


def capacities(hw: dict[str, Any], num_chips: int) -> dict[str, float]:
    rate = float(hw["host_link"]["bytes_per_second"])
    found = {sharing.HOST_IN: rate, sharing.HOST_OUT: rate}
    for boundary in range(max(0, num_chips - 1)):
        found[sharing.chip_link(boundary)] = float(hw["chip_link"]["bytes_per_second"])
    return found


def chips_of(program: Program) -> int:
    return 1 + max((int(row["chip"]) for m in program.models for row in m.layers), default=0)


def period_seconds(model: ProgramModel, clock_hz: float) -> float:
    """The compiled frame period: the slowest layer's time."""
    return max((float(row["cycles"]) for row in model.layers), default=0.0) / clock_hz


def crossing_bytes(model: ProgramModel, num_chips: int) -> list[float]:
    """Bytes per frame over each chip boundary (a tensor crosses each boundary up to its farthest reader
    once, as the cost model counts it)."""
    rows = {row["name"]: row for row in model.layers}
    farthest = {name: int(row["chip"]) for name, row in rows.items()}
    for row in model.layers:
        for source in row.get("inputs", []):
            farthest[source] = max(farthest[source], int(row["chip"]))
    crossing = [0.0] * max(0, num_chips - 1)
    for name, row in rows.items():
        for boundary in range(int(row["chip"]), farthest[name]):
            crossing[boundary] += float(row.get("out_bytes", 0))
    return crossing


def streams(program: Program) -> list[sharing.Stream]:
    clock = float(program.hardware["clock_mhz"]) * 1e6
    chips = chips_of(program)
    found = []
    for model in program.models:
        period = period_seconds(model, clock)
        demand: dict[str, float] = {sharing.HOST_IN: model.input_bytes, sharing.HOST_OUT: model.output_bytes}
        for boundary, nbytes in enumerate(crossing_bytes(model, chips)):
            demand[sharing.chip_link(boundary)] = nbytes
        found.append(sharing.Stream(model.name, 1.0 / period if period > 0 else float("inf"), demand))
    return found


def allocation(program: Program) -> sharing.Allocation:
    hw = program.hardware
    return sharing.allocate(streams(program), capacities(hw, chips_of(program)), interface(hw),
                            program.share_input)


def buffering(model: ProgramModel, hw: dict[str, Any]) -> Buffering:
    """Every edge's buffer in frames (see the module docstring).

    Each layer's offset is where, in a frame's stream, it starts at the compiled pace: the longest path from
    the model's inputs, each layer adding its window and each chip boundary the data in transit. An edge
    holds the rows between its producer's offset and its consumer's: the consumer's window on a plain
    edge, more where the consumer also waits for a longer path (a skip connection's delay line).
    """
    clock = float(hw["clock_mhz"]) * 1e6
    period = period_seconds(model, clock)
    hop = float(hw["chip_link"]["latency_us"]) * 1e-6 / period if period > 0 else 0.0
    rows = {row["name"]: row for row in model.layers}

    def weight(producer: str, consumer: str) -> float:
        crossings = abs(int(rows[consumer]["chip"]) - int(rows[producer]["chip"]))
        return max(1e-6, float(rows[consumer].get("start_fraction", 1.0))) + crossings * hop

    offset: dict[str, float] = {}
    send: dict[tuple[str, int], float] = {}
    for row in model.layers:
        offset[row["name"]] = max((offset[s] + weight(s, row["name"]) for s in row.get("inputs", [])), default=0.0)
        for source in row.get("inputs", []):
            low, high = sorted((int(rows[source]["chip"]), int(row["chip"])))
            for boundary in range(low, high):  # the sender holds the rows its farthest-needing reader waits for
                send[(source, boundary)] = max(send.get((source, boundary), 0.0), weight(source, row["name"]))
    edges = {(source, row["name"]): offset[row["name"]] - offset[source]
             for row in model.layers for source in row.get("inputs", [])}
    read = {source for row in model.layers for source in row.get("inputs", [])}
    last = [row["name"] for row in model.layers if row["name"] not in read]
    ready = max((offset[name] for name in last), default=0.0)  # the frame leaves when its last output is made
    ports = {name: OUTPUT_PORT_FRAMES + ready - offset[name] for name in last}
    return Buffering(edges, send, ports)
