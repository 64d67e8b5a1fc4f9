"""Per-frame accuracy records: the headline is the worst held-out frame with signal, never an average
that the frames with large outputs dominate, nor noise compared with noise."""

from __future__ import annotations

import numpy as np
import pytest

from accelbuild.quantize import frames, measure
from accelbuild.quantize.frames import Frame


def _frames(scales: list[float], errors: list[float], seed: int = 0) -> tuple[list, list]:
    """One output per frame: a float map of magnitude ``scale``, measured with relative noise ``error``."""
    rng = np.random.default_rng(seed)
    reference, measured = [], []
    for scale, error in zip(scales, errors):
        want = (rng.standard_normal(256) * scale).astype(np.float32)
        reference.append([want])
        measured.append([want + (rng.standard_normal(256) * scale * error).astype(np.float32)])
    return reference, measured


def test_the_worst_frame_with_signal_is_the_headline_not_the_pooled_cosine() -> None:
    """The issue's PP-OCR case: four images with text, one detected badly, and two without text."""
    reference, measured = _frames([1.0, 1.0, 1.0, 0.5, 1e-5, 1e-5], [0.01, 0.01, 0.3, 0.02, 1.0, 1.0])
    names = [f"img{i}.jpg" for i in range(6)]
    record = frames.record(reference, measured, frames.labelled(names, None, random=False))
    pooled = measure.compare(reference, measured)["cosine"]
    assert pooled > 0.98  # what the old record said
    assert record["cosine"] == record["worst_cosine"] < 0.97 and record["worst_file"] == "img2.jpg"
    assert record["no_signal_frames"] == 2 and record["measured_on"] == "held-out"
    assert [f["signal"] for f in record["frames"]] == [True, True, True, True, False, False]
    assert record["mean_cosine"] == pytest.approx(np.mean([f["cosine"] for f in record["frames"][:4]]), abs=1e-6)


def test_held_out_frames_make_the_headline_when_there_are_any() -> None:
    reference, measured = _frames([1.0] * 4, [0.5, 0.01, 0.02, 0.01])  # the calibration frame is the bad one
    record = frames.record(reference, measured, frames.labelled(["a", "b", "c", "d"], 1, random=False))
    assert [f["role"] for f in record["frames"]] == ["calibration", "held-out", "held-out", "held-out"]
    assert record["measured_on"] == "held-out" and record["worst_file"] == "c"
    only_calibration = frames.record(reference, measured, frames.labelled(["a", "b", "c", "d"], 4, random=False))
    assert only_calibration["measured_on"] == "calibration" and only_calibration["worst_file"] == "a"


def test_random_inputs_with_nothing_calibrated_say_random() -> None:
    reference, measured = _frames([1.0, 1.0], [0.01, 0.02])
    labels = frames.labelled(["random #0", "random #1"], None, random=True)
    assert labels == [Frame("random #0", "random"), Frame("random #1", "random")]
    assert frames.record(reference, measured, labels)["measured_on"] == "random"


def test_outputs_that_are_all_zero_have_no_signal_and_keep_a_figure() -> None:
    zeros = [[np.zeros(8, np.float32)] for _ in range(3)]
    record = frames.record(zeros, zeros, frames.labelled(["a", "b", "c"], None, random=False))
    assert record["no_signal_frames"] == 3 and record["cosine"] == 1.0 and record["worst_file"] == "a"


def test_auto_precision_aims_at_the_worst_frame_with_signal() -> None:
    reference, measured = _frames([1.0, 1.0, 1e-6], [0.01, 0.3, 5.0])
    worst = frames.worst_cosine(reference, measured)
    record = frames.record(reference, measured, frames.labelled(["a", "b", "c"], None, random=False))
    assert worst == pytest.approx(record["cosine"], abs=1e-6)


def test_one_score_per_frame_is_pooled_not_a_cosine_of_one_value() -> None:
    """openWakeWord's verifier: one sigmoid score per frame. Each frame's cosine is 1.0 whenever the sign
    agrees (the corpus showed 1.0 with SQNR -29 dB); pooled, the frames give a real figure."""
    want = [[np.array([0.9], np.float32)], [np.array([0.1], np.float32)], [np.array([0.5], np.float32)]]
    got = [[np.array([0.2], np.float32)], [np.array([0.8], np.float32)], [np.array([0.5], np.float32)]]
    record = frames.record(want, got, frames.labelled(["a", "b", "c"], None, random=False))
    assert [f["cosine"] for f in record["frames"]] == [1.0, 1.0, 1.0]
    assert record["headline"] == "pooled" and record["cosine"] < 0.7 and record["worst_file"] == "b"
    assert frames.worst_cosine(want, got) == pytest.approx(record["cosine"], abs=1e-6)
