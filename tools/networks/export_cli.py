"""The command line the network exporters share (``export_networks.py``, ``export_keras_networks.py``):
``OUT_DIR NAME [NAME ...]``, one JSON line per network exported."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from pathlib import Path


def main(doc: str, names: Iterable[str], export: Callable[[str, Path], dict]) -> int:
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("names", nargs="+", choices=sorted(names))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names:
        print(json.dumps(export(name, args.out)), flush=True)
    return 0
