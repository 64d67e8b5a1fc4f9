"""Command line: argument parsing and exit codes only; the work is in ``accelbuild.engine``.

Exit codes: 0 success, 1 a stage or a check failed, 2 bad usage, config or input file, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from accelbuild import __version__
from accelbuild.errors import AccelbuildError, InputFileError, UserError, render_user_error
from accelbuild.stages.declaration import STAGE_ORDER as STAGES

if TYPE_CHECKING:
    from accelbuild.families import ProgramFile

log = logging.getLogger("accelbuild")

EXIT_CODES = ("exit codes: 0 success; 1 a stage failed (or a check failed); 2 bad usage, bad config or bad input "
              "file; 130 interrupted (Ctrl-C)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelbuild",
        description="Declarative, incremental builds of neural networks for edge accelerators.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"accelbuild {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details (anywhere on the line)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="only failures, warnings and the summary line (anywhere on the line)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    state = argparse.ArgumentParser(add_help=False)
    state.add_argument("--state-dir", type=Path, help="doit state (default .accelbuild, or $ACCELBUILD_STATE_DIR)")
    state.add_argument("--cache-dir", type=Path,
                       help="artifact cache (default STATE_DIR/cache, or $ACCELBUILD_CACHE_DIR)")

    remote = _remote_options()
    run = sub.add_parser("run", parents=[state, remote], help="build pipelines")
    run.add_argument("pipelines", nargs="+", metavar="PIPELINE.yaml")
    run.add_argument("-j", "--jobs", type=_positive_int, default=1, metavar="N", help="tasks run in parallel")
    run.add_argument("--force", action="store_true", help="rebuild every task, ignoring state and cache")
    run.add_argument("--until", choices=STAGES, metavar="STAGE",
                     help=f"build up to and including this stage ({', '.join(STAGES)})")
    run.add_argument("--keep-going", action="store_true", help="after a failure, build what does not depend on it")
    run.add_argument("--dry-run", action="store_true", help="show what would run, run nothing")
    run.add_argument("--json", action="store_true", help="print a JSON summary to stdout")
    run.add_argument("--show-mapping", action="store_true",
                     help="print each pipeline's core utilisation grid (stderr; stdout without --json)")

    validate = sub.add_parser("validate", help="check configs and the files they reference")
    validate.add_argument("pipelines", nargs="+", metavar="PIPELINE.yaml")

    migrate = sub.add_parser("migrate", help="rewrite format-1 pipeline files into format 2 in place, comments kept")
    migrate.add_argument("pipelines", nargs="+", metavar="PIPELINE.yaml")

    status = sub.add_parser("status", parents=[state, remote], help="which tasks would run, and why")
    status.add_argument("pipelines", nargs="+", metavar="PIPELINE.yaml")
    status.add_argument("--json", action="store_true", help="print JSON to stdout")
    status.add_argument("--check", action="store_true",
                        help="exit 1 when any task would run (restored from the cache counts as not running)")

    clean = sub.add_parser("clean", parents=[state], help="remove build outputs")
    clean.add_argument("pipelines", nargs="+", metavar="PIPELINE.yaml")
    clean.add_argument("--cache", action="store_true", help="also remove the artifact cache")

    inspect = sub.add_parser("inspect", help="print a program file's header, models, ports and sections (a DFP, an "
                                             "npu package: whatever the file's target family reads)")
    inspect.add_argument("dfp", metavar="FILE")

    bench = sub.add_parser("bench", help="simulate a compiled program file (a DFP, an npu package), like a device "
                                         "benchmark tool")
    bench.add_argument("dfp", metavar="FILE")
    bench.add_argument("--frames", type=_positive_int, metavar="N",
                       help="frames to simulate (default: the DFP's simcfg, else 200)")
    bench.add_argument("--json", action="store_true", help="print JSON to stdout")

    sub.add_parser("schema", help="print the pipeline JSON Schema")

    compare = sub.add_parser("compare", help="figures of two builds (or every variant of a matrix) side by side")
    compare.add_argument("builds", nargs="+", metavar="FOLDER|PIPELINE.yaml",
                         help="two output folders, two pipelines, or one matrix pipeline")
    compare.add_argument("--json", action="store_true", help="print JSON to stdout")

    tensors = sub.add_parser("tensors", help="list a model's inputs, outputs and candidate crop tensors")
    tensors.add_argument("model", metavar="MODEL")
    tensors.add_argument("--json", action="store_true", help="print JSON to stdout")
    tensors.add_argument("--input-shape", type=_input_shape, action="append", default=[], metavar="NAME=H,W,C",
                         help="shape of a dynamic input, channel-last without batch (repeatable)")

    _add_cache_commands(sub, state)
    _add_toolchain_commands(sub, state)

    init = sub.add_parser("init", help="write a starter pipeline for a model file")
    init.add_argument("model", metavar="MODEL")
    init.add_argument("-o", "--output", metavar="P.yaml", help="where to write it (default: MODEL's stem + .yaml)")
    init.add_argument("--input-shape", type=_input_shape, action="append", default=[], metavar="NAME=H,W,C",
                      help="shape of a dynamic input, channel-last without batch (repeatable)")
    init.add_argument("--family", default="mx3", metavar="F",
                      help="target family: mx3 (default), npu, ethos-u, cpu, rknn or qnn")
    init.add_argument("--platform", metavar="P", help="npu: the platform (required; e.g. tda4vm, x5); ethos-u: "
                                                      "the Vela accelerator config (default ethos-u55-128); rknn: "
                                                      "the SoC (default rk3588); qnn: the SoC (default sm8650)")
    init.add_argument("--data", metavar="DIR", help="a folder of representative inputs (images or .npy)")
    return parser


# The largest dimension: frontends.input_shapes.MAX_TENSOR_ELEMENTS (not imported here, to keep parsing light),
# the most elements one tensor may hold, as the schema's input_shapes says.
MAX_DIMENSION = 1 << 28


def _input_shape(text: str) -> tuple[str, list[int]]:
    name, sep, dims = text.partition("=")
    try:
        shape = [int(d) for d in dims.split(",")]
    except ValueError:
        shape = []
    if not sep or not name or not shape or any(d < 1 or d > MAX_DIMENSION for d in shape):
        raise argparse.ArgumentTypeError(f"expected NAME=H,W,C (whole numbers 1..{MAX_DIMENSION}), got {text!r}")
    return name, shape


def _remote_options() -> argparse.ArgumentParser:
    """``--remote-cache`` and ``--executor`` (beyond one machine; see docs/remote.md)."""
    remote = argparse.ArgumentParser(add_help=False)
    remote.add_argument("--remote-cache", metavar="URL",
                        help="shared artifact cache at an fsspec URL: s3://bucket/prefix, gs://..., file:///... "
                             "(or $ACCELBUILD_REMOTE_CACHE)")
    remote.add_argument("--executor", metavar="dask://HOST:PORT",
                        help="run tasks on a Dask cluster (or $ACCELBUILD_EXECUTOR; 'local' for this machine)")
    remote.add_argument("--device-farm", metavar="dask://HOST:PORT",
                        help="the Dask scheduler whose workers are the devices of benchmark.device (overrides "
                             "benchmark.device.farm; docs/devices.md)")
    return remote


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _options(args: argparse.Namespace):  # -> RunOptions, imported lazily with the build machinery
    from accelbuild.engine.doit_backend import RunOptions
    from accelbuild.engine.state import default_cache_dir, project_root

    root = project_root()
    state_dir = _state_dir(args, root)
    cache_dir = args.cache_dir or default_cache_dir(state_dir)
    return RunOptions(
        root=root,
        state_dir=state_dir.absolute(),
        cache_dir=cache_dir.absolute(),
        jobs=getattr(args, "jobs", 1),
        force=getattr(args, "force", False),
        keep_going=getattr(args, "keep_going", False),
        remote_cache=_remote_cache_url(args),
        executor=_executor_address(args),
    )


def _option_or_env(args: argparse.Namespace, attribute: str, option: str, variable: str) -> tuple[str, str] | None:
    """(value, where it came from): the option, else the environment variable, for commands that take it."""
    if not hasattr(args, attribute):
        return None
    text, source = getattr(args, attribute), option
    if text is None:
        text, source = os.environ.get(variable), variable
    return (text, source) if text else None


def _remote_cache_url(args: argparse.Namespace) -> str | None:
    """``--remote-cache``, else ``$ACCELBUILD_REMOTE_CACHE``."""
    given = _option_or_env(args, "remote_cache", "--remote-cache", "ACCELBUILD_REMOTE_CACHE")
    if given is None:
        return None
    from accelbuild.engine.remote_cache import parse_url

    return parse_url(*given)


def _executor_address(args: argparse.Namespace) -> str | None:
    """``--executor``, else ``$ACCELBUILD_EXECUTOR``."""
    given = _option_or_env(args, "executor", "--executor", "ACCELBUILD_EXECUTOR")
    if given is None:
        return None
    from accelbuild.engine.dask_executor import parse

    return parse(*given)


def _load(paths: list[str], args: argparse.Namespace | None = None):
    """The pipelines; with ``args`` of a command that has a state dir (run, status), configs validated by an
    earlier command are not validated again (``accelbuild.config.validated``)."""
    from accelbuild.config.load import load_pipelines

    validated = None
    if args is not None and hasattr(args, "state_dir"):
        from accelbuild.config.validated import ValidatedConfigs

        validated = ValidatedConfigs(_state_dir(args) / "validated_configs")
    return load_pipelines(paths, validated)


def _with_devices(pipelines: list, args: argparse.Namespace) -> list:
    """The pipelines with their ``benchmark.device`` resolved on its farm (exit 2 before any build work when
    the farm or the device cannot be reached; docs/devices.md)."""
    farm = getattr(args, "device_farm", None)
    if farm is not None:
        from accelbuild.engine.dask_executor import parse

        farm = parse(farm, "--device-farm")
    if farm is None and not any(p.benchmark.device is not None for p in pipelines):
        return pipelines
    from accelbuild.engine import devices

    return devices.resolve(pipelines, farm)


def _state_dir(args: argparse.Namespace, root: Path | None = None) -> Path:
    """``--state-dir``, else the project's (``.accelbuild/`` at its root)."""
    from accelbuild.engine.state import default_state_dir, project_root

    return Path(args.state_dir) if args.state_dir else default_state_dir(root or project_root())


