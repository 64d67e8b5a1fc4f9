"""EMBEDDING_LOOKUP_SPARSE beyond its conformance cases (``accelbuild/frontends/tflite/ops/indexing.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbuild.errors import InputFileError
from accelbuild.frontends.tflite import load_tflite
from accelbuild.testing.tflite_op_cases import build, const, ints, op
from accelbuild.util.tflite_builder import TFLiteBuilder


def test_sparse_indices_out_of_row_order_are_refused(tmp_path: Path) -> None:
    """LiteRT combines each run of one output row on its own (a row met twice is divided twice): only
    indices in row order convert."""
    def body(b: TFLiteBuilder, ids: int, weights: int) -> int:
        return op(b, "EMBEDDING_LOOKUP_SPARSE", [ids, ints(b, "indices", [[1, 0], [0, 1], [1, 1]]),
                                                 ints(b, "dense_shape", [2, 3]), weights, const(b, "table", (4, 2))],
                  (2, 2), {"combiner": 1})
    (tmp_path / "m.tflite").write_bytes(build([(3,), (3,)], body, ("int32", "float32")).data)
    with pytest.raises(InputFileError) as error:
        load_tflite(tmp_path / "m.tflite")
    assert str(error.value).splitlines()[1] == (
        "  EMBEDDING_LOOKUP_SPARSE (tensor 'y'): the sparse indices are not in row order (LiteRT combines each run "
        "of one row on its own)")
