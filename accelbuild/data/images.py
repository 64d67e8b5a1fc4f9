"""Decode an image file and turn it into one model input sample.

Order: decode with Pillow -> apply the EXIF orientation (as photo viewers and OpenCV's ``imread`` do) ->
convert to RGB or grayscale (Pillow's ITU-R 601-2 luma; alpha is dropped; 16-bit grayscale is scaled to
0..255) -> reverse to BGR when asked -> resize to (H, W) with Pillow's BILINEAR filter on 8-bit values
(it antialiases when shrinking, like torchvision's ``antialias=True``; OpenCV's INTER_LINEAR does not),
aspect ratio not kept -> float32, ``(x - mean) / std`` per channel in 0..255 units -> the model's layout
(channel-last in, NCHW or NHWC out) with a batch dimension of 1 -> the input's dtype.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from accelbuild.data.spec import CHANNELS, DataSpec, InputInfo
from accelbuild.errors import InputFileError


def read_image(path: Path, shown: str, color: str) -> Image.Image:
    """The decoded image, EXIF orientation applied, in mode ``RGB`` (rgb, bgr) or ``L`` (gray)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as opened:
                opened.load()
                image = ImageOps.exif_transpose(opened)
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError,
            Image.DecompressionBombWarning) as exc:
        raise InputFileError(shown, f"not a readable image ({_reason(exc)})") from None
    if image.mode.startswith("I;16") or image.mode == "I":
        values = np.asarray(image, dtype=np.float64) / 257.0
        image = Image.fromarray(np.clip(np.rint(values), 0, 255).astype(np.uint8), mode="L")
    elif image.mode == "F":
        raise InputFileError(shown, "floating-point images are not supported; save the samples as .npy")
    return image.convert("L" if color == "gray" else "RGB")


def image_sample(path: Path, shown: str, spec: DataSpec, info: InputInfo) -> np.ndarray:
    """One preprocessed sample for ``info`` (batch dimension 1, the input's layout and dtype)."""
    height, width = target_size(spec, info)
    image = read_image(path, shown, spec.color)
    if image.size != (width, height):
        image = image.resize((width, height), Image.Resampling.BILINEAR)
    return to_input(np.asarray(image), spec, info)


def target_size(spec: DataSpec, info: InputInfo) -> tuple[int, int]:
    """(H, W) images are resized to: ``resize`` or the input's own; checks channels and batch."""
    where = f"input {info.name!r} {info.show()}"
    if info.layout is None:
        raise InputFileError(spec.shown, f"images need a rank-4 image input; {where} is not one "
                                         "(give .npy arrays instead)")
    channels = CHANNELS[spec.color]
    if info.channels is not None and info.channels != channels:
        raise InputFileError(spec.shown, f"color {spec.color} gives {channels} channel(s) but {where} "
                                         f"({info.layout}) takes {info.channels}")
    if info.shape[0] not in (None, 1):
        raise InputFileError(spec.shown, f"{where} takes a batch of {info.shape[0]}; each image is one sample")
    model_hw = info.height_width
    if spec.resize is not None:
        if any(m is not None and m != r for m, r in zip(model_hw, spec.resize)):
            raise InputFileError(spec.shown, f"resize {list(spec.resize)} does not fit {where} ({info.layout})")
        return spec.resize
    if None in model_hw:
        raise InputFileError(spec.shown, f"{where} has no fixed height and width; set preprocess.resize")
    return model_hw  # type: ignore[return-value]


def to_input(pixels: np.ndarray, spec: DataSpec, info: InputInfo) -> np.ndarray:
    """8-bit pixels (H, W) or (H, W, 3) in RGB order -> normalized, laid out, batched, typed."""
    hwc = pixels.astype(np.float32).reshape(pixels.shape[0], pixels.shape[1], -1)
    if spec.color == "bgr":
        hwc = hwc[..., ::-1]
    hwc = (hwc - spec.channel_values("mean")) / spec.channel_values("std")
    laid = hwc.transpose(2, 0, 1) if info.layout == "NCHW" else hwc
    return cast_to(np.ascontiguousarray(laid[None]), info.dtype)


def cast_to(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Floats cast as they are; integer inputs get rounded values clipped to the type's range."""
    if np.issubdtype(dtype, np.integer):
        limits = np.iinfo(dtype)
        return np.clip(np.rint(values), limits.min, limits.max).astype(dtype)
    return values.astype(dtype)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]
