"""Per-frame accuracy records: every frame's cosine and SQNR against float, and a headline that a frame
with no signal cannot flatter.

One cosine over the concatenated outputs of all frames is dominated by the frames with the largest
outputs: a text detector's images with text carry the figure and hide the one frame it gets wrong, while
a frame whose float output is ~0 (a probability map of an image without text) compares noise with noise.
So every record keeps each frame, and its headline ``cosine`` is the worst frame with signal, taken from
the held-out frames when there are any (frames the calibration did not see), else from all of them.

**Small outputs.** A frame whose outputs hold fewer than ``MIN_FRAME_VALUES`` values (a wake word's one
score) has no meaningful cosine of its own: one value's cosine is its sign. The headline then pools the
chosen frames (cosine and SQNR over their outputs together, ``"headline": "pooled"``, also given as
``pooled_cosine`` with the number of frames in ``pooled_over``).

**The worst frame.** ``worst_cosine`` / ``worst_file`` are always one frame's own figure: the lowest cosine of
the chosen frames (ties: the lowest SQNR), whether or not the headline is pooled, so a file named as the
worst frame has that figure in its own row.

**Several outputs.** One cosine over a frame's outputs together is dominated by its largest output (a pose
model's segmentation logits in the thousands hide its world landmarks at cosine 0.1). So with more than one
output each output is compared on its own: a frame's ``cosine`` / ``sqnr_db`` are its worst output's (of the
outputs with signal in that frame), each frame row lists ``outputs`` (name, cosine, sqnr_db, signal), and the
record's ``outputs`` gives each output's worst over the frames the headline is taken from (an output of fewer
than ``MIN_FRAME_VALUES`` values pooled over them). The headline is the lowest of those, and
``worst_output`` names it. A model with one output gets the record it always had.

**Signal.** A frame has no signal when the peak magnitude of its float outputs is 0, or below
``SIGNAL_FRACTION`` (1 %) of the median peak of the frames measured; such frames are listed with
``"signal": false``, counted in ``no_signal_frames`` and left out of the mean and the worst.

**NaN and infinity.** Records are JSON and never hold them. The float reference must be finite (the quantize
stage refuses a float model that is not on its inputs; here it is a ``StageError``). A frame whose measured
outputs hold a NaN or infinity where the float ones do not is rated with the worst finite figures, cosine
-1.0 and SQNR -200 dB, its row counts them (``non_finite``), ``max_abs_err`` is over the finite differences,
and the record gains ``non_finite`` (frames, values, why); a warning is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelbuild.errors import StageError
from accelbuild.quantize.weights import cosine_similarity, max_abs_err, sqnr_db

log = logging.getLogger(__name__)

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
           frames: Sequence[Frame], outputs: Sequence[str] | None = None) -> dict[str, object]:
    """The accuracy record of ``measured`` against ``reference`` (outputs per frame, in frame order;
    ``outputs``: their names, default ``output 0``, ...).

    ``cosine`` / ``sqnr_db``: the worst frame with signal among the held-out frames (else among all), and
    with several outputs the worst output (module docstring); ``max_abs_err``: over every frame; ``frames``:
    each frame's figures; ``measured_on``: the role of the frames the headline comes from.
    """
    if len(frames) != len(reference) or len(reference) != len(measured):
        raise ValueError(f"{len(frames)} frame labels for {len(reference)} reference and {len(measured)} "
                         "measured frames")
    _check_reference(reference, frames, outputs)
    flat = [(_flat(want), _flat(got)) for want, got in zip(reference, measured)]
    signal, pooled = _signal(flat)
    split = _split(reference, measured, outputs)
    rows = [{"file": frame.file, "role": frame.role, "cosine": round(cosine_similarity(want, got), 6),
             "sqnr_db": round(sqnr_db(want, got), 3), "signal": has}
            for (want, got), frame, has in zip(flat, frames, signal)]
    if split is not None:
        for i, row in enumerate(rows):
            row.update(split.frame_row(i))
    errors = [max_abs_err(want, got) for want, got in flat]
    extra: dict[str, object] = {}
    bad = [int(np.count_nonzero(~np.isfinite(got) & np.isfinite(want))) for want, got in flat]
    if any(bad):
        for row, count in zip(rows, bad):
            if count:
                row["non_finite"] = count
        extra["non_finite"] = {"frames": sum(1 for count in bad if count), "values": sum(bad), "why": NON_FINITE_WHY}
        log.warning("%d frame(s) of the measured outputs hold NaN or infinity where the float model's do not "
                    "(%d values; first: %s): rated cosine -1.0", extra["non_finite"]["frames"], sum(bad),
                    next(row["file"] for row, count in zip(rows, bad) if count))
    held_out = [i for i, row in enumerate(rows) if row["role"] == "held-out"]
    pool = held_out or list(range(len(rows)))
    chosen = [i for i in pool if rows[i]["signal"]] or pool
    # the frame with the lowest figure of its own: worst_cosine / worst_file, whatever the headline is
    worst = min(chosen, key=lambda i: (rows[i]["cosine"], rows[i]["sqnr_db"])) if chosen else None
    if pooled:
        want, got = (np.concatenate([flat[i][part] for i in chosen]) if chosen else np.zeros(0) for part in (0, 1))
        headline = (round(cosine_similarity(want, got), 6), round(sqnr_db(want, got), 3))
    else:
        headline = (rows[worst]["cosine"], rows[worst]["sqnr_db"]) if worst is not None else (1.0, 0.0)
    if split is not None and chosen:
        per_output = split.summary(chosen)
        lowest = min(per_output, key=lambda o: (o["cosine"], o["sqnr_db"]))
        if (lowest["cosine"], lowest["sqnr_db"]) < headline:
            headline, pooled = (lowest["cosine"], lowest["sqnr_db"]), bool(lowest.get("pooled"))
        extra.update(outputs=per_output, worst_output=lowest["name"])
    if pooled and chosen:
        extra.update(headline="pooled", pooled_cosine=headline[0], pooled_over=len(chosen))
    return {
        "cosine": headline[0],
        "sqnr_db": headline[1],
        "max_abs_err": float(f"{max(errors, default=0.0):.3g}"),
        "mean_cosine": round(float(np.mean([rows[i]["cosine"] for i in chosen])), 6) if chosen else 1.0,
        "worst_cosine": rows[worst]["cosine"] if worst is not None else headline[0],
        "worst_file": rows[worst]["file"] if worst is not None else None,
        "no_signal_frames": signal.count(False),
        "measured_on": _measured_on([rows[i] for i in pool]),
        "frames": rows,
        **extra,
    }


NON_FINITE_WHY = ("outputs hold NaN or infinity where the float model's do not: such a frame is rated "
                  "cosine -1.0 and SQNR -200 dB, and max_abs_err is over the finite differences")


def _check_reference(reference: list[list[np.ndarray]], frames: Sequence[Frame],
                     outputs: Sequence[str] | None) -> None:
    """A float reference with NaN or infinity has no figure to compare with (the quantize stage says so to
    the user first, at the model's YAML position)."""
    for frame, values in zip(frames, reference):
        for o, value in enumerate(values):
            if not np.all(np.isfinite(np.asarray(value, dtype=np.float64))):
                name = outputs[o] if outputs is not None and o < len(outputs) else f"output {o}"
                raise StageError(f"the float model gives NaN or infinity at output {name!r} on input {frame.file}: "
                                 "no accuracy figure compares with it; give representative inputs with `data:` "
                                 "(models[].data)")


def said(accuracy: dict) -> str:
    """What a headline cosine covers, for a console line: ``worst of 4 held-out frames: img2.jpg, output
    scores; 2 without signal``, or for a pooled headline ``pooled over 6 calibration frame(s); worst frame
    b.png at 0.961059`` ("" for a record without frames)."""
    rows = accuracy.get("frames")
    if not rows:
        return ""
    pool = [row for row in rows if row["role"] == accuracy.get("measured_on")] or rows
    quiet = accuracy.get("no_signal_frames") or 0
    output = accuracy.get("worst_output")
    tail = (f", output {output}" if output else "") + (f"; {quiet} without signal" if quiet else "")
    if accuracy.get("headline") == "pooled":
        over = accuracy.get("pooled_over", len(pool))
        return (f"pooled over {over} {accuracy.get('measured_on')} frame(s){tail}; worst frame "
                f"{accuracy.get('worst_file')} at {accuracy.get('worst_cosine')}")
    return f"worst of {len(pool)} {accuracy.get('measured_on')} frame(s): {accuracy.get('worst_file')}{tail}"


def cell(accuracy: dict) -> str:
    """A report's "inputs" cell: real or random inputs (and from where), then the frame the headline comes
    from."""
    kind = accuracy.get("inputs")
    if kind == "data":
        inputs = f"real inputs ({accuracy.get('samples', '?')} from {accuracy.get('folder', '?')})"
    elif kind == "random":
        inputs = f"random inputs ({accuracy.get('samples', '?')}, seed {accuracy.get('seed', '?')})"
    else:
        inputs = str(kind or "")
    return f"{inputs}; {said(accuracy)}" if accuracy.get("frames") else inputs


def worst_cosine(reference: list[list[np.ndarray]], measured: list[list[np.ndarray]]) -> float:
    """The headline ``record`` gives, unrounded (auto_precision ranks small differences): the lowest cosine
    of a frame with signal, or the pooled cosine of those frames when outputs are small; with several outputs,
    the lowest output's."""
    split = _split(reference, measured, None)
    if split is not None:  # each output's worst over the frames with signal
        chosen = [i for i in range(len(reference)) if split.frame_signal(i)] or list(range(len(reference)))
        return min(split.worst(o, chosen)[0] for o in range(len(split.names)))
    flat = [(_flat(want), _flat(got)) for want, got in zip(reference, measured)]
    signal, pooled = _signal(flat)
    kept = [pair for pair, has in zip(flat, signal) if has] or flat
    if not kept:
        return 1.0
    if pooled:  # one score per frame: pool them
        return cosine_similarity(*(np.concatenate([pair[part] for pair in kept]) for part in (0, 1)))
    return min(cosine_similarity(want, got) for want, got in kept)


def _signal(flat: list[tuple[np.ndarray, np.ndarray]]) -> tuple[list[bool], bool]:
    """Per frame, whether its float outputs have signal (peak > 0 and >= SIGNAL_FRACTION of the median peak);
    and whether the outputs are too small for a cosine per frame (fewer than MIN_FRAME_VALUES values)."""
    peaks = [float(np.max(np.abs(want))) if want.size else 0.0 for want, _ in flat]
    floor = SIGNAL_FRACTION * float(np.median(peaks)) if peaks else 0.0
    pooled = bool(flat) and min(want.size for want, _ in flat) < MIN_FRAME_VALUES
    return [peak > 0.0 and peak >= floor for peak in peaks], pooled


class _Split:
    """The outputs of a model with several, compared one by one (``o``: output, ``i``: frame)."""

    def __init__(self, reference: list[list[np.ndarray]], measured: list[list[np.ndarray]],
                 names: Sequence[str]) -> None:
        self.names = list(names)
        count = len(self.names)
        self.want = [[_flat([frame[o]]) for frame in reference] for o in range(count)]
        self.got = [[_flat([frame[o]]) for frame in measured] for o in range(count)]
        self.small = [min(w.size for w in wants) < MIN_FRAME_VALUES for wants in self.want]
        self.signal = [_signal(list(zip(wants, gots)))[0] for wants, gots in zip(self.want, self.got)]

    def _rated(self, i: int) -> list[int]:
        """The outputs frame ``i`` is rated on: those of ``MIN_FRAME_VALUES`` values or more with signal."""
        return [o for o in range(len(self.names)) if not self.small[o] and self.signal[o][i]]

    def frame_signal(self, i: int) -> bool:
        return bool(self._rated(i))

    def frame_row(self, i: int) -> dict[str, object]:
        """Frame ``i``'s figures: its worst rated output, and every output's."""
        each = [{"name": name, "cosine": round(cosine_similarity(self.want[o][i], self.got[o][i]), 6),
                 "sqnr_db": round(sqnr_db(self.want[o][i], self.got[o][i]), 3),
                 "signal": bool(self.signal[o][i])} for o, name in enumerate(self.names)]
        rated = self._rated(i)
        row: dict[str, object] = {"outputs": each}
        if rated:
            row.update(cosine=min(each[o]["cosine"] for o in rated), sqnr_db=min(each[o]["sqnr_db"] for o in rated),
                       signal=True)
        elif not all(self.small):  # no output with signal in this frame
            row["signal"] = False
        return row

    def worst(self, o: int, frames: list[int]) -> tuple[float, float]:
        """Output ``o``'s worst (cosine, SQNR) over ``frames`` (those where it has signal, if any); pooled over
        them when it is small."""
        if self.small[o]:
            want, got = (np.concatenate([side[o][i] for i in frames]) for side in (self.want, self.got))
            return cosine_similarity(want, got), sqnr_db(want, got)
        kept = [i for i in frames if self.signal[o][i]] or frames
        return min((cosine_similarity(self.want[o][i], self.got[o][i]), sqnr_db(self.want[o][i], self.got[o][i]))
                   for i in kept)

    def summary(self, frames: list[int]) -> list[dict[str, object]]:
        """Each output's worst over ``frames``, rounded as records are."""
        result: list[dict[str, object]] = []
        for o, name in enumerate(self.names):
            cos, sqnr = self.worst(o, frames)
            result.append({"name": name, "cosine": round(cos, 6), "sqnr_db": round(sqnr, 3),
                           **({"pooled": True} if self.small[o] else {})})
        return result


def _split(reference: list[list[np.ndarray]], measured: list[list[np.ndarray]],
           names: Sequence[str] | None) -> _Split | None:
    """The per-output comparison of a model with several outputs (None: one output, or no frames)."""
    count = len(reference[0]) if reference else 0
    if count < 2 or any(len(frame) != count for frame in [*reference, *measured]):
        return None
    return _Split(reference, measured, names if names is not None else [f"output {o}" for o in range(count)])


def _measured_on(pool: list[dict]) -> str:
    roles = {row["role"] for row in pool}
    if roles == {"held-out"}:
        return "held-out"
    return "random" if roles == {"random"} else "calibration"


def _flat(outputs: list[np.ndarray]) -> np.ndarray:
    if not outputs:
        return np.zeros(0)
    return np.concatenate([np.asarray(o, dtype=np.float64).ravel() for o in outputs])
