"""What representative data is and what a model input needs from it.

``DataSpec`` is the resolved ``models[].data`` mapping; ``InputInfo`` describes one model input (its
full shape with batch, its dtype and, for rank-4 inputs, whether it is channel-first). Layout rule of
``input_infos``: a rank-4 input is NCHW when dimension 1 is 1 or 3 and the last dimension is not, NHWC
when the last dimension is 1 or 3 and dimension 1 is not, and NCHW (ONNX's own convention) otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import numpy as np
import onnx

from accelbuild.util.onnx_graph import real_inputs

if TYPE_CHECKING:
    from accelbuild.config.spec import DataParams

Color = Literal["rgb", "bgr", "gray"]
Layout = Literal["NCHW", "NHWC"]
COLORS: tuple[str, ...] = ("rgb", "bgr", "gray")
CHANNELS = {"rgb": 3, "bgr": 3, "gray": 1}


@dataclass(frozen=True)
class DataSpec:
    """A folder of images or ``.npy`` arrays and how to turn images into model inputs.

    ``path`` is the folder (resolved), ``shown`` the path as the user wrote it (for messages),
    ``count`` the number of samples to use (None: all), ``resize`` (H, W) for images (None: the model
    input's own H and W), ``mean``/``std`` per channel in 0..255 units (one value applies to every
    channel). Invalid values raise ``ValueError`` (the config schema reports them to users first).
    """

    path: Path
    shown: str
    count: int | None = None
    resize: tuple[int, int] | None = None
    color: Color = "rgb"
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (255.0,)

    def __post_init__(self) -> None:
        if self.count is not None and self.count < 1:
            raise ValueError(f"count must be at least 1, not {self.count}")
        if self.resize is not None and (len(self.resize) != 2 or min(self.resize) < 1):
            raise ValueError(f"resize must be [H, W] of positive integers, not {list(self.resize)}")
        if self.color not in COLORS:
            raise ValueError(f"color must be one of {', '.join(COLORS)}, not {self.color!r}")
        channels = CHANNELS[self.color]
        for key, values in (("mean", self.mean), ("std", self.std)):
            if len(values) not in (1, channels):
                raise ValueError(f"{key} needs 1 or {channels} value(s) for color {self.color}, not {len(values)}")
        if any(s == 0 for s in self.std):
            raise ValueError("std values must not be 0")

    def channel_values(self, key: Literal["mean", "std"]) -> np.ndarray:
        """``mean`` or ``std`` as a float32 vector with one value per channel of ``color``."""
        values = np.asarray(getattr(self, key), dtype=np.float32)
        return np.broadcast_to(values, (CHANNELS[self.color],)).copy()


@dataclass(frozen=True)
class InputInfo:
    """One model input: ``shape`` includes the batch; None marks a dimension the model leaves open."""

    name: str
    shape: tuple[int | None, ...]
    dtype: np.dtype
    layout: Layout | None = None  # rank-4 inputs only

    @property
    def channels(self) -> int | None:
        if self.layout is None:
            return None
        return self.shape[1] if self.layout == "NCHW" else self.shape[3]

    @property
    def height_width(self) -> tuple[int | None, int | None]:
        if self.layout == "NCHW":
            return self.shape[2], self.shape[3]
        if self.layout == "NHWC":
            return self.shape[1], self.shape[2]
        raise ValueError(f"input {self.name!r} is not an image input (rank {len(self.shape)})")

    def show(self) -> str:
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"[{dims}] {self.dtype.name}"


def guess_layout(shape: tuple[int | None, ...]) -> Layout | None:
    """NCHW or NHWC for a rank-4 shape (rule in the module docstring); None for other ranks."""
    if len(shape) != 4:
        return None
    first, last = shape[1] in (1, 3), shape[3] in (1, 3)
    return "NHWC" if last and not first else "NCHW"


def input_infos(model: onnx.ModelProto) -> list[InputInfo]:
    """The model's run-time inputs (initializers listed as inputs are skipped), in graph order."""
    infos = []
    for value in real_inputs(model.graph):
        tensor = value.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                      for d in tensor.shape.dim)
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        infos.append(InputInfo(value.name, shape, dtype, guess_layout(shape)))
    return infos


def data_spec(data: DataParams, folder: Path) -> DataSpec:
    """The ``accelbuild.data`` spec (what the loader reads) of ``models[].data`` parameters and its folder."""
    color = cast(Color, data.color)  # DataSpec checks it is one of COLORS
    return DataSpec(folder, data.text, data.count, data.resize, color, data.mean, data.std)
