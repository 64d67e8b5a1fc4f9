"""Per-frame accuracy records: the headline is the worst held-out frame with signal, never an average
that the frames with large outputs dominate, nor noise compared with noise."""

from __future__ import annotations

import json

import numpy as np
import pytest

from accelbuild.errors import StageError
from accelbuild.quantize import frames, measure
from accelbuild.quantize.frames import Frame
from accelbuild.quantize.weights import cosine_similarity, sqnr_db
from accelbuild.util.files import json_bytes


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
    assert record["pooled_cosine"] == record["cosine"] and record["pooled_over"] == 3
    assert record["worst_cosine"] == 1.0  # b's own figure (its sign agrees), not the pooled one
    assert frames.worst_cosine(want, got) == pytest.approx(record["cosine"], abs=1e-6)


def test_a_pooled_headline_is_named_pooled_and_the_worst_frame_keeps_its_own_figure() -> None:
    """A classifier's 10 scores per frame: the pooled cosine is above the worst frame's own, so the worst frame
    and worst_cosine are that frame's row, and the console line says the headline is pooled."""
    reference, measured = [], []
    rng = np.random.default_rng(3)
    for error in (0.02, 0.02, 0.3, 0.02, 0.02, 0.02):
        want = rng.standard_normal(10).astype(np.float32) * (5.0 if error < 0.1 else 0.5)
        reference.append([want])
        measured.append([want + (rng.standard_normal(10) * error).astype(np.float32)])
    names = [f"img{i}.png" for i in range(6)]
    record = frames.record(reference, measured, frames.labelled(names, 6, random=False))
    own = {row["file"]: row["cosine"] for row in record["frames"]}
    assert record["worst_file"] == "img2.png" and record["worst_cosine"] == own["img2.png"] == min(own.values())
    assert record["cosine"] == record["pooled_cosine"] > record["worst_cosine"] and record["pooled_over"] == 6
    line = frames.said(record)
    assert line.startswith("pooled over 6 calibration frame(s); worst frame img2.png at ")
    assert str(own["img2.png"]) in line and "worst of" not in line
    large = frames.record(*_frames([1.0, 1.0], [0.01, 0.3]), frames.labelled(["a", "b"], None, random=False))
    assert "pooled_cosine" not in large and frames.said(large) == "worst of 2 held-out frame(s): b"
    assert large["worst_cosine"] == large["cosine"]


def _pose_like(seed: int = 0) -> tuple[list, list]:
    """MediaPipe's full pose landmarker in the corpus: segmentation logits in the thousands (measured well),
    117 world-landmark values near 0.5 (measured badly) and a one-value pose flag, per frame."""
    rng = np.random.default_rng(seed)
    reference, measured = [], []
    for _ in range(3):
        mask = (rng.standard_normal(4096) * 500).astype(np.float32)
        world = (rng.standard_normal(117) * 0.3).astype(np.float32)
        flag = np.array([0.003], np.float32)
        reference.append([mask, world, flag])
        measured.append([mask + (rng.standard_normal(4096) * 5).astype(np.float32),
                         world + (rng.standard_normal(117) * 0.6).astype(np.float32), np.array([0.5], np.float32)])
    return reference, measured


def test_each_output_is_compared_on_its_own() -> None:
    """One cosine over a frame's outputs together is the segmentation logits' (0.9999): the world landmarks'
    ~0.4 would be averaged away. The headline is the worst output's, named, and each frame lists them all."""
    reference, measured = _pose_like()
    names = ["segmentation", "world_landmarks", "pose_flag"]
    record = frames.record(reference, measured, frames.labelled(["a", "b", "c"], None, random=False), names)
    together = measure.compare(reference, measured)["cosine"]
    assert together > 0.999
    by_name = {o["name"]: o for o in record["outputs"]}
    assert by_name["segmentation"]["cosine"] > 0.999 and by_name["world_landmarks"]["cosine"] < 0.6
    assert record["worst_output"] == "world_landmarks" and record["cosine"] == by_name["world_landmarks"]["cosine"]
    assert by_name["pose_flag"].get("pooled") is True  # one value a frame: pooled over the frames
    frame = record["frames"][0]
    assert [o["name"] for o in frame["outputs"]] == names
    assert frame["cosine"] == min(o["cosine"] for o in frame["outputs"][:2])  # the flag is too small to rate alone
    assert frames.worst_cosine(reference, measured) == pytest.approx(record["cosine"], abs=1e-6)


