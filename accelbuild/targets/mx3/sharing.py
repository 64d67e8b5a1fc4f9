"""How the models of one program share the host link and the chip-to-chip links, and what the host
interface's buffers allow: one set of rules for the cost model (``mapper/cost.py``) and the timing
simulation (``sim/timing.py``), so the two tell one story.

Rules (each a stated assumption of the hardware profile, ``links`` section):

- Links move packets (PCIe TLPs, link flits), not whole frames, and arbitrate between the models' streams
  packet by packet. A link's bandwidth is therefore shared max-min fairly: a model that needs less than an
  equal share gets what it needs, the others split the rest equally (water-filling). A model never waits
  for another model's whole frame.
- Host interface: per model and direction the host keeps at most ``frames_in_flight`` transfers on the
  interface (its descriptor ring); each holds its slot for its time on the wire plus the fixed per-transfer
  latency, so a model moves at most ``frames_in_flight / (latency + bytes / bandwidth)`` frames per second
  per direction (Little's law over the interface alone, not over the whole pipeline).
- ``share_input``: one input stream feeds every model, so they all run at the slowest one's pace and the
  input crosses the host link once per frame.

``allocate`` returns, per model, the frame rate these rules allow, what binds it, and the bandwidth each of
its streams gets on each link (what the simulator times its transfers at).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

HOST_IN, HOST_OUT = "host_in", "host_out"
ITERATIONS = 50


def chip_link(boundary: int) -> str:
    """The key of the link between chip ``boundary`` and chip ``boundary + 1``."""
    return f"chip_link:{boundary}"


@dataclass(frozen=True)
class Interface:
    """The host interface: descriptor slots per model and direction, fixed latency per transfer."""

    frames_in_flight: int
    latency_s: float


@dataclass(frozen=True)
class Stream:
    """One model's demand: the rate its own cores allow and its bytes per frame on each link."""

    name: str
    compute_fps: float
    bytes_per_frame: dict[str, float]  # link key (HOST_IN, HOST_OUT, chip_link(b)) -> bytes per frame


@dataclass
class Allocation:
    fps: dict[str, float]
    binding: dict[str, dict[str, object]]         # per model: {"kind": ..., ...}
    bandwidth: dict[str, dict[str, float]]        # per model and link: bytes/s its transfers move at
    load: dict[str, float] = field(default_factory=dict)  # per link: bytes/s at the allocated rates


def allocate(streams: list[Stream], capacity: dict[str, float], interface: Interface,
             share_input: bool = False) -> Allocation:
    """Frame rate per model under max-min fair link sharing and the host interface's buffers."""
    names = [s.name for s in streams]
    demand = {s.name: {k: float(v) for k, v in s.bytes_per_frame.items() if v > 0} for s in streams}
    if share_input:  # the input crosses once, for everybody: charge it to one stream
        largest = max((demand[n].get(HOST_IN, 0.0) for n in names), default=0.0)
        for index, name in enumerate(names):
            demand[name].pop(HOST_IN, None)
            if index == 0 and largest > 0:
                demand[name][HOST_IN] = largest
    own = {s.name: s.compute_fps for s in streams}
    compute = dict(own)
    if share_input:
        slowest = min(own.values(), default=0.0)
        own = {n: slowest for n in names}
    fps = dict(own)
    for _ in range(ITERATIONS):
        bandwidth = _bandwidth(names, demand, capacity, fps)
        caps = {n: min(own[n], _interface_bound(demand[n], bandwidth[n], interface)) for n in names}
        if share_input:
            shared = min(caps.values(), default=0.0)
            caps = {n: shared for n in names}
        new = _water_fill(names, demand, capacity, caps, share_input)
        if all(math.isclose(new[n], fps[n], rel_tol=1e-12, abs_tol=1e-9) for n in names):
            fps = new
            break
        fps = new
    bandwidth = _bandwidth(names, demand, capacity, fps)
    binding = {n: _binding(n, own, demand, capacity, fps, bandwidth, interface) for n in names}
    if share_input and names:  # one stream: whatever binds any of the models binds them all
        limits: list[tuple[float, dict[str, object]]] = [(compute[n], {"kind": "compute"}) for n in names]
        limits += [limit for n in names for limit in _limits(n, demand, capacity, fps, bandwidth, interface)]
        binds = min(limits, key=lambda item: item[0])[1]
        binding = {n: binds for n in names}
    load = {k: sum(fps[n] * demand[n].get(k, 0.0) for n in names) for k in capacity}
    return Allocation(fps, binding, bandwidth, load)