def cmd_run(args: argparse.Namespace) -> int:
    _refuse_model_files(args.pipelines, "run")
    if args.dry_run:
        from accelbuild.engine import api

        return _print_explanations(api.explain(_with_devices(_load(args.pipelines, args), args), _options(args),
                                               args.until), args.json, dry_run=True)
    if args.force or args.show_mapping or args.verbose or args.device_farm:  # a device is looked up every run
        return _run(args, None)
    from accelbuild.engine import stamp

    started = time.monotonic()
    invocation = stamp.invocation(args.argv, _state_dir(args))
    replayed = stamp.replay(invocation)  # nothing moved since the same command last ran: what it printed
    if replayed is not None:
        return replayed.print(sys.stdout, sys.stderr, time.monotonic() - started)
    stamp.drop(invocation)
    return _run(args, stamp.Watch(invocation))


def _run(args: argparse.Namespace, watch) -> int:
    """``run`` in full; with ``watch`` (a ``stamp.Watch``), loading and planning are watched and the
    run's verdict is stamped for the no-op fast path."""
    from accelbuild.engine import api, plan
    from accelbuild.engine.doit_backend import DB_NAME

    with watch or contextlib.nullcontext():
        pipelines = _load(args.pipelines, args)
        options = _options(args)
        if args.device_farm or any(p.benchmark.device is not None for p in pipelines):
            watch = None  # which device answers is looked up every run: no no-op replay
            pipelines = _with_devices(pipelines, args)
        built = plan.build_plan(pipelines, args.until)
        if watch is not None:
            watch.planned(built.jobs)
    started = time.monotonic()
    summary = api.run(pipelines, options, args.until, quiet=args.quiet, built=built)
    sys.stderr.write(_failures_text(summary) + summary.line(time.monotonic() - started) + "\n")
    if args.show_mapping:
        _show_mappings(pipelines, sys.stderr if args.json else sys.stdout)
    sys.stdout.write(_json_text(summary) if args.json else "")
    if watch is not None and summary.tasks_ok:
        watch.record(_as_replayed(summary.as_noop(), built.jobs, watch.log_lines, args),
                     options.state_dir / DB_NAME)
    return summary.exit_code


