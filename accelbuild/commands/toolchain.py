"""``accelbuild toolchain list | install NAME``: vendor toolchain environments (docs/toolchains.md)."""

from __future__ import annotations

import argparse
import os
import sys

from accelbuild.commands import common


def main(args: argparse.Namespace) -> int:
    from accelbuild.engine.state import default_cache_dir
    from accelbuild.toolchains import commands, environment

    where = None if os.environ.get(environment.ROOT_ENV) and not args.cache_dir else \
        environment.root(args.cache_dir or default_cache_dir(common.state_dir(args)))
    if args.toolchain_command == "list":
        sys.stdout.write(commands.listing(where))
    else:
        sys.stdout.write(commands.install_named(args.name, args.force, where))
    return 0