def _interface_bound(demand: dict[str, float], bandwidth: dict[str, float], interface: Interface) -> float:
    bound = math.inf
    for key in (HOST_IN, HOST_OUT):
        if demand.get(key, 0.0) > 0:
            hold = interface.latency_s + demand[key] / bandwidth[key]
            if hold > 0:
                bound = min(bound, interface.frames_in_flight / hold)
    return bound


def _water_fill(names: list[str], demand: dict[str, dict[str, float]], capacity: dict[str, float],
                caps: dict[str, float], share_input: bool) -> dict[str, float]:
    """Rates: each model's cap, cut to its max-min fair share of every link it uses."""
    rates = dict(caps)
    for _ in range(ITERATIONS):
        new = dict(caps)
        for key, total in capacity.items():
            users = [n for n in names if demand[n].get(key, 0.0) > 0]
            if not users:
                continue
            wanted = {n: rates[n] * demand[n][key] for n in users}
            granted = _max_min(wanted, total)
            for n in users:
                new[n] = min(new[n], granted[n] / demand[n][key])
        if share_input:
            shared = min(new.values(), default=0.0)
            new = {n: shared for n in names}
        if all(math.isclose(new[n], rates[n], rel_tol=1e-12, abs_tol=1e-9) for n in names):
            return new
        rates = new
    return rates


def _max_min(wanted: dict[str, float], total: float) -> dict[str, float]:
    """Max-min fair split of ``total`` among demands ``wanted`` (in order of demand, then name order)."""
    granted: dict[str, float] = {}
    left, pending = total, sorted(wanted, key=lambda n: (wanted[n], list(wanted).index(n)))
    while pending:
        share = left / len(pending)
        name = pending[0]
        if wanted[name] <= share:
            granted[name] = wanted[name]
            left -= wanted[name]
            pending.pop(0)
            continue
        for rest in pending:
            granted[rest] = share
        break
    return granted


def _bandwidth(names: list[str], demand: dict[str, dict[str, float]], capacity: dict[str, float],
               fps: dict[str, float]) -> dict[str, dict[str, float]]:
    """Per model and link, the bandwidth its transfers see: what the other models leave at their rates,
    and never less than an equal share (packets interleave)."""
    result: dict[str, dict[str, float]] = {n: {} for n in names}
    for key, total in capacity.items():
        users = [n for n in names if demand[n].get(key, 0.0) > 0]
        for n in names:
            others = sum(fps[o] * demand[o].get(key, 0.0) for o in users if o != n)
            result[n][key] = max(total / max(1, len(users)), total - others) if n in users else total
    return result


def _binding(name: str, own: dict[str, float], demand: dict[str, dict[str, float]], capacity: dict[str, float],
             fps: dict[str, float], bandwidth: dict[str, dict[str, float]], interface: Interface) -> dict[str, object]:
    """What limits ``name``: its own cores ("compute"), a link ("link" with its key) or the host interface's
    buffers ("host_buffers" with the direction), whichever allows the lowest rate."""
    if fps[name] >= own[name] * (1 - 1e-9):
        return {"kind": "compute"}
    limits = _limits(name, demand, capacity, fps, bandwidth, interface)
    if not limits:
        return {"kind": "compute"}
    return min(limits, key=lambda item: item[0])[1]


def _limits(name: str, demand: dict[str, dict[str, float]], capacity: dict[str, float], fps: dict[str, float],
            bandwidth: dict[str, dict[str, float]], interface: Interface) -> list[tuple[float, dict[str, object]]]:
    """(the rate it allows, the resource) for the host buffers and every link ``name`` uses."""
    limits: list[tuple[float, dict[str, object]]] = []
    for key in (HOST_IN, HOST_OUT):
        nbytes = demand[name].get(key, 0.0)
        if nbytes > 0:
            hold = interface.latency_s + nbytes / bandwidth[name][key]
            limits.append((interface.frames_in_flight / hold, {"kind": "host_buffers", "link": key}))
    for key in capacity:
        nbytes = demand[name].get(key, 0.0)
        if nbytes > 0:  # what the link lets this model move: what the others leave, at least an equal share
            limits.append((bandwidth[name][key] / nbytes, {"kind": "link", "link": key}))
    return limits
