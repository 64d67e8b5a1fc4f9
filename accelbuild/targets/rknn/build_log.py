"""What rknn-toolkit2's build log says about the compiled program: its layer table and memory totals.

With verbose on, the toolkit prints a "Network Layer Information Table" (per layer: id, operator, data type,
unit NPU/CPU, input and output shapes, cycles DDR/NPU/Total, read-write KB, full name) and the totals "Total
Internal Memory Size" and "Total Weight Memory Size". The log accelbuild keeps is the compiler's report alone
(``cleaned``), so two runs give the same bytes.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STAMP = re.compile(r"\[\d\d:\d\d:\d\d\.\d+\] ?")
_TEMP = re.compile(r"/tmp/[^\s/]+/")
_SITE = re.compile(r"\S*/site-packages/")
_ROW = re.compile(r"^D RKNN: (?P<id>\d+)\s+(?P<op>\S+)\s+(?P<dtype>\S+)\s+(?P<unit>NPU|CPU)\s+(?P<ins>\S+)\s+"
                  r"(?P<outs>\S+)\s+(?P<ddr>\d+)/(?P<npu>\d+)/(?P<total>\d+)\s+(?P<rw>[\d.]+)\s+(?P<name>.+?)\s*$")
_MEMORY = re.compile(r"Total (?P<kind>Internal|Weight) Memory Size: (?P<size>[\d.]+)(?P<unit>KB|MB|B)")
_UNITS = {"B": 1, "KB": 1024, "MB": 1024 * 1024}


@dataclass(frozen=True)
class Layer:
    id: int
    op: str  # the toolkit's fused operator (ConvRelu, ...)
    name: str  # the toolkit's full name: "<ONNX op>:<node name>"
    unit: str  # NPU | CPU
    cycles: int  # total
    ddr_cycles: int
    npu_cycles: int
    rw_kb: float
    data_type: str
    output_shape: str

    def as_json(self) -> dict[str, object]:
        source_op, _, node = self.name.partition(":")
        return {"id": self.id, "name": node or self.name, "op": self.op, "source_op": source_op if node else None,
                "unit": self.unit, "cycles": self.cycles, "ddr_cycles": self.ddr_cycles,
                "npu_cycles": self.npu_cycles, "ddr_kb": self.rw_kb, "data_type": self.data_type,
                "output_shape": self.output_shape}


def cleaned(text: str) -> str:
    """The compiler's own report from the toolkit's log: its ``D RKNN:`` lines (passes, the layer, feature and
    constant tables, memory totals) and its version line, without colour codes, timestamps and temporary
    folders. The Python side's chatter (progress bars, warnings printed on a first run only) is left out, so
    the same model and settings give the same bytes."""
    lines = []
    temp = re.compile(re.escape(tempfile.gettempdir()) + r"/\S*")  # $TMPDIR may be a folder of its own (CI)
    for line in text.replace("\r", "\n").splitlines():
        line = temp.sub("<tmp>", _ANSI.sub("", line))
        line = _SITE.sub("<site-packages>/", _TEMP.sub("<tmp>/", _STAMP.sub("", line))).rstrip()
        if line.startswith("D RKNN:") or line.startswith("I rknn-toolkit2 version"):
            lines.append(line)
    return "\n".join(lines) + "\n"


def layers(log: str) -> list[Layer]:
    """The last layer table of the log (the toolkit prints one per compilation)."""
    tables: list[list[Layer]] = []
    for line in log.splitlines():
        if "Network Layer Information Table" in line:
            tables.append([])
            continue
        match = _ROW.match(line.strip())
        if match and tables:
            tables[-1].append(Layer(int(match["id"]), match["op"], match["name"], match["unit"], int(match["total"]),
                                    int(match["ddr"]), int(match["npu"]), float(match["rw"]), match["dtype"],
                                    match["outs"]))
    return tables[-1] if tables else []


def memory_bytes(log: str) -> dict[str, int]:
    """``{"internal": bytes, "weight": bytes}`` from the totals the toolkit prints."""
    found = {}
    for match in _MEMORY.finditer(log):
        found[match["kind"].lower()] = int(round(float(match["size"]) * _UNITS[match["unit"]]))
    return found
