"""TFLite conformance: one small model per builtin operator LiteRT runs, converted by the frontend and run
in onnxruntime against LiteRT (``tflite_conformance_runner``), against the recorded outcomes.

A crash or a wrong result fails; so does an operator whose outcome differs from
``accelbuild/frontends/tflite/conformance.json`` (a reproduced operator refused again, or a refusal
that starts converting without the record saying so: rewrite it with
``python tests/tflite_conformance_runner.py --write`` and review the diff).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tflite_conformance_runner as suite

from accelbuild.frontends.tflite.ops import OPS
from accelbuild.testing.tflite_op_cases import CASES


@pytest.fixture(scope="module")
def outcomes() -> list[suite.Outcome]:
    return suite.run_suite()


def test_the_operators_are_litert_s(outcomes: list[suite.Outcome]) -> None:
    names = [o.operator for o in outcomes]
    assert len(names) > 150 and "CONV_2D" in names and "CUSTOM" not in names  # 171 with ai-edge-litert 2.x
    assert "BROADCAST_TO" in names  # resolved from version 2 only
    assert set(OPS) <= set(names), sorted(set(OPS) - set(names))


def test_no_crashes_and_no_wrong_results(outcomes: list[suite.Outcome]) -> None:
    bad = [f"{o.operator}: {o.status}: {o.reason}" for o in outcomes if o.status in ("crash", "wrong",
                                                                                    "litert-cannot-run")]
    assert not bad, "\n".join(bad)


def test_outcomes_are_the_recorded_ones(outcomes: list[suite.Outcome]) -> None:
    recorded = suite.load_expected()
    now = suite.record(outcomes)
    differ = [f"{name}: recorded {recorded['operators'].get(name)}, now {entry}"
              for name, entry in now["operators"].items() if recorded["operators"].get(name) != entry]
    assert not differ, "\n".join(differ[:40])
    assert now["summary"] == recorded["summary"]


def test_every_converter_has_a_case() -> None:
    """A converted operator is checked on a model of its own, not only on the probe."""
    assert not sorted(set(OPS) - set(CASES))


NEW = ["SIN", "GREATER", "LESS", "REDUCE_PROD", "FLOOR_DIV", "FILL", "RFFT2D", "COMPLEX_ABS", "SQUARED_DIFFERENCE",
       "SLICE", "RESHAPE", "COS", "EXP", "FLOOR", "CEIL", "ROUND", "ABS", "SIGN", "RSQRT", "ELU", "GELU",
       "RELU_0_TO_1", "LOG_SOFTMAX", "GREATER_EQUAL", "LESS_EQUAL", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
       "LOGICAL_NOT", "POW", "FLOOR_MOD", "ZEROS_LIKE", "REAL", "IMAG", "EMBEDDING_LOOKUP", "GATHER_ND",
       "SCATTER_ND", "SEGMENT_SUM", "UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX",
       "UNSORTED_SEGMENT_MIN", "ONE_HOT", "TOPK_V2", "ARG_MAX", "ARG_MIN", "ADD_N", "ATAN2", "SELECT", "CAST",
       "STABLEHLO_ADD", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM", "STABLEHLO_AND",
       "BITWISE_XOR", "RIGHT_SHIFT", "STABLEHLO_SHIFT_LEFT", "TILE", "REVERSE_V2", "REVERSE_SEQUENCE", "UNPACK",
       "RANK", "RANGE", "MATRIX_DIAG", "MATRIX_SET_DIAG", "CUMSUM", "REDUCE_ANY", "REDUCE_ALL", "BROADCAST_ARGS",
       "L2_NORMALIZATION", "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "L2_POOL_2D", "LOCAL_RESPONSE_NORMALIZATION",
       "BUCKETIZE", "FAKE_QUANT", "SPARSE_TO_DENSE", "DYNAMIC_UPDATE_SLICE", "CONV_3D",
       "CONV_3D_TRANSPOSE", "DILATE", "RNN", "UNIDIRECTIONAL_SEQUENCE_RNN", "LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM",
       "BIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_LSTM", "SVDF",
       "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5", "STABLEHLO_PAD",
       "REDUCE_WINDOW", "BROADCAST_TO", "IF", "WHILE", "STABLEHLO_COMPOSITE", "CALL_ONCE", "VAR_HANDLE",
       "READ_VARIABLE", "ASSIGN_VARIABLE", "STABLEHLO_REDUCE_WINDOW", "STABLEHLO_GATHER", "STABLEHLO_SCATTER",
       "EMBEDDING_LOOKUP_SPARSE"]


@pytest.mark.parametrize("operator", NEW)
def test_operator_matches_litert(operator: str, tmp_path: Path) -> None:
    """Each case of the operator (SLICE: computed begin; RESHAPE: to a scalar by an empty shape) converts and
    agrees with LiteRT."""
    outcome = suite.run_operator(operator, tmp_path)
    assert outcome.status == "reproduced", outcome.message


def test_an_inexpressible_operator_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """WHERE's output size depends on the values: the refusal names the operator, says why and what to do."""
    from accelbuild.errors import InputFileError
    from accelbuild.frontends.tflite import load_tflite
    from accelbuild.testing.tflite_op_cases import probe

    (tmp_path / "m.tflite").write_bytes(probe("WHERE").data)
    with pytest.raises(InputFileError) as error:
        load_tflite(tmp_path / "m.tflite")
    assert str(error.value).splitlines()[1] == (
        "  WHERE (tensor 'y'): not converted: its output size depends on the values (a shape no static graph has); "
        "export the model without it (the graph cut before or after it) and run that part on the host")


def test_recurrent_state_starts_at_zeros_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An RNN's hidden state is a variable tensor: converted as zeros, with one warning naming it."""
    from accelbuild.frontends.tflite import load_tflite

    (tmp_path / "m.tflite").write_bytes(CASES["RNN"][0]().data)
    with caplog.at_level("WARNING", logger="accelbuild"):
        load_tflite(tmp_path / "m.tflite")
    warnings = [r.getMessage() for r in caplog.records if "variable tensors" in r.getMessage()]
    assert warnings == ["m.tflite: variable tensors ['state'] (state LiteRT keeps between invocations) start at "
                        "zeros: the converted model computes an invocation from the reset state"]
