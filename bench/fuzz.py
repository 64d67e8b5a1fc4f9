"""Long fuzzing runs of the input readers: the properties of tests/test_fuzz.py on a time budget.

Targets (strategies and properties are those of ``tests/test_fuzz.py``):

- ``yaml``    config-like YAML text -> ``parse_yaml`` and ``load_pipeline``: a spec or a positioned user error
- ``schema``  JSON-like data -> ``schema_check.validate`` (both schemas): positioned ConfigErrors, no exception
- ``dfp``     mutated DFP bytes (optionally re-sealed) -> ``parse_dfp``: a canonical DFP or InputFileError
- ``tflite``  mutated canned TFLite models -> ``load_tflite``: an ONNX model or UserError

Each target runs Hypothesis in rounds of ``--round`` examples until its ``--seconds`` are spent. A failing
round is shrunk by Hypothesis to a minimal example, which is printed; fuzzing then continues. Executions
are calls of the property, shrinking included; "failures" are distinct (exception type, message) pairs.

    python bench/fuzz.py [--seconds 60] [--targets yaml,dfp] [--round 200] [--json]

Always exits 0: findings are reported, and each one should become a regression test.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_fuzz import TARGETS, Target  # noqa: E402  (the strategies and properties live with the tests)


@dataclass
class Report:
    target: str
    seconds: float = 0.0
    rounds: int = 0
    executions: int = 0
    failures: dict[str, str] = field(default_factory=dict)  # "Type: message" -> minimal example and where

    def as_json(self) -> dict:
        return {"target": self.target, "seconds": round(self.seconds, 1), "rounds": self.rounds,
                "executions": self.executions, "executions_per_second": round(self.executions / self.seconds)
                if self.seconds else 0, "failures": [{"error": k, "example": v} for k, v in self.failures.items()]}


def _short(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def fuzz(target: Target, seconds: float, round_size: int) -> Report:
    report = Report(target.name)

    @settings(max_examples=round_size, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(target.strategy)
    def round_(example: object) -> None:
        report.executions += 1
        target.check(example)

    started = time.monotonic()
    while time.monotonic() - started < seconds:
        report.rounds += 1
        try:
            round_()
        except Exception as error:  # a property failed: Hypothesis has shrunk it to a minimal example
            key = f"{type(error).__name__}: {_short(str(error).strip().splitlines()[0] if str(error).strip() else '', 200)}"
            if key not in report.failures:
                notes = "\n".join(getattr(error, "__notes__", []))
                where = traceback.extract_tb(error.__traceback__)[-1]
                report.failures[key] = _short(notes) + f"\n    at {where.filename}:{where.lineno}"
                print(f"  {target.name}: FAILURE {key}\n    {report.failures[key]}", file=sys.stderr)
    report.seconds = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60, help="budget per target (default 60)")
    parser.add_argument("--targets", default=",".join(t.name for t in TARGETS),
                        help="comma-separated targets (default: all)")
    parser.add_argument("--round", type=int, default=200, help="examples per Hypothesis round (default 200)")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # the readers log warnings for odd but accepted inputs
    warnings.filterwarnings("ignore", "Generating overly large repr")  # Hypothesis: costs time, not truth
    chosen = [t for t in TARGETS if t.name in args.targets.split(",")]
    reports = []
    for target in chosen:
        print(f"fuzzing {target.name} for {args.seconds:g} s ...", file=sys.stderr)
        reports.append(fuzz(target, args.seconds, args.round))
    if args.json:
        print(json.dumps([r.as_json() for r in reports], indent=2))
        return 0
    print(f"{'target':8} {'seconds':>8} {'rounds':>7} {'executions':>11} {'exec/s':>8} {'failures':>9}")
    for r in reports:
        print(f"{r.target:8} {r.seconds:8.1f} {r.rounds:7d} {r.executions:11,d} "
              f"{r.executions / r.seconds if r.seconds else 0:8.0f} {len(r.failures):9d}")
    for r in reports:
        for key, found in r.failures.items():
            print(f"\n{r.target}: {key}\n    {found}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
