"""``accelbuild schema``: the pipeline schema with every registered family (the packaged file when only
accelbuild's own are)."""

from __future__ import annotations

import argparse
import sys


def main(args: argparse.Namespace) -> int:
    from accelbuild.config.schema_assembly import dumps, pipeline_schema

    sys.stdout.write(dumps(pipeline_schema()))
    return 0