def _as_replayed(noop, jobs, log_lines: list[str], args: argparse.Namespace):
    """What ``run`` prints for ``noop`` (a RunSummary with every task up to date), as a ``stamp.Replay``."""
    from accelbuild.engine.doit_backend import name_width, task_line
    from accelbuild.engine.stamp import Replay

    width = name_width(jobs)
    tasks = [] if args.quiet else [task_line(r.name, width, r.status, r.seconds) for r in noop.results]
    return Replay(stderr="".join([*log_lines, *tasks, *noop.notes, _failures_text(noop)]), closing=noop.head(),
                  stdout=_json_text(noop) if args.json else "", exit_code=noop.exit_code)


def _failures_text(summary) -> str:
    """The line naming every failure of a run (empty when none failed)."""
    failures = summary.failures()
    return f"{failures}\n" if failures else ""


def _json_text(summary) -> str:
    """``run --json``'s output."""
    return json.dumps(summary.as_json(), indent=2) + "\n"


def _show_mappings(pipelines, stream) -> None:
    for pipeline in pipelines:
        view = pipeline.target_impl.show_mapping(pipeline.output.dir)
        stream.write(f"{pipeline.name}: " + (view if view is not None else
                                             f"family {pipeline.target.family} has no mapping view\n"))


def cmd_validate(args: argparse.Namespace) -> int:
    from accelbuild.engine.preflight import check_models

    pipelines = _load(args.pipelines)
    check_models(pipelines)
    for pipeline in pipelines:
        models = ", ".join(m.name for m in pipeline.models)
        print(f"{pipeline.source.file}: ok (pipeline {pipeline.name}; models: {models})")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from accelbuild.engine import api

    _refuse_model_files(args.pipelines, "status")
    pipelines = _with_devices(_load(args.pipelines, args), args)
    explanations = api.explain(pipelines, _options(args))
    runs = [e for e in explanations if e.would_run and not e.cached]
    # checks are judged on the figures built now only where no task would change them
    stale = {e.name.split(":")[0] for e in explanations if e.would_run}
    checked = [o for o in api.current_checks(pipelines) if o.name not in stale and o.metrics is not None]
    failing = [o for o in checked if not o.checks_ok]
    _print_explanations(explanations, args.json, dry_run=False, failing=failing)
    return 1 if args.check and (runs or failing) else 0


