"""ChannelMean: the running per-channel mean bias correction is built on."""

from __future__ import annotations

import numpy as np
import pytest

from accelbuild.quantize.qdq.bias_correction import ChannelMean


def test_channel_mean_averages_every_position_of_every_frame_per_channel() -> None:
    mean = ChannelMean(axis=1)
    mean.add(np.arange(12, dtype=np.float32).reshape(1, 3, 2, 2))  # channel c holds 4c .. 4c+3
    mean.add(np.zeros((1, 3, 2, 2), np.float32))
    np.testing.assert_allclose(mean.mean, [0.75, 2.75, 4.75])


def test_channel_mean_of_no_frames_is_an_error_not_a_type_error() -> None:
    with pytest.raises(ValueError, match="at least one frame"):
        _ = ChannelMean(axis=1).mean
