"""The cost model's latency: one frame through the pipeline in the steady state, by the rules the timing
simulation follows (``accelbuild/targets/mx3/sim/timing.py``), so the two tell one story.

Times start when the frame's input starts on the host link. A layer works on a frame from ``start`` to
``end``:

- a first layer starts once the fixed host latency and its window's share of the input transfer have
  passed (``start_fraction`` x input time) and ends no earlier than its own time after that, nor
  earlier than its window's share of its own time after the whole input arrived;
- any other layer starts once each producer has made the rows its window needs: the window's share of
  the producer's span (``end - start``), or of the chip link's transfer time when the tensor crosses a
  chip boundary and the link is slower, plus the link's fixed latency per boundary; it ends as a first
  layer does, against its producers' ends;
- in the steady state the binding resource sets the pace of every layer upstream of it: such a layer's
  rows come at the model's frame period, so its span is at least that period (``paced``);
- the frame has arrived when the last output is made, read out over the host link and its fixed latency.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    """One layer, as far as latency goes."""

    name: str
    inputs: tuple[str, ...]
    chip: int
    seconds: float    # its time per frame on its cores
    fraction: float   # its window: the share of its input it needs before it can start


@dataclass(frozen=True)
class Pace:
    """What the model's frames move at."""

    period_s: float              # one frame per period in the steady state
    input_s: float               # the input's time on the host link
    output_s: float              # the output's time on the host link
    host_latency_s: float        # fixed cost of a host transfer
    hop_latency_s: float         # fixed cost of a chip-to-chip hand-over
    link_s: dict[int, float]     # per chip boundary: the model's bytes over it at the bandwidth it gets
    paced: frozenset[str]        # layers upstream of the binding resource


def paced_layers(nodes: list[Node], binding: dict[str, object]) -> frozenset[str]:
    """The layers whose rows come at the frame period because the binding resource is downstream of them."""
    kind = binding.get("kind")
    if kind == "layer":
        found = {str(binding.get("layer"))} if any(n.name == binding.get("layer") for n in nodes) else set()
        for node in reversed(nodes):
            if node.name in found:
                found.update(node.inputs)
        return frozenset(found)
    if kind == "chip_link":
        boundary = int(binding["from_chip"])  # type: ignore[call-overload]
        return frozenset(n.name for n in nodes if n.chip <= boundary)
    if kind in ("host_link", "host_buffers") and binding.get("direction") == "to_host":
        return frozenset(n.name for n in nodes)
    return frozenset()


def latency_seconds(nodes: list[Node], pace: Pace) -> float:
    """From the input's first byte on the host link to the output's arrival at the host."""
    by_name = {n.name: n for n in nodes}
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    for node in nodes:
        if not node.inputs:
            begin = pace.host_latency_s + node.fraction * pace.input_s
            ready = pace.host_latency_s + pace.input_s
        else:
            begin = ready = 0.0
            for source in node.inputs:
                first = start[source] + node.fraction * (end[source] - start[source])
                last = end[source]
                low, high = sorted((by_name[source].chip, node.chip))
                for boundary in range(low, high):
                    link = pace.link_s.get(boundary, 0.0)
                    first = max(first, start[source] + node.fraction * link) + pace.hop_latency_s
                    last = max(last, start[source] + link) + pace.hop_latency_s
                begin, ready = max(begin, first), max(ready, last)
        finish = max(begin + node.seconds, ready + node.fraction * node.seconds)
        if node.name in pace.paced:
            finish = max(finish, begin + pace.period_s)
        start[node.name], end[node.name] = begin, finish
    read = {source for node in nodes for source in node.inputs}
    made = max((end[n.name] for n in nodes if n.name not in read), default=0.0)
    return made + pace.output_s + pace.host_latency_s
