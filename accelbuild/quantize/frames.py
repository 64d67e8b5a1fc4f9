"""Per-frame accuracy records: every frame's cosine and SQNR against float, and a headline that a frame
with no signal cannot flatter.

One cosine over the concatenated outputs of all frames is dominated by the frames with the largest
outputs: a text detector's images with text carry the figure and hide the one frame it gets wrong, while
a frame whose float output is ~0 (a probability map of an image without text) compares noise with noise.
So every record keeps each frame, and its headline ``cosine`` is the worst frame with signal, taken from
the held-out frames when there are any (frames the calibration did not see), else from all of them.

**Small outputs.** A frame whose outputs hold fewer than ``MIN_FRAME_VALUES`` values (a wake word's one
score) has no meaningful cosine of its own: one value's cosine is its sign. The headline then pools the
chosen frames (cosine and SQNR over their outputs together, ``"headline": "pooled"``) and the worst frame is
the one with the lowest SQNR.

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
MIN_FRAME_VALUES = 16
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
    rows, peaks, errors, flat = [], [], [], []
    for want_outputs, got_outputs, frame in zip(reference, measured, frames):
        want = _flat(want_outputs)
        got = _flat(got_outputs)
        flat.append((want, got))
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
    pooled = bool(flat) and min(want.size for want, _ in flat) < MIN_FRAME_VALUES
    if pooled:
        worst = min(chosen, key=lambda row: row["sqnr_db"]) if chosen else None
        index = [rows.index(row) for row in chosen]
        want = np.concatenate([flat[i][0] for i in index]) if index else np.zeros(0)
        got = np.concatenate([flat[i][1] for i in index]) if index else np.zeros(0)
        headline = (round(_cosine(want, got), 6), round(sqnr_db(want, got), 3))
    else:
        worst = min(chosen, key=lambda row: (row["cosine"], row["sqnr_db"])) if chosen else None
        headline = (worst["cosine"], worst["sqnr_db"]) if worst else (1.0, 0.0)
    extra = {"headline": "pooled"} if pooled else {}
    return {
        "cosine": headline[0],
        "sqnr_db": headline[1],
        "max_abs_err": float(f"{max(errors, default=0.0):.3g}"),
        "mean_cosine": round(float(np.mean([row["cosine"] for row in chosen])), 6) if chosen else 1.0,
        "worst_cosine": headline[0] if pooled else worst["cosine"] if worst else 1.0,
        "worst_file": worst["file"] if worst else None,
        "no_signal_frames": sum(1 for row in rows if not row["signal"]),
        "measured_on": _measured_on(pool),
        "frames": rows,
        **extra,
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
    gots = [_flat(outputs) for outputs in measured]
    peaks = [float(np.max(np.abs(w))) if w.size else 0.0 for w in wants]
    floor = SIGNAL_FRACTION * float(np.median(peaks)) if peaks else 0.0
    kept = [i for i, peak in enumerate(peaks) if peak > 0.0 and peak >= floor] or list(range(len(wants)))
    if not kept:
        return 1.0
    if min(w.size for w in wants) < MIN_FRAME_VALUES:  # one score per frame: pool them
        return _cosine(np.concatenate([wants[i] for i in kept]), np.concatenate([gots[i] for i in kept]))
    return min(_cosine(wants[i], gots[i]) for i in kept)


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
