"""``accelbuild bench FILE``: a program file simulated by the family that reads it, like a device tool."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from accelbuild.commands.inspect import program_file_kind
from accelbuild.errors import InputFileError


def main(args: argparse.Namespace) -> int:
    from accelbuild.families import handler

    family, kind = program_file_kind(args.dfp)
    if kind.bench is None:
        raise InputFileError(args.dfp, f"a {kind.description}; family {family} has no simulator to bench it with")
    report, text = handler(kind.bench)(Path(args.dfp), args.dfp, args.frames)
    sys.stdout.write(json.dumps(report, indent=2) + "\n" if args.json else text)
    return 0
