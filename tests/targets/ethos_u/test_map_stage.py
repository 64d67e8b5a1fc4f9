"""map_stage: above the work budget the check runs on the optimised kernels and says how far they were."""

from __future__ import annotations

import pytest

pytest.importorskip("ai_edge_litert")

from ethos_u_models import CASES, feeds  # noqa: E402

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq  # noqa: E402
from accelbuild.targets.ethos_u import map_stage  # noqa: E402
from accelbuild.targets.ethos_u.tflite import kernels  # noqa: E402
from accelbuild.targets.ethos_u.tflite.writer import write  # noqa: E402


def test_the_first_frame_runs_on_both_kernel_sets() -> None:
    inputs = feeds()
    qdq = quantize_qdq(CASES["conv_transpose_same"](), inputs, QdqConfig(conventions="tflite")).model
    data, _ = write(qdq)
    measured = map_stage._against_reference(data, qdq, inputs)
    assert measured == kernels.difference(data, _codes(data, qdq, inputs[0]))  # frame 0, deterministic
    assert measured["frames"] == 1 and measured["max_steps"] <= 1


def _codes(data: bytes, qdq: object, feed: dict) -> dict:
    from accelbuild.targets.ethos_u.tflite import verify
    from accelbuild.targets.ethos_u.tflite.writer import io_layout

    return verify.input_codes(kernels.interpreter(data), feed, io_layout(qdq), ["x"])[0]