def _status_word(e, dry_run: bool) -> str:
    if dry_run:
        return "skipped"
    return "cached" if e.cached else ("outdated" if e.would_run else "up-to-date")


def _print_explanations(explanations, as_json: bool, dry_run: bool, failing: list | None = None) -> int:
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


def _reasons(e) -> list[str]:
    """What changed since the task last ran here; for a task the cache restores, the state dir's "never
    built" is dropped (the cache entry is what counts)."""
    if not e.cached:
        return list(e.reasons)
    return [r if r.startswith("restorable") else f"changed since it was last built here: {r}"
            for r in e.reasons if not r.startswith("never built")]


def _refuse_model_files(paths: list[str], command: str) -> None:
    """``run model.onnx``: say a pipeline YAML was expected (and how to get one)."""
    from accelbuild.config.spec import MODEL_FORMATS

    for path in paths:
        if Path(path).suffix.lower() in MODEL_FORMATS:
            raise InputFileError(path, f"a model file; `accelbuild {command}` takes pipeline YAML files "
                                       f"(write one with `accelbuild init {path}`)")


def cmd_tensors(args: argparse.Namespace) -> int:
    from accelbuild.engine import model_info

    info = model_info.read_model(Path(args.model), dict(args.input_shape))
    sys.stdout.write(json.dumps(info.as_json(), indent=2) + "\n" if args.json else model_info.describe(info))
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from accelbuild.engine import model_info
    from accelbuild.util.files import write_bytes_atomic

    model = Path(args.model)
    out = Path(args.output) if args.output else Path(f"{model.stem}.yaml")
    if out.exists():
        raise InputFileError(out, "already exists; give another name with -o (init never overwrites)")
    _init_target(args)
    data = Path(args.data) if args.data else None
    data_kind = _init_data_kind(args.data) if args.data else "images"
    info = model_info.read_model(model, dict(args.input_shape))
    text = model_info.starter_pipeline(info, out, args.family, args.platform, data, data_kind)
    _checked_pipeline(text, out)
    write_bytes_atomic(out, text.encode("utf-8"))
    print(f"wrote {out}: family {args.family}, {len(info.inputs)} input(s); suggested crop points are commented in it")
    return 0


