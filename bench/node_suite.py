"""ONNX conformance rates: the ONNX backend node suite through the import stage.

Generates the node suite from the installed onnx package, imports every case in-process with the import
stage's own ``run`` and compares the imported model's outputs in onnxruntime with the expected ones (the
harness is ``tests/node_suite_runner.py``, shared with ``tests/frontends/test_node_suite.py``). Prints: cases,
cases onnxruntime itself reproduces with the original model, reproduced (count and share of those),
refusals by family (``tests/fixtures/node_suite_expected.yaml``), crashes, wrong results, and how many
imports could not verify their graph passes because random inputs do not run.

    python bench/node_suite.py [--json] [--list STATUS] [--write-expected]

``--list reproduced|refused|ort-cannot-run|wrong|crash`` prints those cases with their messages;
``--write-expected`` rewrites the case lists of the expectation file (it refuses while anything crashes,
is wrong, or is refused for a reason no family documents).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import node_suite_runner as suite


def figures(outcomes: list[suite.Outcome], expected: suite.Expected, seconds: float) -> dict:
    result = suite.summary(outcomes)
    result["refused_by_family"] = dict(Counter(
        suite.actual_outcome(o, expected).removeprefix("refused: ") for o in outcomes if o.status == "refused"))
    result["ort_cannot_run_by_reason"] = dict(Counter(
        _ort_reason(o.message) for o in outcomes if o.status == "ort-cannot-run"))
    result["passes_not_verified"] = sum(any("graph passes not verified" in w for w in o.warnings)
                                        for o in outcomes if o.ort_runs)
    result["seconds"] = round(seconds, 1)
    result["versions"] = suite.installed_versions()
    return result


def _ort_reason(message: str) -> str:
    if message.startswith("outputs differ"):
        return "other outputs"
    if any(k in message for k in ("NOT_IMPLEMENTED", "is not a registered function/op", "Failed to find kernel")):
        return "not implemented"
    if "Numpy" in message:
        return "type numpy cannot carry"
    return "other error"


@contextlib.contextmanager
def _native_stderr_muted() -> Iterator[None]:
    """onnxruntime logs each model it rejects from C++; the suite runs many on purpose."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def show(result: dict) -> str:
    lines = [
        (f"ONNX node suite (onnx {result['versions']['onnx']}, onnxruntime {result['versions']['onnxruntime']}), "
         f"{result['seconds']} s"),
        f"  cases                      {result['cases']:>5}",
        f"  onnxruntime runs original  {result['ort_runnable']:>5}",
        f"  reproduced                 {result['reproduced']:>5}  ({result['reproduced_pct']}% of those)",
        f"  refused                    {result['refused']:>5}",
    ]
    lines += [f"    {family:<24} {count:>5}" for family, count in sorted(result["refused_by_family"].items())]
    lines += [
        f"  crashes                    {result['crashes']:>5}",
        f"  wrong results              {result['wrong']:>5}",
        f"  onnxruntime cannot run     {result['ort_cannot_run']:>5}",
    ]
    lines += [f"    {reason:<24} {count:>5}" for reason, count in sorted(result["ort_cannot_run_by_reason"].items())]
    lines.append(f"  passes not verified (random inputs do not run; of the runnable) {result['passes_not_verified']}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--list", choices=suite.STATUSES)
    parser.add_argument("--write-expected", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    with _native_stderr_muted():
        outcomes = suite.run_suite()
    expected = suite.load_expected()
    result = figures(outcomes, expected, time.perf_counter() - started)
    print(json.dumps(result, indent=2) if args.json else show(result))
    if args.list:
        for outcome in outcomes:
            if outcome.status == args.list:
                print(f"{outcome.case}: {outcome.message}")
    if args.write_expected:
        blocking = suite.write_expected(outcomes)
        if blocking:
            print(f"not written: {len(blocking)} case(s) need a fix or a documented family first:", file=sys.stderr)
            print("\n".join(f"  {b}" for b in blocking), file=sys.stderr)
            return 1
        print(f"wrote {suite.EXPECTED_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
