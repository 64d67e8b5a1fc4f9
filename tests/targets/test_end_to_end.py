"""End-to-end records: host sections timed with their spread, and the figures at its two ends."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from accelbuild.targets import end_to_end


def test_the_record_gives_the_figures_at_the_host_sections_p10_and_p90_times() -> None:
    whole = end_to_end.record(1000.0, 1.0, "simulated", pre_ms=2.0, post_ms=None, pre_p10_p90=[1.5, 4.0])
    assert whole["fps"] == 500.0 and whole["bound"] == "host pre"
    assert whole["host_pre_ms_p10_p90"] == [1.5, 4.0] and whole["host_post_ms_p10_p90"] is None
    assert whole["fps_spread"] == [250.0, 666.67]  # at the p90 time, at the p10 time
    assert whole["latency_ms_spread"] == [2.5, 5.0]
    fast = end_to_end.record(100.0, 10.0, "simulated", pre_ms=2.0, pre_p10_p90=[1.5, 4.0])
    assert fast["fps_spread"] == [100.0, 100.0] and fast["bound"] == "accelerator"  # the host never binds
    alone = end_to_end.record(1000.0, 1.0, "simulated")
    assert "fps_spread" not in alone and alone["sections"] == "accelerator only (no pre/post sections)"


def test_a_section_is_timed_with_its_p10_and_p90() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    timed = end_to_end.section_time(model, {"x": np.ones((1, 64), np.float32)})
    assert 0 < timed.p10_ms <= timed.median_ms <= timed.p90_ms
    assert timed.p10_p90 == [timed.p10_ms, timed.p90_ms]