def _init_data_kind(folder: str) -> str:
    """``images`` or ``npy``: what --data holds, listed as a build will list it (exit 2 for a missing
    folder, or one with no images or .npy arrays: the pipeline would not build as written)."""
    from accelbuild.data.files import scan
    from accelbuild.data.spec import DataSpec

    if not Path(folder).is_dir():
        raise InputFileError(folder, "no such folder (--data takes a folder of images or .npy arrays)")
    return scan(DataSpec(Path(folder).absolute(), folder)).kind


def _init_target(args: argparse.Namespace) -> None:
    """--family and --platform, checked before the model is read (the written pipeline is validated too)."""
    from accelbuild.config.schema_check import did_you_mean
    from accelbuild.engine import model_info

    if args.family not in model_info.TARGETS:
        raise UserError(f"init: unknown --family {args.family!r} (one of: {', '.join(model_info.TARGETS)})"
                        f"{did_you_mean(args.family, list(model_info.TARGETS))}")
    if args.family == "npu" and not args.platform:
        raise UserError("init: --family npu needs --platform P: a built-in platform (am62a, am68a, mlsoc, "
                        "tda4vm, x3, x5; docs/npu.md) or a profile .yaml")
    if args.platform and args.family not in ("npu", *model_info.DEFAULT_PLATFORMS):
        raise UserError(f"init: --platform applies to --family npu, {', '.join(model_info.DEFAULT_PLATFORMS)}, not "
                        f"{args.family}")


def _checked_pipeline(text: str, out: Path) -> None:
    """The written pipeline loads as a run would load it (a wrong --platform is said now, as init's)."""
    import tempfile

    from accelbuild.config.load import load_pipelines
    from accelbuild.errors import ConfigError, ConfigErrors

    folder = out.absolute().parent
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=folder, delete=False) as handle:
        handle.write(text)
    try:
        load_pipelines([handle.name])
    except (ConfigError, ConfigErrors) as exc:
        errors = exc.errors if isinstance(exc, ConfigErrors) else [exc]
        raise UserError("init: " + "; ".join(e.message for e in errors)) from None
    finally:
        Path(handle.name).unlink()


def cmd_cache_usage(args: argparse.Namespace) -> int:
    """``cache info`` and ``cache gc``."""
    from accelbuild.engine.cache import ArtifactCache

    options = _options(args)
    cache = ArtifactCache(options.cache_dir)
    if args.cache_command == "info":
        usage = cache.usage()
        print(f"{options.cache_dir}: {usage.entries} entries, {usage.objects} objects, {_size_text(usage.bytes)} "
              f"stored ({_size_text(usage.logical)} of files as restored)")
        return 0
    if args.max_size is None and args.older_than is None:
        raise InputFileError("cache gc", "give --max-size SIZE and/or --older-than DAYS")
    result = cache.gc(args.max_size, None if args.older_than is None else args.older_than * 86400)
    print(f"removed {result.entries_removed} entries and {result.objects_removed} objects; "
          f"{result.left.entries} entries, {_size_text(result.left.bytes)} left")
    return 0


def _size_text(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def _size(text: str) -> int:
    units = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
             "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TB": 1 << 40}
    number = text.strip().upper().rstrip("BIKMGT") or "x"
    unit = text.strip().upper()[len(number):]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in units or value < 0:
        raise argparse.ArgumentTypeError(f"expected a size such as 500M or 2G, got {text!r}")
    return int(value * units[unit])


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {text!r}")
    return value


def cmd_compare(args: argparse.Namespace) -> int:
    from accelbuild.engine import compare

    sides = compare.sides_of(args.builds)
    sys.stdout.write(compare.dumps(sides) + "\n" if args.json else compare.text(sides))
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from accelbuild.engine import api

    removed = api.clean(_load(args.pipelines), _options(args), args.cache)
    print(f"removed {len(removed)} file(s)" + (" and the cache" if args.cache else ""))
    return 0


