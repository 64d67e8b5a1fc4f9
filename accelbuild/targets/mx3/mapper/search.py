"""Where every layer runs: chips filled in topological order, cores allocated within each chip.

A mapping is a list of chip boundaries (layers are contiguous per chip, in the models' topological
order) plus an allocation strategy for the cores of each chip:

- ``lazy``: one greedy pass — chips filled with each layer's minimum cores up to an equal share of the
  total work, cores handed out in proportion to work.
- ``normal``: the smallest frame period any contiguous partition can reach with every chip link
  keeping up (found by bisection: a greedy fill that cuts at the last admissible position is an exact
  feasibility test for contiguous partitions), cores water-filled within each
  chip (add a core to the slowest layer while one is left: optimal for the min-max), then boundaries
  nudged while the cost model's FPS improves (links make that worthwhile).
- ``hard``: candidate splits — boundary shifts around the normal mapping (all partitions when the graph
  is small enough to enumerate) x allocation strategies, deduplicated, ranked by the cost model; the
  ranked list is kept for the closed loop.

``target_fps`` stops the search (and the water-filling) once the predicted FPS reaches it.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass

from accelbuild.errors import UserError
from accelbuild.targets.mx3.hardware import HardwareProfile
from accelbuild.targets.mx3.mapper import cost
from accelbuild.targets.mx3.mapper.cost import Estimate, Placement, Traffic
from accelbuild.targets.mx3.mapper.layers import Layer

STRATEGIES = ("balanced", "proportional")
MAX_EXHAUSTIVE = 3000
MAX_CANDIDATES = 32
SHIFTS = (-4, -3, -2, -1, 1, 2, 3, 4)


class DoesNotFit(UserError):
    """The models cannot be placed on the chips given."""


@dataclass
class Candidate:
    boundaries: tuple[int, ...]
    strategy: str
    placements: list[Placement]
    estimate: Estimate

    @property
    def key(self) -> tuple[tuple[int, ...], str]:
        return self.boundaries, self.strategy


@dataclass(frozen=True)
class Request:
    num_chips: int
    effort: str
    target_fps: float | None
    traffic: Traffic


def chips_needed(layers: list[Layer], hw: HardwareProfile) -> int:
    """Fewest chips that hold every layer at its minimum cores (weights and feature maps must fit)."""
    return len(_min_fill(layers, hw)) + 1


def map_layers(layers: list[Layer], hw: HardwareProfile, request: Request) -> list[Candidate]:
    """Ranked candidates, best first (one for lazy/normal, the deduplicated splits for hard)."""
    needed = chips_needed(layers, hw)
    if needed > request.num_chips:
        raise DoesNotFit(f"the models need at least {needed} chips; num_chips is {request.num_chips}. "
                         f"{shortfall(layers, hw, request.num_chips)}")
    target_cycles = _target_cycles(layers, hw, request.target_fps)
    lazy = _lazy(layers, hw, request, target_cycles)
    if request.effort == "lazy" or _reached(lazy, request):
        return [lazy]
    best = _balanced(layers, hw, request, target_cycles)
    best = max([best, lazy], key=_rank)
    if not _reached(best, request):
        best = _refine(layers, hw, request, best, target_cycles)
    if request.effort == "normal" or _reached(best, request):
        return [best]
    return _splits(layers, hw, request, best, target_cycles)


def _lazy(layers: list[Layer], hw: HardwareProfile, request: Request, target_cycles: float | None) -> Candidate:
    """Fill chips with minimum cores up to a share of the work; widen the share until the fill fits."""
    minimum = [cost.min_cores(layer, hw) for layer in layers]
    share = sum(layer.work * layer.factor for layer in layers) / request.num_chips
    for widen in (1.0, 1.25, 1.5, 2.0, 3.0):
        cuts = _fill(layers, hw, minimum, work_cap=share * widen, num_chips=request.num_chips)
        if cuts is not None and len(cuts) < request.num_chips:
            found = candidate(layers, hw, request, tuple(cuts), "proportional", target_cycles)
            if found is not None:
                return found
    found = candidate(layers, hw, request, _min_fill(layers, hw), "proportional", target_cycles)
    assert found is not None  # chips_needed() showed the minimum fill fits
    return found


def _rank(found: Candidate) -> tuple[float, float, float]:
    """Best first: the combined rate (the slowest model's: a faster other model cannot buy a slower one),
    then the models' rates together, then the shortest latency."""
    estimate = found.estimate
    return round(estimate.fps, 6), round(estimate.total_fps, 6), -round(estimate.latency_max_ms, 6)


def _reached(found: Candidate, request: Request) -> bool:
    return request.target_fps is not None and found.estimate.fps >= request.target_fps


def _target_cycles(layers: list[Layer], hw: HardwareProfile, target_fps: float | None) -> float | None:
    if target_fps is None:
        return None
    return hw.chip.clock_hz / target_fps  # every model's rate must reach it (the combined figure is the slowest)


def _fill(layers: list[Layer], hw: HardwareProfile, cores: list[int], allowed: list[bool] | None = None,
          work_cap: float | None = None, num_chips: int = 0) -> list[int] | None:
    """Greedy contiguous fill: boundaries (first layer index of chips 1..), or None when a layer alone
    exceeds a chip or no allowed cut is left. A chip ends where the next layer would not fit (or, on
    all but the last of ``num_chips``, where its work would pass ``work_cap``), at the last position
    where a cut is ``allowed``."""
    boundaries: list[int] = []
    start, index, last_ok = 0, 0, None
    used = {"mac": 0, "alu": 0, "feature": 0, "work": 0.0}
    while index < len(layers):
        layer, k = layers[index], cores[index]
        if index > start and (allowed is None or allowed[index]):
            last_ok = index
        need = {"mac": k if layer.kind == "mac" else 0, "alu": k if layer.kind == "alu" else 0,
                "feature": layer.buffer_bytes, "work": layer.work * layer.factor}
        if not _fits(need, hw):
            return None
        total = {key: used[key] + need[key] for key in used}
        capped = work_cap is not None and len(boundaries) < num_chips - 1
        if _fits(total, hw) and (not capped or total["work"] <= work_cap or index == start):
            used, index = total, index + 1
            continue
        if last_ok is None:
            return None
        boundaries.append(last_ok)
        start, index, last_ok = last_ok, last_ok, None
        used = {"mac": 0, "alu": 0, "feature": 0, "work": 0.0}
    return boundaries


def cut_bytes(layers: list[Layer]) -> list[int]:
    """Activation bytes per frame that cross a chip boundary placed before each layer index."""
    position = {layer.key: i for i, layer in enumerate(layers)}
    last_reader = list(range(len(layers)))
    for i, layer in enumerate(layers):
        for name in layer.inputs:
            source = position[f"{layer.model}/{name}"]
            last_reader[source] = max(last_reader[source], i)
    delta = [0] * (len(layers) + 1)
    for j, layer in enumerate(layers):
        if last_reader[j] > j:
            delta[j + 1] += layer.out_bytes
            delta[last_reader[j] + 1] -= layer.out_bytes
    crossing, running = [], 0
    for i in range(len(layers)):
        running += delta[i]
        crossing.append(running)
    return crossing


def _fits(need: dict[str, int], hw: HardwareProfile) -> bool:
    return (need["mac"] <= hw.chip.mac_cores.count and need["alu"] <= hw.chip.alu_cores.count
            and need["feature"] <= hw.chip.feature_memory_bytes)


def _too_big(layers: list[Layer], hw: HardwareProfile) -> str:
    for layer in layers:
        k = cost.min_cores(layer, hw)
        if layer.kind == "mac" and k > hw.chip.mac_cores.count:
            return (f"layer {layer.name!r} of model {layer.model!r} has {layer.weight_bytes} bytes of weights at "
                    f"{layer.bits} bits, more than one chip's weight memory ({hw.weight_memory_bytes} bytes); "
                    "quantize it to fewer bits")
        if layer.buffer_bytes > hw.chip.feature_memory_bytes:
            return (f"layer {layer.name!r} of model {layer.model!r} needs {layer.buffer_bytes} bytes of feature "
                    f"maps, more than one chip holds ({hw.chip.feature_memory_bytes}); use smaller input shapes")
    return "a layer does not fit on one chip"


# what else frees each resource besides more chips (ALU cores: nothing the config controls)
REMEDY = {"weight memory": "quantize weights to fewer bits", "MAC cores": "quantize weights to fewer bits",
          "feature memory": "use smaller input shapes"}


def shortfall(layers: list[Layer], hw: HardwareProfile, num_chips: int) -> str:
    """Which resource the chips are short of and by how much: each layer at its fewest cores (enough MAC
    cores to hold its weights), in topological order."""
    totals = {"weight memory": (sum(layer.weight_bytes for layer in layers), hw.weight_memory_bytes, "bytes"),
              "MAC cores": (sum(cost.min_cores(layer, hw) for layer in layers if layer.kind == "mac"),
                            hw.chip.mac_cores.count, "cores"),
              "ALU cores": (sum(1 for layer in layers if layer.kind == "alu"), hw.chip.alu_cores.count, "cores"),
              "feature memory": (sum(layer.buffer_bytes for layer in layers), hw.chip.feature_memory_bytes, "bytes")}
    parts, short = [], []
    for name, (need, per_chip, unit) in totals.items():
        have = per_chip * num_chips
        if need > have:
            parts.append(f"{name}: {need:,} {unit} needed, {have:,} on {num_chips} chip(s) "
                         f"({need - have:,} short)")
            short.append(name)
    if not parts:  # enough in total, but the layers cannot be packed in order into so few chips
        worst = max(totals, key=lambda n: totals[n][0] / (totals[n][1] * num_chips))
        need, per_chip, unit = totals[worst]
        parts.append(f"in total they fit, but not packed in topological order: {worst} is the tightest "
                     f"({need:,} of {per_chip * num_chips:,} {unit}, {need / (per_chip * num_chips):.0%})")
        short.append(worst)
    remedies = dict.fromkeys(REMEDY[name] for name in short if name in REMEDY)  # only what frees the short resource
    return "; ".join(parts) + ". Raise num_chips (or num_chips: min)" + "".join(f" or {r}" for r in remedies)


def _min_fill(layers: list[Layer], hw: HardwareProfile) -> tuple[int, ...]:
    boundaries = _fill(layers, hw, [cost.min_cores(layer, hw) for layer in layers])
    if boundaries is None:
        raise DoesNotFit(_too_big(layers, hw))
    return tuple(boundaries)


def _assignment(boundaries: tuple[int, ...], count: int) -> list[int]:
    chips, chip = [], 0
    edges = set(boundaries)
    for index in range(count):
        if index in edges:
            chip += 1
        chips.append(chip)
    return chips


def allocate(layers: list[Layer], chips: list[int], hw: HardwareProfile, strategy: str,
             target_cycles: float | None = None) -> list[Placement] | None:
    """Cores per layer for a chip assignment; None if a chip cannot hold its layers."""
    cores = [cost.min_cores(layer, hw) for layer in layers]
    for chip in set(chips):
        for kind in ("mac", "alu"):
            members = [i for i, c in enumerate(chips) if c == chip and layers[i].kind == kind]
            spare = cost.core_budget(kind, hw) - sum(cores[i] for i in members)
            if spare < 0:
                return None
            if strategy == "balanced":
                _water_fill(layers, members, cores, spare, hw, target_cycles)
            else:
                _proportional(layers, members, cores, spare)
    return [Placement(chip, k) for chip, k in zip(chips, cores)]


def _water_fill(layers: list[Layer], members: list[int], cores: list[int], spare: int, hw: HardwareProfile,
                target_cycles: float | None) -> None:
    heap = [(-cost.cycles(layers[i], cores[i], hw), i) for i in members]
    heapq.heapify(heap)
    while spare > 0 and heap:
        negative, i = heapq.heappop(heap)
        if target_cycles is not None and -negative <= target_cycles:
            break
        better = cost.cycles(layers[i], cores[i] + 1, hw)
        if better >= -negative:
            continue
        cores[i] += 1
        spare -= 1
        heapq.heappush(heap, (-better, i))


def _proportional(layers: list[Layer], members: list[int], cores: list[int], spare: int) -> None:
    total = sum(layers[i].work * layers[i].factor for i in members)
    if total <= 0:
        return
    for i in members:
        cores[i] += int(spare * layers[i].work * layers[i].factor / total)


def candidate(layers: list[Layer], hw: HardwareProfile, request: Request, boundaries: tuple[int, ...],
               strategy: str, target_cycles: float | None) -> Candidate | None:
    if len(boundaries) + 1 > request.num_chips or list(boundaries) != sorted(set(boundaries)):
        return None
    if boundaries and (boundaries[0] <= 0 or boundaries[-1] >= len(layers)):
        return None
    chips = _assignment(boundaries, len(layers))
    placements = allocate(layers, chips, hw, strategy, target_cycles)
    if placements is None or cost.capacity_problems(cost.chip_usage(layers, placements, request.num_chips), hw):
        return None
    estimate = cost.evaluate(layers, placements, hw, request.traffic, request.num_chips)
    return Candidate(boundaries, strategy, placements, estimate)


def _balanced(layers: list[Layer], hw: HardwareProfile, request: Request,
              target_cycles: float | None) -> Candidate:
    """Bisection on the frame period: the smallest one a contiguous fill fits into num_chips."""
    low = hw.chip.layer_overhead_cycles
    high = max(cost.cycles(layer, cost.min_cores(layer, hw), hw) for layer in layers)
    if target_cycles is not None:
        low = max(low, min(target_cycles, high))
    best = _min_fill(layers, hw)
    crossing = cut_bytes(layers)
    link = hw.chip_to_chip_link.total_bytes_per_second
    for _ in range(48):
        middle = (low + high) / 2
        allowed = [b * hw.chip.clock_hz / middle <= link for b in crossing]  # the link keeps up at this period
        boundaries = _fill(layers, hw, [cost.cores_for(layer, middle, hw) for layer in layers], allowed)
        if boundaries is not None and len(boundaries) + 1 <= request.num_chips:
            high, best = middle, tuple(boundaries)
        else:
            low = middle
        if high - low < 1.0:
            break
    found = candidate(layers, hw, request, best, "balanced", target_cycles)
    assert found is not None  # the fill that produced ``best`` fits by construction
    return found


def _refine(layers: list[Layer], hw: HardwareProfile, request: Request, best: Candidate,
            target_cycles: float | None, rounds: int = 4) -> Candidate:
    for _ in range(rounds):
        improved = False
        for index in range(len(best.boundaries)):
            for shift in (-2, -1, 1, 2):
                moved = list(best.boundaries)
                moved[index] += shift
                trial = candidate(layers, hw, request, tuple(moved), best.strategy, target_cycles)
                if trial is not None and _rank(trial) > _rank(best):
                    best, improved = trial, True
                    if _reached(best, request):
                        return best
        if not improved:
            break
    return best


def _splits(layers: list[Layer], hw: HardwareProfile, request: Request, best: Candidate,
            target_cycles: float | None) -> list[Candidate]:
    found = {best.key: best}
    for boundaries in _boundary_candidates(best.boundaries, len(layers), request.num_chips):
        for strategy in STRATEGIES:
            if (boundaries, strategy) in found:
                continue
            trial = candidate(layers, hw, request, boundaries, strategy, target_cycles)
            if trial is not None:
                found[trial.key] = trial
    ranked = sorted(found.values(), key=lambda c: (_rank(c), c.strategy == "balanced", c.boundaries), reverse=True)
    return ranked[:MAX_CANDIDATES]


def _boundary_candidates(base: tuple[int, ...], count: int, num_chips: int):
    """Every contiguous partition when there are few, else single and paired shifts of ``base``."""
    total = sum(math.comb(count - 1, k) for k in range(min(num_chips, count)))
    if total <= MAX_EXHAUSTIVE:
        for chips in range(1, min(num_chips, count) + 1):
            yield from itertools.combinations(range(1, count), chips - 1)
        return
    for index in range(len(base)):
        for shift in SHIFTS:
            moved = list(base)
            moved[index] += shift
            yield tuple(moved)
    for index in range(len(base) - 1):
        for a, b in itertools.product((-2, -1, 1, 2), repeat=2):
            moved = list(base)
            moved[index] += a
            moved[index + 1] += b
            yield tuple(moved)
