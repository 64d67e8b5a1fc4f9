"""``accelbuild status`` (and ``run --dry-run``'s listing): which tasks would run, and why."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from accelbuild.commands import common

if TYPE_CHECKING:
    from accelbuild.engine.doit_backend import Explanation


def main(args: argparse.Namespace) -> int:
    from accelbuild.engine import api

    common.refuse_model_files(args.pipelines, "status")
    pipelines = common.with_devices(common.load(args.pipelines, args), args)
    explanations = api.explain(pipelines, common.options(args))
    runs = [e for e in explanations if e.would_run and not e.cached]
    # checks are judged on the figures built now only where no task would change them
    stale = {e.name.split(":")[0] for e in explanations if e.would_run}
    checked = [o for o in api.current_checks(pipelines) if o.name not in stale and o.metrics is not None]
    failing = [o for o in checked if not o.checks_ok]
    print_explanations(explanations, args.json, dry_run=False, failing=failing)
    return 1 if args.check and (runs or failing) else 0


def _status_word(e: Explanation, dry_run: bool) -> str:
    if dry_run:
        return "skipped"
    return "cached" if e.cached else ("outdated" if e.would_run else "up-to-date")


def print_explanations(explanations: list[Explanation], as_json: bool, dry_run: bool,
                       failing: list[Any] | None = None) -> int:
    """One line per task and why; a task the artifact cache will restore says only that (its local state's
    "never built" is why it is restored, not a second verdict). ``failing``: pipelines whose checks fail on
    the figures built now (a threshold changed since the last run), which ``run`` would fail."""
    failing = failing or []
    if as_json:
        tasks = [{"name": e.name, "status": _status_word(e, dry_run), "would_run": e.would_run and not e.cached,
                  "cached": e.cached, "reasons": _reasons(e)} for e in explanations]
        checks = [{"pipeline": o.name, "checks": [c.as_json() for c in o.checks]} for o in failing]
        print(json.dumps({"ok": not failing, "dry_run": dry_run, "tasks": tasks, "failing_checks": checks},
                         indent=2))
        return 0
    for e in explanations:
        if e.would_run:
            print(f"cached      {e.name}  (the artifact cache holds its outputs for these inputs: restored, not run)"
                  if e.cached else f"would run   {e.name}")
            for reason in _reasons(e):
                print(f"              {reason}")
        else:
            print(f"up-to-date  {e.name}")
    from accelbuild.engine.metrics import check_table

    for item in failing:
        print(check_table(f"{item.name} (figures built now; run exits 1)", item.checks))
    return 0


def _reasons(e: Explanation) -> list[str]:
    """What changed since the task last ran here; for a task the cache restores, the state dir's "never
    built" is dropped (the cache entry is what counts)."""
    if not e.cached:
        return list(e.reasons)
    return [r if r.startswith("restorable") else f"changed since it was last built here: {r}"
            for r in e.reasons if not r.startswith("never built")]
