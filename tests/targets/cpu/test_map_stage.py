"""The map stage's agreement check between the quantize stage and the target's precision."""

from __future__ import annotations

import pytest

from accelbuild.errors import StageError
from accelbuild.targets.cpu.map_stage import _check_quantizers
from accelbuild.targets.cpu.spec import SessionParams


def _params(precision: str) -> SessionParams:
    return SessionParams("m", precision, 1, "extended", "1.0")


def test_a_float_build_keeps_the_models_own_quantizers() -> None:
    _check_quantizers(_params("float"), quantized=2, own=2)
    _check_quantizers(_params("float"), quantized=0, own=0)


def test_a_float_build_with_quantizers_the_model_does_not_have_is_refused() -> None:
    with pytest.raises(StageError, match="quantized.onnx has 3 QuantizeLinear nodes where the model has 1"):
        _check_quantizers(_params("float"), quantized=3, own=1)


def test_an_int8_build_without_quantizers_is_refused() -> None:
    with pytest.raises(StageError, match="no QuantizeLinear nodes, which an int8 build must have"):
        _check_quantizers(_params("int8"), quantized=0, own=0)
    _check_quantizers(_params("int8"), quantized=5, own=0)