def test_an_output_without_signal_in_a_frame_does_not_rate_it() -> None:
    """A detector's class map that is ~0 in one frame (nothing there) compares noise with noise: that frame is
    rated on its other outputs; a frame with no output with signal has none."""
    rng = np.random.default_rng(1)
    boxes = [rng.standard_normal(64).astype(np.float32) for _ in range(3)]
    scores = [rng.standard_normal(64).astype(np.float32), np.full(64, 1e-9, np.float32),
              rng.standard_normal(64).astype(np.float32)]
    noisy = [s + rng.standard_normal(64).astype(np.float32) * (1.0 if i == 1 else 0.01) for i, s in enumerate(scores)]
    reference = [[b, s] for b, s in zip(boxes, scores)]
    measured = [[b, n] for b, n in zip(boxes, noisy)]
    record = frames.record(reference, measured, frames.labelled(["a", "b", "c"], None, random=False))
    second = record["frames"][1]
    assert second["signal"] is True and second["cosine"] == 1.0  # rated on its boxes alone
    assert second["outputs"][1]["signal"] is False and second["outputs"][1]["cosine"] < 0.1
    assert record["cosine"] > 0.99 and record["worst_output"] in ("output 0", "output 1")
    quiet = [[np.zeros(64, np.float32), np.zeros(64, np.float32)]] * 2 + reference[:1]
    assert frames.record(quiet, quiet, frames.labelled(["x", "y", "z"], None, random=False))["no_signal_frames"] == 2


def test_one_output_keeps_the_record_it_had() -> None:
    reference, measured = _frames([1.0, 1.0, 0.5], [0.01, 0.3, 0.02])
    record = frames.record(reference, measured, frames.labelled(["a", "b", "c"], None, random=False), ["y"])
    assert "outputs" not in record and "worst_output" not in record
    assert all("outputs" not in f for f in record["frames"])


def test_a_measured_nan_or_infinity_is_a_finite_worst_figure_in_valid_json() -> None:
    """A quantized model's NaN or infinity (where float is finite) is recorded, never carried into JSON."""
    reference, measured = _frames([1.0, 1.0, 1.0], [0.01, 0.01, 0.01])
    measured[1][0][3] = np.nan
    measured[2][0][:2] = np.inf
    record = frames.record(reference, measured, frames.labelled(["a", "b", "c"], None, random=False))
    assert record["cosine"] == -1.0 and record["worst_file"] == "b"
    assert [row.get("non_finite") for row in record["frames"]] == [None, 1, 2]
    assert record["non_finite"]["frames"] == 2 and record["non_finite"]["values"] == 3
    assert record["frames"][1]["sqnr_db"] == -200.0
    assert 0 < record["max_abs_err"] < 1  # over the finite differences
    assert json.loads(json_bytes(record)) == record


def test_the_same_nan_on_both_sides_agrees_and_a_nan_float_reference_is_refused() -> None:
    reference, measured = _frames([1.0], [0.0])
    reference[0][0][0] = measured[0][0][0] = np.nan
    assert cosine_similarity(reference[0][0], measured[0][0]) == pytest.approx(1.0)
    assert sqnr_db(reference[0][0], measured[0][0]) == 200.0
    with pytest.raises(StageError, match="float model gives NaN or infinity at output 'y' on input a"):
        frames.record(reference, measured, frames.labelled(["a"], None, random=False), ["y"])
