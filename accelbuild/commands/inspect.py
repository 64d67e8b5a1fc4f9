"""``accelbuild inspect FILE``: a program file described by the family that reads it (a model file: as
``tensors`` describes it)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from accelbuild.errors import InputFileError

if TYPE_CHECKING:
    from accelbuild.families import ProgramFile


def main(args: argparse.Namespace) -> int:
    from accelbuild.config.spec import MODEL_FORMATS
    from accelbuild.families import handler, program_file

    if Path(args.dfp).suffix.lower() in MODEL_FORMATS and program_file(Path(args.dfp)) is None:
        from accelbuild.engine import model_info  # a model, not a compiled program: describe it as tensors does

        info = model_info.read_model(Path(args.dfp))
        sys.stdout.write(f"{args.dfp}: a model file, not a compiled program (`accelbuild run` builds one); "
                         f"as accelbuild imports it:\n" + model_info.describe(info))
        return 0
    _, kind = program_file_kind(args.dfp)
    sys.stdout.write(handler(kind.inspect)(Path(args.dfp), args.dfp))
    return 0


def program_file_kind(path: str) -> tuple[str, ProgramFile]:
    """The family and kind of program file ``path`` is (by its first bytes, else its name)."""
    from accelbuild.families import program_file, registered

    found = program_file(Path(path))
    if found is None:
        if not Path(path).is_file():
            raise InputFileError(path, "no such file")
        kinds = [f"{k.description} ({', '.join(k.suffixes)})" for f in registered().values() for k in f.target.files]
        raise InputFileError(path, f"not a program file of any target family; expected one of: {'; '.join(kinds)}")
    return found
