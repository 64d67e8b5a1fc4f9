"""The toolkit's build log as accelbuild keeps and reads it: the compiler's report alone, with nothing that
changes between two runs, and its layer table and memory totals."""

from __future__ import annotations

import tempfile

from accelbuild.targets.rknn import build_log

LOG = f"""\x1b[1;33mW\x1b[0m load_onnx: The config.mean_values is None, zeros will be set for input 0!
I rknn-toolkit2 version: 2.5.0
I Loading : 100%|██████████| 6/6 [00:00<00:00, 53658.47it/s]
D RKNN: [01:22:59.454] ID   OpType             DataType Target InputShape    OutputShape    Cycles(DDR/NPU/Total)    RW(KB)       FullName
D RKNN: [01:22:59.454] Network Layer Information Table
D RKNN: [01:22:59.454] 0    InputOperator      INT8     CPU    \\             (1,3,32,32)    0/0/0                    0            InputOperator:images
D RKNN: [01:22:59.454] 1    ConvRelu           INT8     NPU    (1,3,32,32)   (1,8,32,32)    883/9216/9216            4            Conv:conv0
D RKNN: [01:22:59.454] Export RKNN model to {tempfile.gettempdir()}/tmp0ag4rsgh/check.rknn
D RKNN: [01:22:59.455] Total Internal Memory Size: 43KB
D RKNN: [01:22:59.455] Total Weight Memory Size: 8.375KB
"""


def test_the_kept_log_is_the_compilers_report_without_what_changes_between_runs() -> None:
    kept = build_log.cleaned(LOG)
    assert "Loading" not in kept and "mean_values" not in kept and "01:22:59" not in kept
    assert "D RKNN: Export RKNN model to <tmp>\n" in kept and kept.startswith("I rknn-toolkit2 version: 2.5.0\n")


def test_the_layer_table_and_memory_totals_are_read() -> None:
    kept = build_log.cleaned(LOG)
    conv = build_log.layers(kept)[1]
    assert (conv.name, conv.op, conv.unit, conv.cycles, conv.ddr_cycles) == ("Conv:conv0", "ConvRelu", "NPU", 9216, 883)
    assert build_log.memory_bytes(kept) == {"internal": 43 * 1024, "weight": 8576}
