"""Run the float model frame by frame and stream the tensors to be measured into ``TensorStats``.

One onnxruntime session of a copy of the model that also outputs every measured tensor; memory holds one
frame's tensors and the fixed-size statistics, however many frames there are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

import numpy as np
import onnx
from onnx import helper

from accelbuild.quantize import measure
from accelbuild.quantize.calibration import DEFAULT_BINS, TensorStats
from accelbuild.quantize.qdq.bias_correction import ChannelMean
from accelbuild.quantize.qdq.reach import ChannelRange

log = logging.getLogger(__name__)


def collect(model: onnx.ModelProto, tensors: list[str], feeds: Iterable[dict[str, np.ndarray]],
            histogram: bool = True, bins: int = DEFAULT_BINS,
            mean_axes: Mapping[str, int] | None = None, channel_ranges: Iterable[str] = ()
            ) -> tuple[dict[str, TensorStats], dict[str, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Statistics of ``tensors`` (graph inputs or node outputs) over every frame of ``feeds``, the
    per-channel means of the tensors of ``mean_axes`` (tensor -> channel axis), and the per-channel
    minimum and maximum (channels on axis 1) of the tensors of ``channel_ranges``."""
    stats = {t: TensorStats(bins, histogram) for t in tensors}
    means = {t: ChannelMean(axis) for t, axis in (mean_axes or {}).items()}
    ranges = {t: ChannelRange() for t in channel_ranges}
    wanted = list(dict.fromkeys([*tensors, *means, *ranges]))
    sess = measure.session(_with_outputs(model, wanted))
    input_names = [i.name for i in sess.get_inputs()]
    fetched = [t for t in wanted if t not in input_names]
    frames = 0
    for feed in feeds:
        run = _run(sess, fetched, {k: v for k, v in feed.items() if k in input_names}) if fetched else []
        values = {**{t: feed[t] for t in wanted if t in input_names}, **dict(zip(fetched, run))}
        for name, value in values.items():
            if name in stats:
                stats[name].add(value)
            if name in means:
                means[name].add(value)
            if name in ranges:
                ranges[name].add(value)
        frames += 1
    if frames == 0:
        raise ValueError("calibration needs at least one input frame")
    log.debug("calibrated %d tensor(s) over %d frame(s)", len(tensors), frames)
    return stats, {t: m.mean for t, m in means.items()}, {t: r.range for t, r in ranges.items()}


def channel_peaks(model: onnx.ModelProto, tensors: list[str],
                  feeds: Iterable[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per tensor of ``tensors`` (node outputs, channels on axis 1): each channel's largest |value| over
    every frame of ``feeds``."""
    sess = measure.session(_with_outputs(model, tensors))
    input_names = [i.name for i in sess.get_inputs()]
    peaks: dict[str, np.ndarray] = {}
    for feed in feeds:
        run = _run(sess, tensors, {k: v for k, v in feed.items() if k in input_names})
        for name, value in zip(tensors, run):
            moved = np.moveaxis(np.abs(np.asarray(value, dtype=np.float64)), 1, -1)
            peak = moved.reshape(-1, moved.shape[-1]).max(axis=0)
            peaks[name] = peak if name not in peaks else np.maximum(peaks[name], peak)
    if not peaks and tensors:
        raise ValueError("calibration needs at least one input frame")
    return peaks


def _with_outputs(model: onnx.ModelProto, tensors: list[str]) -> onnx.ModelProto:
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    present = {o.name for o in probe.graph.output} | {i.name for i in probe.graph.input}
    for name in tensors:
        if name not in present:
            probe.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    return probe


def _run(sess, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    try:
        return sess.run(names, feed)
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types for bad inputs
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise measure.ModelRunError(f"onnxruntime cannot run the model on the calibration inputs ({first[:300]})") \
            from None
