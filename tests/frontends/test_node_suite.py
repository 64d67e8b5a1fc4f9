"""ONNX conformance: the ONNX backend node suite through the import stage, against the expectation file.

The suite is generated from the installed onnx package and run once per session (about half a minute):
every case is imported in-process by the import stage's own ``run`` and the result compared in
onnxruntime with the case's expected outputs (see ``node_suite_runner``). A crash, a wrong result, a
reproduced case that stops being reproduced or a refusal outside its documented family fails here;
``python bench/node_suite.py`` prints the rates, ``--write-expected`` regenerates the case lists.
"""

from __future__ import annotations

from collections import Counter

import node_suite_runner as suite
import pytest


@pytest.fixture(scope="module")
def outcomes() -> list[suite.Outcome]:
    return suite.run_suite()


@pytest.fixture(scope="module")
def expected() -> suite.Expected:
    return suite.load_expected()


def _listing(outcomes: list[suite.Outcome], limit: int = 30) -> str:
    lines = [f"  {o.case}: {o.status}: {o.first_line}" for o in outcomes[:limit]]
    more = [f"  ... and {len(outcomes) - limit} more"] if len(outcomes) > limit else []
    return "\n".join(lines + more)


def test_the_suite_comes_from_the_installed_onnx(outcomes: list[suite.Outcome]) -> None:
    assert len(outcomes) > 1000  # onnx 1.23 generates 1,884 cases; an empty collection must not pass
    assert len({o.case for o in outcomes}) == len(outcomes)


def test_no_crashes_and_no_wrong_results(outcomes: list[suite.Outcome]) -> None:
    bad = [o for o in outcomes if o.status in ("crash", "wrong")]
    assert not bad, f"{len(bad)} case(s) crashed or gave wrong results:\n{_listing(bad)}"


def test_reproduced_share_of_what_onnxruntime_runs(outcomes: list[suite.Outcome], expected: suite.Expected) -> None:
    figures = suite.summary(outcomes)
    assert figures["reproduced_pct"] >= expected.minimum_reproduced_pct, figures


def test_every_refusal_is_a_documented_family(outcomes: list[suite.Outcome], expected: suite.Expected) -> None:
    """Each refusal's first line matches its family's pattern (the reason), details only below it."""
    unknown = [o for o in outcomes if o.status == "refused" and expected.family_of(o.message) is None]
    assert not unknown, f"refusals that fit no family in {suite.EXPECTED_FILE.name}:\n{_listing(unknown)}"
    for family in expected.families.values():
        assert len(family["why"]) > 80, "each family says why a CNN accelerator flow refuses it"


def test_outcomes_are_the_expected_ones(outcomes: list[suite.Outcome], expected: suite.Expected) -> None:
    strict = suite.installed_versions() == expected.versions
    problems = suite.differences(outcomes, expected, strict=strict)
    mode = "" if strict else (f" (installed {suite.installed_versions()}, file made with {expected.versions}: "
                              "regressions only)")
    assert not problems, (f"{len(problems)} case(s) differ from {suite.EXPECTED_FILE.name}{mode}; if the change "
                          "is intended, run `python bench/node_suite.py --write-expected` and review the diff:\n  "
                          + "\n  ".join(problems[:40]))


def test_the_import_says_each_thing_once(outcomes: list[suite.Outcome]) -> None:
    """One warning per reason and model (verification off, lenient inference, ...), never repeated."""
    repeated = [o for o in outcomes if any(n > 1 for n in Counter(o.warnings).values())]
    assert not repeated, _listing(repeated)
    unverified = [o for o in outcomes if sum("graph passes not verified" in w for w in o.warnings) > 1]
    assert not unverified, _listing(unverified)
