"""Write the deterministic tiny test models to ``<name>.onnx`` files.

Usage: python examples/make_models.py [--out DIR]

DIR defaults to ``models/`` next to this script. Output is byte-for-byte
reproducible: models are serialized deterministically and each file is written
atomically (temporary file in the target directory, then ``os.replace``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from accelbuild.testing.models import BUILDERS

DEFAULT_OUT = Path(__file__).resolve().parent / "models"


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers never see a partial file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"output directory (default: {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, build in BUILDERS.items():
        data = build().SerializeToString(deterministic=True)
        path = args.out / f"{name}.onnx"
        write_atomic(path, data)
        print(f"wrote {path} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
