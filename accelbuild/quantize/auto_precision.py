"""Mixed precision: raise the most sensitive layers to 16 bits until the output reaches a target.

``raise_to_target`` (every family) raises layers until the output cosine reaches a target, given a
function that measures the cosine of a bits assignment (see ``precision_measures`` for the mx3 weight-only
and the QDQ measurements).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# --- auto precision with a target (every family) ------------------------------------------------------

DEFAULT_MIN_COSINE = 0.99  # what `auto_precision: true` aims for


@dataclass(frozen=True)
class Candidate:
    """A layer that can be raised from ``low`` to ``high`` bits, costing ``extra_bytes`` more memory."""

    name: str
    extra_bytes: int
    low: int = 8
    high: int = 16


@dataclass
class TargetDecision:
    bits: dict[str, int]
    reached: bool
    cosine: float
    extra_bytes: int
    record: dict[str, object] = field(default_factory=dict)


def raise_to_target(candidates: list[Candidate], cosine_of: Callable[[dict[str, int]], float],
                    min_cosine: float = DEFAULT_MIN_COSINE, max_extra_bytes: int | None = None,
                    held_out_cosine_of: Callable[[dict[str, int]], float] | None = None) -> TargetDecision:
    """Raise the most sensitive layers until the output cosine reaches ``min_cosine``.

    ``cosine_of(bits)`` measures the model output's cosine against float for a bits assignment of every
    candidate (on the calibration frames). One evaluation of the starting point, one per layer for
    sensitivities (the cosine with only that layer at its low precision, every other raised: its own share
    of the output noise), then one per greedy step, most sensitive first: ``1 + layers + steps``
    evaluations in all. With ``held_out_cosine_of`` (the same measure on frames that took no part in
    calibration or in the ranking) the target must hold there too: once the calibration frames reach it,
    every further step is also measured on the held-out frames, and raising goes on until both reach it.
    A raise that does not fit ``max_extra_bytes`` is skipped (smaller ones may still fit). Stops when the
    target is reached or nothing is left; the record says which, and why a target was missed.
    """
    low = {c.name: c.low for c in candidates}
    evaluations = 0

    def measure(bits: dict[str, int], on: Callable[[dict[str, int]], float] = cosine_of) -> float:
        nonlocal evaluations
        evaluations += 1
        return float(on(bits))

    def reached(bits: dict[str, int], current: float) -> tuple[bool, float | None]:
        """Whether ``bits`` reach the target, and the held-out cosine when it was measured (only once the
        calibration frames reach the target)."""
        if current < min_cosine or held_out_cosine_of is None:
            return current >= min_cosine, None
        held_out = measure(bits, held_out_cosine_of)
        return held_out >= min_cosine, held_out

    bits = dict(low)
    current = measure(bits)
    record: dict[str, object] = {"min_cosine": min_cosine, "max_extra_bytes": max_extra_bytes,
                                 "start_cosine": round(current, 6),
                                 "stops_on": "calibration and held-out frames" if held_out_cosine_of else
                                 "calibration frames"}
    done, held_out = reached(bits, current)
    if done or not candidates:
        return _decision(bits, current, held_out, 0, record, evaluations, [], done,
                         "target reached" if done else "nothing to raise")
    raised_all = {c.name: c.high for c in candidates}
    sensitivity = {c.name: measure({**raised_all, c.name: c.low}) for c in candidates}
    order = sorted(candidates, key=lambda c: (sensitivity[c.name], c.name))  # lowest cosine: most sensitive
    steps: list[dict[str, object]] = []
    extra, skipped = 0, []
    for c in order:
        if done:
            break
        if max_extra_bytes is not None and extra + c.extra_bytes > max_extra_bytes:
            skipped.append(c.name)
            steps.append({"layer": c.name, "raised": False, "extra_bytes": c.extra_bytes,
                          "reason": "over max_extra_bytes"})
            continue
        bits[c.name] = c.high
        extra += c.extra_bytes
        current = measure(bits)
        done, held_out = reached(bits, current)
        step: dict[str, object] = {"layer": c.name, "raised": True, "bits": c.high, "extra_bytes": c.extra_bytes,
                                   "total_extra_bytes": extra, "cosine": round(current, 6)}
        if held_out is not None:
            step["held_out_cosine"] = round(held_out, 6)
        steps.append(step)
    record["sensitivity_cosine"] = {name: round(v, 6) for name, v in sorted(sensitivity.items())}
    record["order"] = [c.name for c in order]
    if done:
        reason = "target reached"
    elif skipped:
        reason = f"max_extra_bytes binds: {len(skipped)} layer(s) left unraised ({', '.join(skipped[:5])}" \
                 f"{', ...' if len(skipped) > 5 else ''})"
    else:
        reason = "every layer raised and the target is still not reached"
    return _decision(bits, current, held_out, extra, record, evaluations, steps, done, reason)


def _decision(bits: dict[str, int], cosine: float, held_out: float | None, extra: int, record: dict[str, object],
              evaluations: int, steps: list[dict[str, object]], reached: bool, reason: str) -> TargetDecision:
    record.update({"steps": steps, "raised": [s["layer"] for s in steps if s["raised"]], "reached": reached,
                   "reason": reason, "cosine": round(cosine, 6), "extra_bytes": extra, "evaluations": evaluations})
    if held_out is not None:
        record["held_out_cosine"] = round(held_out, 6)
    return TargetDecision(bits, reached, cosine, extra, record)
