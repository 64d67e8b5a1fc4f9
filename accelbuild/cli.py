"""Command line: argument parsing, dispatch and exit codes only; each command is a module of
``accelbuild.commands`` (calling ``accelbuild.api`` and the engine).

Exit codes: 0 success, 1 a stage or a check failed, 2 bad usage, config or input file, 130 interrupted.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from accelbuild import __version__
from accelbuild.commands import init
from accelbuild.commands.arguments import days, input_shape, positive_int, size
from accelbuild.errors import AccelbuildError, UserError, render_user_error
from accelbuild.stages.declaration import STAGE_ORDER as STAGES

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
    run_ = sub.add_parser("run", parents=[state, remote], help="build pipelines")
    run_.add_argument("pipelines", nargs="+", metavar="PIPELINE.yaml")
    run_.add_argument("-j", "--jobs", type=positive_int, default=1, metavar="N", help="tasks run in parallel")
    run_.add_argument("--force", action="store_true", help="rebuild every task, ignoring state and cache")
    run_.add_argument("--until", choices=STAGES, metavar="STAGE",
                     help=f"build up to and including this stage ({', '.join(STAGES)})")
    run_.add_argument("--keep-going", action="store_true", help="after a failure, build what does not depend on it")
    run_.add_argument("--dry-run", action="store_true", help="show what would run, run nothing")
    run_.add_argument("--json", action="store_true", help="print a JSON summary to stdout")
    run_.add_argument("--show-mapping", action="store_true",
                     help="print each pipeline's core utilisation grid (stderr; stdout without --json)")

    check = sub.add_parser("validate", help="check configs and the files they reference")
    check.add_argument("pipelines", nargs="+", metavar="PIPELINE.yaml")

    migrate = sub.add_parser("migrate", help="rewrite format-1 pipeline files into format 2 in place, comments kept")
    migrate.add_argument("pipelines", nargs="+", metavar="PIPELINE.yaml")

    stat = sub.add_parser("status", parents=[state, remote], help="which tasks would run, and why")
    stat.add_argument("pipelines", nargs="+", metavar="PIPELINE.yaml")
    stat.add_argument("--json", action="store_true", help="print JSON to stdout")
    stat.add_argument("--check", action="store_true",
                        help="exit 1 when any task would run (restored from the cache counts as not running)")

    remove = sub.add_parser("clean", parents=[state], help="remove build outputs")
    remove.add_argument("pipelines", nargs="+", metavar="PIPELINE.yaml")
    remove.add_argument("--cache", action="store_true", help="also remove the artifact cache")

    describe = sub.add_parser("inspect", help="print a program file's header, models, ports and sections "
                                              "(whatever the file's target family reads)")
    describe.add_argument("dfp", metavar="FILE")

    simulate = sub.add_parser("bench", help="simulate a compiled program file, like a device benchmark tool")
    simulate.add_argument("dfp", metavar="FILE")
    simulate.add_argument("--frames", type=positive_int, metavar="N",
                          help="frames to simulate (default: the program file's own setting, else 200)")
    simulate.add_argument("--json", action="store_true", help="print JSON to stdout")

    sub.add_parser("schema", help="print the pipeline JSON Schema")

    sides = sub.add_parser("compare", help="figures of two builds (or every variant of a matrix) side by side")
    sides.add_argument("builds", nargs="+", metavar="FOLDER|PIPELINE.yaml",
                       help="two output folders, two pipelines, or one matrix pipeline")
    sides.add_argument("--json", action="store_true", help="print JSON to stdout")

    model = sub.add_parser("tensors", help="list a model's inputs, outputs and candidate crop tensors")
    model.add_argument("model", metavar="MODEL")
    model.add_argument("--json", action="store_true", help="print JSON to stdout")
    model.add_argument("--input-shape", type=input_shape, action="append", default=[], metavar="NAME=H,W,C",
                       help="shape of a dynamic input, channel-last without batch (repeatable)")

    _add_cache_commands(sub, state)
    _add_toolchain_commands(sub, state)

    starter = sub.add_parser("init", help="write a starter pipeline for a model file",
                             formatter_class=init.HelpFormatter)
    starter.add_argument("model", metavar="MODEL")
    starter.add_argument("-o", "--output", metavar="P.yaml", help="where to write it (default: MODEL's stem + .yaml)")
    starter.add_argument("--input-shape", type=input_shape, action="append", default=[], metavar="NAME=H,W,C",
                         help="shape of a dynamic input, channel-last without batch (repeatable)")
    starter.add_argument("--family", metavar="F", help="the target family")  # help: init.HelpFormatter
    starter.add_argument("--platform", metavar="P", help="the family's platform")
    starter.add_argument("--data", metavar="DIR", help="a folder of representative inputs (images or .npy)")
    return parser


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


def _add_toolchain_commands(sub: argparse._SubParsersAction, state: argparse.ArgumentParser) -> None:
    tool = sub.add_parser("toolchain", help="vendor toolchain environments: list, install")
    tool_sub = tool.add_subparsers(dest="toolchain_command", required=True, metavar="TOOLCHAIN_COMMAND")
    tool_sub.add_parser("list", parents=[state], help="each family's toolchain, installed or not")
    install = tool_sub.add_parser("install", parents=[state], help="create a family's toolchain environment")
    install.add_argument("name", metavar="NAME", help="the toolchain (its family's name; `toolchain list` names them)")
    install.add_argument("--force", action="store_true", help="create it again even if it is installed")


def _add_cache_commands(sub: argparse._SubParsersAction, state: argparse.ArgumentParser) -> None:
    store = sub.add_parser("cache", help="the artifact cache: info, gc, push, pull")
    cache_sub = store.add_subparsers(dest="cache_command", required=True, metavar="CACHE_COMMAND")
    cache_sub.add_parser("info", parents=[state], help="entries, objects and size of the cache")
    gc = cache_sub.add_parser("gc", parents=[state], help="evict least recently used entries")
    gc.add_argument("--max-size", type=size, metavar="SIZE", help="keep at most this much (500M, 2G, ...)")
    gc.add_argument("--older-than", type=days, metavar="DAYS", help="evict entries unused for this many days")
    for name, text in (("push", "upload every local cache entry the remote cache lacks"),
                       ("pull", "download every remote cache entry the local cache lacks (verified)")):
        command = cache_sub.add_parser(name, parents=[state], help=text)
        command.add_argument("--remote-cache", metavar="URL", help="the remote cache (or $ACCELBUILD_REMOTE_CACHE)")


def _command(module: str) -> Callable[[argparse.Namespace], int]:
    """``accelbuild.commands.<module>.main``, imported when the command runs (the others never are)."""
    def run(args: argparse.Namespace) -> int:
        return int(importlib.import_module(f"accelbuild.commands.{module}").main(args))
    return run


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {  # a new command: one line
    "run": _command("run"),
    "validate": _command("validate"),
    "migrate": _command("migrate"),
    "status": _command("status"),
    "clean": _command("clean"),
    "inspect": _command("inspect"),
    "bench": _command("bench"),
    "schema": _command("schema"),
    "compare": _command("compare"),
    "cache": _command("cache"),
    "tensors": _command("tensors"),
    "init": _command("init"),
    "toolchain": _command("toolchain"),
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


def console() -> NoReturn:
    """The ``accelbuild`` command (and ``python -m accelbuild.cli``): ``main``, then a quick exit.

    When the command has returned and no other thread is left, the interpreter's exit handlers run (temporary
    folders, process pools, logging) and the process ends with its output flushed, but without freeing its
    modules and objects one by one, as compilers skip freeing memory at exit (clang's ``-disable-free``): 40-50
    ms of every command, a tenth of a small one. Otherwise, and when the command raised, Python exits as
    usual. ``main`` itself, which tests call in-process, returns as usual.
    """
    code = main()
    if threading.active_count() == 1:  # a thread would be joined first: that is the interpreter's to do
        atexit._run_exitfuncs()  # the handlers the interpreter would run, in its order (not public, but stable)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a reader that went away, a closed stream: nothing left to tell them
                pass
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    console()
