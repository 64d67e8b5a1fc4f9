"""STABLEHLO_REDUCE_WINDOW, STABLEHLO_SCATTER and STABLEHLO_GATHER beyond what they convert
(``accelbuild/frontends/tflite/ops/stablehlo.py``): the forms that do not map are refused with the reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from accelbuild.errors import InputFileError
from accelbuild.frontends.tflite import load_tflite
from accelbuild.testing.tflite_op_cases import body_subgraph, build, ints, op, stablehlo_reduce_window
from accelbuild.util.tflite_builder import TFLiteBuilder


def _reason(tmp_path: Path, data: bytes) -> str:
    (tmp_path / "m.tflite").write_bytes(data)
    with pytest.raises(InputFileError) as error:
        load_tflite(tmp_path / "m.tflite")
    return str(error.value).splitlines()[1]


def _scatter(rows: list[list[int]], function: str | None) -> bytes:
    def body(b: TFLiteBuilder, x: int, u: int) -> int:
        return op(b, "STABLEHLO_SCATTER", [x, ints(b, "idx", rows), u], (5, 2), {
            "update_window_dims": [1], "inserted_window_dims": [0], "scatter_dims_to_operand_dims": [0],
            "index_vector_dim": 1, "update_computation_subgraph_index": body_subgraph(b, function)})
    return build([(5, 2), (3, 2)], body).data


@pytest.mark.parametrize(("rows", "function", "reason"), [
    ([[1], [5], [0]], "STABLEHLO_ADD", "an index is outside the operand (StableHLO skips such updates; ScatterND "
                                       "cannot)"),
    ([[1], [3], [1]], None, "an index repeats with the body taking the update (which update wins is unspecified)"),
    ([[1], [3], [0]], "STABLEHLO_DIVIDE", "its body subgraph 1 is not one add, multiply, maximum or minimum of its "
                                          "two scalars, or the update itself"),
])
def test_a_scatter_that_does_not_map_is_refused(tmp_path: Path, rows: list, function: str | None, reason: str) -> None:
    assert _reason(tmp_path, _scatter(rows, function)) == f"  STABLEHLO_SCATTER (tensor 'y'): {reason}"


def test_a_reduce_window_with_base_dilation_is_refused(tmp_path: Path) -> None:
    def body(b: TFLiteBuilder, x: int) -> int:
        return op(b, "STABLEHLO_REDUCE_WINDOW", [x, b.const("init", np.float32(0))], (1, 5), {
            "window_dimensions": [1, 2], "window_strides": [1, 1], "base_dilations": [1, 2],
            "window_dilations": [1, 1], "padding": [0, 0, 0, 0], "body_subgraph_index": body_subgraph(b, "STABLEHLO_ADD")})
    assert _reason(tmp_path, build([(1, 3)], body).data) == \
        "  STABLEHLO_REDUCE_WINDOW (tensor 'y'): base dilations [1, 2] (only 1 converts)"


def test_a_reduce_window_is_one_slice_per_window_position(tmp_path: Path) -> None:
    (tmp_path / "m.tflite").write_bytes(stablehlo_reduce_window("STABLEHLO_MAXIMUM", 1.25).data)
    kinds = [n.op_type for n in load_tflite(tmp_path / "m.tflite").graph.node]
    assert kinds.count("Slice") == 6 and kinds.count("Max") == 6 and kinds.count("Pad") == 1
