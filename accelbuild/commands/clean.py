"""``accelbuild clean``: remove build outputs (and with --cache the artifact cache)."""

from __future__ import annotations

import argparse

from accelbuild.commands import common


def main(args: argparse.Namespace) -> int:
    from accelbuild.engine import api

    removed = api.clean(common.load(args.pipelines), common.options(args), args.cache)
    print(f"removed {len(removed)} file(s)" + (" and the cache" if args.cache else ""))
    return 0
