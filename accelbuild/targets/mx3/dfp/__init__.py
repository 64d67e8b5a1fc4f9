"""The DFP ("dataflow program") file: the compiled program the assembler writes and the simulator runs.

A self-contained container (docs/dfp.md): a header naming the compiler, chip generation, chip count and
the models with their ports, plus named binary sections (``cores``, ``program``, ``weights``, optionally
``simcfg``), sealed with SHA-256 checksums. This package knows nothing about what the sections mean.
"""

from accelbuild.targets.mx3.dfp.format import FORMAT_VERSION, MAGIC
from accelbuild.targets.mx3.dfp.inspect import describe
from accelbuild.targets.mx3.dfp.model import Dfp, Header, ModelEntry, Port
from accelbuild.targets.mx3.dfp.reader import parse_dfp, read_dfp
from accelbuild.targets.mx3.dfp.writer import dfp_bytes, write_dfp

__all__ = [
    "FORMAT_VERSION", "MAGIC", "Dfp", "Header", "ModelEntry", "Port",
    "describe", "dfp_bytes", "parse_dfp", "read_dfp", "write_dfp",
]
