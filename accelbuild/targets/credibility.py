"""How far a modelled target's figures can be trusted: the error band of a built-in profile against published
measurements of networks, as ``tools/credibility.py`` last measured it.

``credibility.json`` (next to this module) is written by that bench in the same run as docs/credibility.md, so
a report's band and the docs page always quote the same numbers. A band is quoted only for the profile it
was measured on: a changed or user-made profile (another digest) gets no band, and the record says why.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

DOCS = "docs/credibility.md"


@cache
def _table() -> dict[str, Any]:
    table = resources.files("accelbuild.targets").joinpath("credibility.json")
    return json.loads(table.read_text("utf-8")) if table.is_file() else {}


def band(family: str, profile: str, digest: str) -> dict[str, Any]:
    """benchmark.json's ``credibility`` record for a profile (name and digest of the merged profile)."""
    entry = _table().get(family, {}).get(profile)
    if entry is None:
        return {"calibrated": False,
                "text": f"simulated; profile {profile!r} has not been checked against published measurements"}
    if entry["profile_digest"] != digest:
        return {"calibrated": False,
                "text": f"simulated; this profile differs from the built-in {profile!r} that was checked against "
                        f"{entry['points']} published measurements ({DOCS}), so that band does not apply"}
    worst, median = entry["band_pct"], entry["median_pct"]
    how = "each predicted by a fit that did not see it" if entry["cross_validated"] else \
        "held out: none of them was used to set the profile" if entry.get("held_out") else \
        "in-sample: too few networks to leave one out"
    record = {"calibrated": True, "band_pct": worst, "median_pct": median, "points": entry["points"],
              "networks": entry["networks"], "cross_validated": entry["cross_validated"],
              "text": f"simulated; this profile's figures are within +-{worst:g}% of {entry['points']} published "
                      f"measurements of {_count(entry['networks'], 'network')} (median {median:g}%; {how}; {DOCS})"}
    side = entry.get("direction")
    if side in FPS_BOUND:  # every published point on one side: the band runs one way
        faster = side == "model_faster"
        bound, other = FPS_BOUND[side], FPS_BOUND["model_slower" if faster else "model_faster"]
        record.update(direction=side, nearest_pct=entry["nearest_pct"], fps_bound=bound)
        record["text"] = (
            f"simulated; every one of {entry['points']} published measurements of "
            f"{_count(entry['networks'], 'network')} ran {'slower' if faster else 'faster'} than this profile "
            f"predicts: predicted times {entry['nearest_pct']:g}% to {worst:g}% "
            f"{'shorter' if faster else 'longer'} (median {median:g}%; {how}; {DOCS}), so read its FPS as "
            f"{_article(bound)} bound and its latency as {_article(other)} bound")
    return record


# a one-sided band: what the predicted frame rate is to a real chip (the latency the other way round)
FPS_BOUND = {"model_faster": "upper", "model_slower": "lower"}


def _article(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")
