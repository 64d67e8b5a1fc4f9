"""Per-frame accuracy records: every frame's cosine and SQNR against float, and a headline that a frame
with no signal cannot flatter.

One cosine over the concatenated outputs of all frames is dominated by the frames with the largest
outputs: a text detector's images with text carry the figure and hide the one frame it gets wrong, while
a frame whose float output is ~0 (a probability map of an image without text) compares noise with noise.
So every record keeps each frame, and its headline ``cosine`` is the worst frame with signal, taken from
the held-out frames when there are any (frames the calibration did not see), else from all of them.

**Signal.** A frame has no signal when the peak magnitude of its float outputs is 0, or below
``SIGNAL_FRACTION`` (1 %) of the median peak of the frames measured; such frames are listed with
``"signal": false``, counted in ``no_signal_frames`` and left out of the mean and the worst.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelbuild.quantize.weights import sqnr_db

SIGNAL_FRACTION = 0.01
ROLES = ("calibration", "held-out", "random")


@dataclass(frozen=True)
class Frame:
    """Which input a frame is (a file name, or ``random #i``) and its role in the build."""

    file: str
    role: str  # one of ROLES


def labelled(names: Sequence[str], calibration: int | None, random: bool) -> list[Frame]:
    """Frames in input order: the first ``calibration`` are calibration frames and the rest held out.
    ``calibration`` None: nothing was calibrated or chosen on them, so they are held out, or "random"
    when they are seeded random inputs."""
    if calibration is None and random:
        return [Frame(name, "random") for name in names]
    count = calibration or 0
    return [Frame(name, "calibration" if i < count else "held-out") for i, name in enumerate(names)]


def record(reference: list[list[np.ndarray]], measured: list[list[np.ndarray]],
           frames: Sequence[Frame]) -> dict[str, object]:
    """The accuracy record of ``measured`` against ``reference`` (outputs per frame, in frame order).

    ``cosine`` / ``sqnr_db``: the worst frame with signal among the held-out frames (else among all);
    ``max_abs_err``: over every frame; ``frames``: each frame's figures; ``measured_on``: the role of the
    frames the headline comes from.
    """
    if len(frames) != len(reference) or len(reference) != len(measured):
        raise ValueError(f"{len(frames)} frame labels for {len(reference)} reference and {len(measured)} "
                         "measured frames")
    rows, peaks, errors = [], [], []
    for want_outputs, got_outputs, frame in zip(reference, measured, frames):
        want = _flat(want_outputs)
        got = _flat(got_outputs)
        peaks.append(float(np.max(np.abs(want))) if want.size else 0.0)
        errors.append(float(np.max(np.abs(want - got))) if want.size else 0.0)
        rows.append({"file": frame.file, "role": frame.role, "cosine": round(_cosine(want, got), 6),
                     "sqnr_db": round(sqnr_db(want, got), 3)})
    floor = SIGNAL_FRACTION * float(np.median(peaks)) if peaks else 0.0
    for row, peak in zip(rows, peaks):
        row["signal"] = bool(peak > 0.0 and peak >= floor)
    held_out = [row for row in rows if row["role"] == "held-out"]
    pool = held_out or rows
    chosen = [row for row in pool if row["signal"]] or pool
    worst = min(chosen, key=lambda row: (row["cosine"], row["sqnr_db"])) if chosen else None
    return {
        "cosine": worst["cosine"] if worst else 1.0,
        "sqnr_db": worst["sqnr_db"] if worst else 0.0,
        "max_abs_err": float(f"{max(errors, default=0.0):.3g}"),
        "mean_cosine": round(float(np.mean([row["cosine"] for row in chosen])), 6) if chosen else 1.0,
        "worst_cosine": worst["cosine"] if worst else 1.0,
        "worst_file": worst["file"] if worst else None,
        "no_signal_frames": sum(1 for row in rows if not row["signal"]),
        "measured_on": _measured_on(pool),
        "frames": rows,
    }


def said(accuracy: dict) -> str:
    """What a headline cosine covers, for a console line: ``worst of 4 held-out frames: img2.jpg; 2 without
    signal`` ("" for a record without frames)."""
    rows = accuracy.get("frames")
    if not rows:
        return ""
    pool = [row for row in rows if row["role"] == accuracy.get("measured_on")] or rows
    quiet = accuracy.get("no_signal_frames") or 0
    return (f"worst of {len(pool)} {accuracy.get('measured_on')} frame(s): {accuracy.get('worst_file')}"
            + (f"; {quiet} without signal" if quiet else ""))


def cell(accuracy: dict) -> str:
    """A report's "inputs" cell: the inputs, then the frame the headline comes from."""
    inputs = str(accuracy.get("inputs", ""))
    return f"{inputs}; {said(accuracy)}" if accuracy.get("frames") else inputs


def worst_cosine(reference: list[list[np.ndarray]], measured: list[list[np.ndarray]]) -> float:
    """The lowest cosine of a frame with signal, unrounded (auto_precision ranks small differences)."""
    wants = [_flat(outputs) for outputs in reference]
    peaks = [float(np.max(np.abs(w))) if w.size else 0.0 for w in wants]
    floor = SIGNAL_FRACTION * float(np.median(peaks)) if peaks else 0.0
    cosines = [_cosine(w, _flat(got)) for w, got, peak in zip(wants, measured, peaks) if peak > 0.0 and peak >= floor]
    if not cosines:  # no frame has signal: the frames' cosines are all there is
        cosines = [_cosine(w, _flat(got)) for w, got in zip(wants, measured)]
    return min(cosines, default=1.0)


def _measured_on(pool: list[dict]) -> str:
    roles = {row["role"] for row in pool}
    if roles == {"held-out"}:
        return "held-out"
    return "random" if roles == {"random"} else "calibration"


def _flat(outputs: list[np.ndarray]) -> np.ndarray:
    if not outputs:
        return np.zeros(0)
    return np.concatenate([np.asarray(o, dtype=np.float64).ravel() for o in outputs])


def _cosine(want: np.ndarray, got: np.ndarray) -> float:
    norm = float(np.linalg.norm(want) * np.linalg.norm(got))
    return float(np.dot(want, got) / norm) if norm else (1.0 if np.array_equal(want, got) else 0.0)