def _program_file(path: str) -> tuple[str, ProgramFile]:
    """The family and kind of program file ``path`` is (by its first bytes, else its name)."""
    from accelbuild.families import program_file, registered

    found = program_file(Path(path))
    if found is None:
        if not Path(path).is_file():
            raise InputFileError(path, "no such file")
        kinds = [f"{k.description} ({', '.join(k.suffixes)})" for f in registered().values() for k in f.target.files]
        raise InputFileError(path, f"not a program file of any target family; expected one of: {'; '.join(kinds)}")
    return found


def cmd_inspect(args: argparse.Namespace) -> int:
    from accelbuild.config.spec import MODEL_FORMATS
    from accelbuild.families import handler, program_file

    if Path(args.dfp).suffix.lower() in MODEL_FORMATS and program_file(Path(args.dfp)) is None:
        from accelbuild.engine import model_info  # a model, not a compiled program: describe it as tensors does

        info = model_info.read_model(Path(args.dfp))
        sys.stdout.write(f"{args.dfp}: a model file, not a compiled program (`accelbuild run` builds one); "
                         f"as accelbuild imports it:\n" + model_info.describe(info))
        return 0
    _, kind = _program_file(args.dfp)
    sys.stdout.write(handler(kind.inspect)(Path(args.dfp), args.dfp))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from accelbuild.families import handler

    family, kind = _program_file(args.dfp)
    if kind.bench is None:
        raise InputFileError(args.dfp, f"a {kind.description}; family {family} has no simulator to bench it with")
    report, text = handler(kind.bench)(Path(args.dfp), args.dfp, args.frames)
    sys.stdout.write(json.dumps(report, indent=2) + "\n" if args.json else text)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """The pipeline schema with every registered family (the packaged file when only accelbuild's own are)."""
    from accelbuild.config.schema_assembly import dumps, pipeline_schema

    sys.stdout.write(dumps(pipeline_schema()))
    return 0


# -- cache push / pull: seeding a shared remote cache (self-contained block) ---------------------------


def _add_toolchain_commands(sub: argparse._SubParsersAction, state: argparse.ArgumentParser) -> None:
    tool = sub.add_parser("toolchain", help="vendor toolchain environments: list, install")
    tool_sub = tool.add_subparsers(dest="toolchain_command", required=True, metavar="TOOLCHAIN_COMMAND")
    tool_sub.add_parser("list", parents=[state], help="each family's toolchain, installed or not")
    install = tool_sub.add_parser("install", parents=[state], help="create a family's toolchain environment")
    install.add_argument("name", metavar="NAME", help="the toolchain (its family's name, e.g. rknn)")
    install.add_argument("--force", action="store_true", help="create it again even if it is installed")


def cmd_toolchain(args: argparse.Namespace) -> int:
    from accelbuild.engine.state import default_cache_dir
    from accelbuild.toolchains import commands, environment

    where = None if os.environ.get(environment.ROOT_ENV) and not args.cache_dir else \
        environment.root(args.cache_dir or default_cache_dir(_state_dir(args)))
    if args.toolchain_command == "list":
        sys.stdout.write(commands.listing(where))
    else:
        sys.stdout.write(commands.install_named(args.name, args.force, where))
    return 0


def _add_cache_commands(sub: argparse._SubParsersAction, state: argparse.ArgumentParser) -> None:
    cache = sub.add_parser("cache", help="the artifact cache: info, gc, push, pull")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True, metavar="CACHE_COMMAND")
    cache_sub.add_parser("info", parents=[state], help="entries, objects and size of the cache")
    gc = cache_sub.add_parser("gc", parents=[state], help="evict least recently used entries")
    gc.add_argument("--max-size", type=_size, metavar="SIZE", help="keep at most this much (500M, 2G, ...)")
    gc.add_argument("--older-than", type=_days, metavar="DAYS", help="evict entries unused for this many days")
    for name, text in (("push", "upload every local cache entry the remote cache lacks"),
                       ("pull", "download every remote cache entry the local cache lacks (verified)")):
        command = cache_sub.add_parser(name, parents=[state], help=text)
        command.add_argument("--remote-cache", metavar="URL", help="the remote cache (or $ACCELBUILD_REMOTE_CACHE)")


