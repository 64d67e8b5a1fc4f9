"""``accelbuild init MODEL``: write a starter pipeline (``engine/starter.py``); its --family and --platform
help is each registered family's own (``Target.platform``), read when help is printed."""

from __future__ import annotations

import argparse
from pathlib import Path


def main(args: argparse.Namespace) -> int:
    from accelbuild import api
    from accelbuild.families import DEFAULT

    family = args.family or DEFAULT
    output = Path(args.output) if args.output else None
    out, info = api.init(Path(args.model), output, family, args.platform, args.data, dict(args.input_shape))
    print(f"wrote {out}: family {family}, {len(info.inputs)} input(s); suggested crop points are commented in it")
    return 0


def family_help() -> str:
    """``target family: <default> (default), <others> or <last>``: the registered families."""
    from accelbuild.families import DEFAULT, registered

    others = [name for name in registered() if name != DEFAULT]
    listed = f"{', '.join(others[:-1])} or {others[-1]}" if len(others) > 1 else "".join(others)
    return f"target family: {DEFAULT} (default)" + (f", {listed}" if listed else "")


def platform_help() -> str:
    """What --platform means for each family that takes one."""
    from accelbuild.families import get_target, registered

    rules = [(name, get_target(name).platform) for name in registered()]
    return "; ".join(f"{name}: {rule.help()}" for name, rule in rules if rule is not None)


class HelpFormatter(argparse.HelpFormatter):
    """``init --help``: --family and --platform described from the registry (imported only to print help)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.dest == "family":
            return family_help()
        if action.dest == "platform":
            return platform_help()
        return action.help

