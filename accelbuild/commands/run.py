"""``accelbuild run``: build the pipelines, or replay a no-op run (``engine/stamp.py``)."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import TYPE_CHECKING, TextIO

from accelbuild.commands import common, status

if TYPE_CHECKING:
    from accelbuild.config.spec import PipelineSpec
    from accelbuild.engine.stamp import Watch


def main(args: argparse.Namespace) -> int:
    common.refuse_model_files(args.pipelines, "run")
    if args.dry_run:
        from accelbuild.engine import api

        pipelines = common.with_devices(common.load(args.pipelines, args), args)
        return status.print_explanations(api.explain(pipelines, common.options(args), args.until), args.json,
                                         dry_run=True)
    if args.force or args.show_mapping or args.verbose or args.device_farm:  # a device is looked up every run
        return _run(args, None)
    from accelbuild.engine import stamp

    started = time.monotonic()
    invocation = stamp.invocation(args.argv, common.state_dir(args))
    replayed = stamp.replay(invocation)  # nothing moved since the same command last ran: what it printed
    if replayed is not None:
        return replayed.print(sys.stdout, sys.stderr, time.monotonic() - started)
    stamp.drop(invocation)
    return _run(args, stamp.Watch(invocation))


def _run(args: argparse.Namespace, watch: Watch | None) -> int:
    """``run`` in full; with ``watch``, loading and planning are watched and the run's verdict is stamped
    for the no-op fast path."""
    from accelbuild.engine import api, plan
    from accelbuild.engine.doit_backend import DB_NAME

    with watch or contextlib.nullcontext():
        pipelines = common.load(args.pipelines, args)
        options = common.options(args)
        if args.device_farm or any(p.benchmark.device is not None for p in pipelines):
            watch = None  # which device answers is looked up every run: no no-op replay
            pipelines = common.with_devices(pipelines, args)
        built = plan.build_plan(pipelines, args.until)
        if watch is not None:
            watch.planned(built.jobs)
    started = time.monotonic()
    summary = api.run(pipelines, options, args.until, quiet=args.quiet, built=built)
    sys.stderr.write(api.failures_text(summary) + summary.line(time.monotonic() - started) + "\n")
    if args.show_mapping:
        _show_mappings(pipelines, sys.stderr if args.json else sys.stdout)
    sys.stdout.write(api.json_text(summary) if args.json else "")
    if watch is not None and summary.tasks_ok:
        watch.record(api.as_replay(summary.as_noop(), built.jobs, watch.log_lines, args.quiet, args.json),
                     options.state_dir / DB_NAME)
    return summary.exit_code


def _show_mappings(pipelines: list[PipelineSpec], stream: TextIO) -> None:
    for pipeline in pipelines:
        view = pipeline.target_impl.show_mapping(pipeline.output.dir)
        stream.write(f"{pipeline.name}: " + (view if view is not None else
                                             f"family {pipeline.target.family} has no mapping view\n"))