def cmd_cache(args: argparse.Namespace) -> int:
    return CACHE_COMMANDS[args.cache_command](args)


def _cache_pair(args: argparse.Namespace):
    from accelbuild.engine.cache import ArtifactCache
    from accelbuild.engine.remote_cache import RemoteSpec, RemoteStore

    url = _remote_cache_url(args)
    if url is None:
        raise UserError("accelbuild cache: no remote cache (give --remote-cache URL or set ACCELBUILD_REMOTE_CACHE)")
    return ArtifactCache(_options(args).cache_dir), RemoteStore(RemoteSpec(url))


def cmd_cache_push(args: argparse.Namespace) -> int:
    local, remote = _cache_pair(args)
    entries, uploaded = remote.push_all(local)
    print(f"pushed {entries} entr{'y' if entries == 1 else 'ies'} to {remote.url} ({uploaded} bytes uploaded)")
    return 0


def cmd_cache_pull(args: argparse.Namespace) -> int:
    local, remote = _cache_pair(args)
    fetched, damaged = remote.pull_all(local)
    print(f"pulled {fetched} entr{'y' if fetched == 1 else 'ies'} from {remote.url} into {local.root}"
          + (f"; {damaged} damaged or incomplete, skipped" if damaged else ""))
    return 0


CACHE_COMMANDS = {"push": cmd_cache_push, "pull": cmd_cache_pull, "info": cmd_cache_usage, "gc": cmd_cache_usage}

# -- end of cache push / pull ---------------------------------------------------------------------------


def cmd_migrate(args: argparse.Namespace) -> int:
    from accelbuild.config.migrate import migrate_files

    print("\n".join(migrate_files(args.pipelines)))
    return 0


COMMANDS = {
    "run": cmd_run,
    "validate": cmd_validate,
    "migrate": cmd_migrate,
    "status": cmd_status,
    "clean": cmd_clean,
    "inspect": cmd_inspect,
    "bench": cmd_bench,
    "schema": cmd_schema,
    "compare": cmd_compare,
    "cache": cmd_cache,
    "tensors": cmd_tensors,
    "init": cmd_init,
    "toolchain": cmd_toolchain,
}


class _Formatter(logging.Formatter):
    """``accelbuild: message`` for notes, ``accelbuild: warning: message`` for warnings."""

    def format(self, record: logging.LogRecord) -> str:
        level = "" if record.levelno == logging.INFO else f"{record.levelname.lower()}: "
        return f"accelbuild: {level}{_once(record.getMessage())}"


_REPEATED_PREFIX = re.compile(r"^([^:\s][^:]*): \1: ")


def _once(message: str) -> str:
    """``yolo: yolo: ...`` (a pipeline named after its one model) as ``yolo: ...``."""
    return _REPEATED_PREFIX.sub(r"\1: ", message)


def _setup_logging(verbose: bool, quiet: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("accelbuild").setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)


def _verbosity(argv: list[str]) -> tuple[list[str], bool, bool]:
    """-v/--verbose and -q/--quiet anywhere on the line (before a ``--``), taken out of ``argv``."""
    rest, verbose, quiet, literal = [], False, False, False
    for arg in argv:
        if not literal and arg in ("-v", "--verbose"):
            verbose = True
        elif not literal and arg in ("-q", "--quiet"):
            quiet = True
        else:
            literal = literal or arg == "--"
            rest.append(arg)
    return rest, verbose, quiet


def main(argv: Sequence[str] | None = None) -> int:
    rest, verbose, quiet = _verbosity(list(sys.argv[1:] if argv is None else argv))
    args = _parser().parse_args(rest)
    args.verbose, args.quiet = verbose, quiet and not verbose
    args.argv = [*rest, *(["-v"] if args.verbose else []), *(["-q"] if args.quiet else [])]
    _setup_logging(args.verbose, args.quiet)
    try:
        return COMMANDS[args.command](args)
    except UserError as exc:
        sys.stderr.write(render_user_error(exc) + "\n")
        return 2
    except AccelbuildError as exc:
        sys.stderr.write(f"accelbuild: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("accelbuild: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
