"""kernels: which LiteRT kernels run int8.tflite (by work), and how far the optimised ones are from the reference."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from ethos_u_models import CASES, Net, feeds  # noqa: E402

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq  # noqa: E402
from accelbuild.targets.ethos_u.tflite import kernels, verify  # noqa: E402
from accelbuild.targets.ethos_u.tflite.writer import io_layout, write_int8_tflite  # noqa: E402


def _quantized(name: str = "conv_relu") -> tuple[bytes, object, list]:
    inputs = feeds()
    q = quantize_qdq(CASES[name](), inputs, QdqConfig(conventions="tflite", share_concat_scales=True))
    return write_int8_tflite(q.model), q.model, inputs


def test_macs_count_convolutions_and_fully_connected_layers() -> None:
    n = Net()
    y = n.conv("x", 4, 8, 3, "c", pads=[1, 1, 1, 1])                      # 8*4*3*3 per pixel, 8x8 pixels
    y = n.op("Flatten", [y], "flat", axis=1)
    y = n.op("Gemm", [y, n.const("fc.w", np.ones((10, 512)))], "fc", transB=1)  # 512 x 10
    model = n.model(y, [1, 10])
    assert kernels.model_macs(model) == 8 * 4 * 9 * 64 + 512 * 10
    q = quantize_qdq(model, feeds(), QdqConfig(conventions="tflite")).model
    assert kernels.model_macs(q) == 8 * 4 * 9 * 64 + 512 * 10  # weights behind their DequantizeLinear


def test_small_work_runs_the_reference_kernels_large_work_the_optimised(monkeypatch: pytest.MonkeyPatch) -> None:
    _, qdq, _ = _quantized()
    chosen = kernels.choose(qdq, 6)
    assert chosen.name == kernels.REFERENCE and chosen.runtime == "LiteRT (reference kernels)"
    assert chosen.record()["kernels"] == "reference" and chosen.record()["macs_per_frame"] == chosen.macs > 0
    monkeypatch.setattr(kernels, "REFERENCE_MACS", 5 * chosen.macs)  # 6 frames are above it, 5 are not
    assert kernels.choose(qdq, 6).name == kernels.OPTIMISED
    assert kernels.choose(qdq, 5).name == kernels.REFERENCE
    assert "optimised kernels" in kernels.choose(qdq, 6).record()["why"]


def test_the_check_on_the_optimised_kernels_holds_and_their_difference_is_measured() -> None:
    data, qdq, inputs = _quantized("pools")
    checked = verify.check(data, qdq, inputs, kernels=kernels.OPTIMISED)
    assert checked.layers.max_steps <= 1 and checked.layers.frames == len(inputs)
    interp = kernels.interpreter(data, kernels.OPTIMISED)
    codes, _ = verify.input_codes(interp, inputs[0], io_layout(qdq), ["x"])
    measured = kernels.difference(data, codes)
    assert measured["frames"] == 1 and 0 <= measured["output_max_steps"] <= measured["max_steps"] <= 1
    assert 0.0 <= measured["differing_share"] <= 1.0


def test_the_kernel_sets_differ_where_the_docs_say() -> None:
    """A MEAN the optimised kernels round differently (test_verify's model): the difference is seen."""
    n = Net()
    y = n.op("ReduceMean", [n.conv("x", 4, 8, 1, "stem")], "mean", axes=[2, 3], keepdims=1)
    inputs = feeds(count=16)
    qdq = quantize_qdq(n.model(y, [1, 8, 1, 1]), inputs, QdqConfig(conventions="tflite")).model
    data = write_int8_tflite(qdq)
    shares = []
    for feed in inputs:
        codes, _ = verify.input_codes(kernels.interpreter(data), feed, io_layout(qdq), ["x"])
        shares.append(kernels.difference(data, codes)["differing_share"])
    assert max(shares) > 0
