"""``accelbuild migrate``: format-1 pipeline files rewritten into format 2 in place, comments kept."""

from __future__ import annotations

import argparse


def main(args: argparse.Namespace) -> int:
    from accelbuild.config.migrate import migrate_files

    print("\n".join(migrate_files(args.pipelines)))
    return 0
