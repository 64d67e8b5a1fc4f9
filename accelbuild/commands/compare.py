"""``accelbuild compare``: the figures of two builds (or every variant of a matrix) side by side."""

from __future__ import annotations

import argparse
import sys


def main(args: argparse.Namespace) -> int:
    from accelbuild.engine import compare

    sides = compare.sides_of(args.builds)
    sys.stdout.write(compare.dumps(sides) + "\n" if args.json else compare.text(sides))
    return 0
