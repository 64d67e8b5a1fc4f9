"""Representative data: folder layouts, image preprocessing against hand-computed tensors, .npy arrays,
and every kind of bad data as an exit-2 error naming the file and what was expected."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from PIL import Image

from accelbuild.data import (
    DataSpec,
    InputInfo,
    data_files,
    guess_layout,
    input_infos,
    load_inputs,
)
from accelbuild.data.images import read_image
from accelbuild.errors import InputFileError
from accelbuild.testing import models

F32 = np.dtype(np.float32)

# A 2 x 3 RGB image: rows top to bottom, pixels left to right.
PIXELS = np.array([[[0, 10, 20], [30, 40, 50], [60, 70, 80]],
                   [[90, 100, 110], [120, 130, 140], [250, 251, 252]]], dtype=np.uint8)


def nchw(h: int, w: int, c: int = 3, name: str = "x") -> InputInfo:
    return InputInfo(name, (1, c, h, w), F32, "NCHW")


def spec(folder: Path, **kw) -> DataSpec:
    return DataSpec(folder, kw.pop("shown", "data/"), **kw)


def save_png(path: Path, pixels: np.ndarray = PIXELS) -> Path:
    Image.fromarray(pixels).save(path)
    return path


def expect_error(match: str, file: str | None = None):
    return pytest.raises(InputFileError, match=match) if file is None else _FileError(file, match)


class _FileError:
    """pytest.raises plus a check of the file the message names (``file: message``)."""

    def __init__(self, file: str, match: str) -> None:
        self.file, self.ctx = file, pytest.raises(InputFileError, match=match)

    def __enter__(self):
        self.info = self.ctx.__enter__()
        return self.info

    def __exit__(self, *exc) -> bool:
        handled = self.ctx.__exit__(*exc)
        assert self.info.value.path == self.file and str(self.info.value).startswith(f"{self.file}: ")
        return handled


# --- preprocessing against hand-computed tensors -------------------------------------------------

def test_rgb_image_normalized_per_channel_into_nchw(tmp_path: Path) -> None:
    save_png(tmp_path / "a.png")
    [feeds] = load_inputs(spec(tmp_path, mean=(10, 20, 30), std=(2, 4, 5)), [nchw(2, 3)])
    expected = np.array([
        [[(0 - 10) / 2, (30 - 10) / 2, (60 - 10) / 2], [(90 - 10) / 2, (120 - 10) / 2, (250 - 10) / 2]],
        [[(10 - 20) / 4, (40 - 20) / 4, (70 - 20) / 4], [(100 - 20) / 4, (130 - 20) / 4, (251 - 20) / 4]],
        [[(20 - 30) / 5, (50 - 30) / 5, (80 - 30) / 5], [(110 - 30) / 5, (140 - 30) / 5, (252 - 30) / 5]],
    ], dtype=np.float32)[None]
    assert feeds["x"].dtype == np.float32 and feeds["x"].shape == (1, 3, 2, 3)
    np.testing.assert_allclose(feeds["x"], expected, rtol=1e-6)


def test_bgr_reverses_channels_before_mean_and_std_and_nhwc_stays_channel_last(tmp_path: Path) -> None:
    save_png(tmp_path / "a.png")
    info = InputInfo("x", (1, 2, 3, 3), F32, "NHWC")
    [feeds] = load_inputs(spec(tmp_path, color="bgr", mean=(1, 2, 3), std=(1, 1, 2)), [info])
    expected = (PIXELS[..., ::-1].astype(np.float32) - [1, 2, 3]) / [1, 1, 2]
    np.testing.assert_allclose(feeds["x"], expected[None], rtol=1e-6)


def test_gray_uses_one_channel_and_default_scaling_is_divide_by_255(tmp_path: Path) -> None:
    gray = np.array([[0, 51], [102, 255]], dtype=np.uint8)
    save_png(tmp_path / "g.png", np.stack([gray] * 3, axis=-1))  # R = G = B: luma is exactly that value
    [feeds] = load_inputs(spec(tmp_path, color="gray"), [nchw(2, 2, c=1)])
    np.testing.assert_allclose(feeds["x"], (gray / 255.0).astype(np.float32)[None, None], rtol=1e-6)


def test_resize_defaults_to_the_model_input_with_pillow_bilinear(tmp_path: Path) -> None:
    # 1 x 2 -> 1 x 4 bilinear, pixel centres aligned: [0, 200] -> [0, 50, 150, 200]
    save_png(tmp_path / "a.png", np.array([[[0, 0, 0], [200, 200, 200]]], dtype=np.uint8))
    [feeds] = load_inputs(spec(tmp_path, std=(1,)), [nchw(1, 4)])
    np.testing.assert_array_equal(feeds["x"][0, 0], [[0, 50, 150, 200]])
    # shrinking antialiases: [0, 0, 200, 200] -> [29, 171] (triangle filter over two input pixels)
    save_png(tmp_path / "a.png", np.array([[[0] * 3, [0] * 3, [200] * 3, [200] * 3]], dtype=np.uint8))
    [feeds] = load_inputs(spec(tmp_path, std=(1,)), [nchw(1, 2)])
    np.testing.assert_array_equal(feeds["x"][0, 1], [[29, 171]])


def test_explicit_resize_feeds_an_input_with_open_height_and_width(tmp_path: Path) -> None:
    save_png(tmp_path / "a.png")
    info = InputInfo("x", (None, 3, None, None), F32, "NCHW")
    [feeds] = load_inputs(spec(tmp_path, resize=(4, 6)), [info])
    assert feeds["x"].shape == (1, 3, 4, 6)
    with expect_error("no fixed height and width; set preprocess.resize", "data/"):
        load_inputs(spec(tmp_path), [info])
    with expect_error(r"resize \[4, 4\] does not fit input 'x'", "data/"):
        load_inputs(spec(tmp_path, resize=(4, 4)), [nchw(2, 3)])


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    image = Image.fromarray(np.zeros((2, 4, 3), dtype=np.uint8))  # 4 wide, 2 high
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 degrees clockwise to display
    image.save(tmp_path / "a.jpg", exif=exif)
    assert read_image(tmp_path / "a.jpg", "a.jpg", "rgb").size == (2, 4)


def test_integer_inputs_get_rounded_clipped_values(tmp_path: Path) -> None:
    save_png(tmp_path / "a.png")
    info = InputInfo("x", (1, 2, 3, 3), np.dtype(np.uint8), "NHWC")
    [feeds] = load_inputs(spec(tmp_path, std=(1,)), [info])
    assert feeds["x"].dtype == np.uint8
    np.testing.assert_array_equal(feeds["x"][0], PIXELS)


# --- layouts and files ---------------------------------------------------------------------------

def test_data_files_sorted_by_name_first_count_without_decoding(tmp_path: Path) -> None:
    for name in ["b.png", "a.JPG", "c.bmp", "10.jpeg"]:
        (tmp_path / name).write_bytes(b"not decoded when listing")
    (tmp_path / "README.txt").write_text("ignored")
    (tmp_path / ".hidden.png").write_bytes(b"ignored")
    assert [p.name for p in data_files(spec(tmp_path))] == ["10.jpeg", "a.JPG", "b.png", "c.bmp"]
    assert [p.name for p in data_files(spec(tmp_path, count=2))] == ["10.jpeg", "a.JPG"]


def test_npy_one_sample_per_file_with_or_without_batch(tmp_path: Path) -> None:
    a = np.arange(12, dtype=np.float64).reshape(3, 2, 2)
    np.save(tmp_path / "0.npy", a)
    np.save(tmp_path / "1.npy", a[None].astype(np.float32) + 1)
    samples = load_inputs(spec(tmp_path), [nchw(2, 2)])
    assert [s["x"].shape for s in samples] == [(1, 3, 2, 2)] * 2
    assert all(s["x"].dtype == np.float32 for s in samples)
    np.testing.assert_array_equal(samples[1]["x"], a[None] + 1)


def test_multi_input_npy_one_subfolder_per_input(tmp_path: Path) -> None:
    model = models.multi_input_model()
    infos = input_infos(model)
    for sample in ["s0", "s1", "s2"]:
        for info in infos:
            (tmp_path / info.name).mkdir(exist_ok=True)
            shape = [1 if d is None else d for d in info.shape][1:]
            np.save(tmp_path / info.name / f"{sample}.npy", np.full(shape, len(sample), np.float32))
    files = data_files(spec(tmp_path, count=2))
    assert [f.relative_to(tmp_path).as_posix() for f in files] == ["image/s0.npy", "meta/s0.npy",
                                                                   "image/s1.npy", "meta/s1.npy"]
    samples = load_inputs(spec(tmp_path, count=2), infos)
    assert len(samples) == 2 and samples[0]["image"].shape == (1, 3, 16, 16) and samples[0]["meta"].shape == (1, 4)


def test_input_infos_and_layout_rule() -> None:
    infos = input_infos(models.multi_input_model())
    assert infos[0] == InputInfo("image", (None, 3, 16, 16), F32, "NCHW")
    assert infos[1] == InputInfo("meta", (None, 4), F32, None)
    assert input_infos(models.nhwc_input_model())[0].layout == "NHWC"
    assert guess_layout((1, 3, 224, 224)) == "NCHW" and guess_layout((1, 224, 224, 3)) == "NHWC"
    assert guess_layout((1, 1, 28, 28)) == "NCHW" and guess_layout((1, 3, 4, 3)) == "NCHW"
    assert guess_layout((1, 8, 8, 8)) == "NCHW" and guess_layout((1, 8)) is None


def test_data_spec_rejects_bad_values() -> None:
    for kw in [{"count": 0}, {"color": "hsv"}, {"mean": (1, 2)}, {"std": (0,)}, {"resize": (0, 4)},
               {"color": "gray", "mean": (1, 2, 3)}]:
        with pytest.raises(ValueError):
            DataSpec(Path("."), ".", **kw)


# --- bad data: exit 2, naming the file and the expected shape --------------------------------------

def test_unreadable_and_truncated_images(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with expect_error("not a readable image", "data/a.png") as info:
        load_inputs(spec(tmp_path), [nchw(2, 3)])
    assert info.value.exit_code == 2
    (tmp_path / "a.png").unlink()
    Image.fromarray(np.zeros((64, 64, 3), np.uint8) + 7).save(tmp_path / "b.jpg")
    raw = (tmp_path / "b.jpg").read_bytes()
    (tmp_path / "b.jpg").write_bytes(raw[: len(raw) // 2])
    with expect_error("not a readable image", "data/b.jpg"):
        load_inputs(spec(tmp_path), [nchw(64, 64)])


def test_wrong_npy_shape_names_the_expected_shape(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.zeros((3, 4, 4), np.float32))
    with expect_error(r"array of shape \[3, 4, 4\]; input 'x' takes \[1, 3, 2, 2\] float32", "data/a.npy"):
        load_inputs(spec(tmp_path), [nchw(2, 2)])
    np.save(tmp_path / "a.npy", np.zeros((2, 3, 2, 2), np.float32))  # a batch of two: one sample per file
    with expect_error(r"array of shape \[2, 3, 2, 2\]", "data/a.npy"):
        load_inputs(spec(tmp_path), [nchw(2, 2)])


def test_wrong_npy_dtype_and_bad_values(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.zeros((3, 2, 2), np.uint8))
    with expect_error(r"array of dtype uint8; input 'x' takes \[1, 3, 2, 2\] float32", "data/a.npy"):
        load_inputs(spec(tmp_path), [nchw(2, 2)])
    np.save(tmp_path / "a.npy", np.full((3, 2, 2), np.nan, np.float32))
    with expect_error("NaN or infinite", "data/a.npy"):
        load_inputs(spec(tmp_path), [nchw(2, 2)])
    np.save(tmp_path / "a.npy", np.array([300, 1]))
    with expect_error("dtype int64; input 'ids' takes", "data/a.npy"):
        load_inputs(spec(tmp_path), [InputInfo("ids", (1, 2), np.dtype(np.uint8))])
    (tmp_path / "a.npy").write_bytes(b"not numpy")
    with expect_error("not a readable .npy array", "data/a.npy"):
        load_inputs(spec(tmp_path), [nchw(2, 2)])


def test_empty_missing_and_file_instead_of_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("no data here")
    with expect_error("empty: no .jpg/.jpeg/.png/.bmp images or .npy arrays", "data/"):
        data_files(spec(tmp_path))
    with expect_error("no such folder", "nowhere/"):
        data_files(spec(tmp_path / "nowhere", shown="nowhere/"))
    with expect_error("not a folder", "notes.txt"):
        data_files(spec(tmp_path / "notes.txt", shown="notes.txt"))


def test_count_larger_than_the_folder(tmp_path: Path) -> None:
    save_png(tmp_path / "a.png")
    with expect_error("count is 3 but the folder holds only 1 images", "data/"):
        data_files(spec(tmp_path, count=3))


def test_mixed_images_and_arrays(tmp_path: Path) -> None:
    save_png(tmp_path / "a.png")
    np.save(tmp_path / "b.npy", np.zeros(3))
    with expect_error("mixes images and .npy arrays", "data/"):
        data_files(spec(tmp_path))


def test_missing_per_input_file_and_subfolders(tmp_path: Path) -> None:
    for name in ["image", "meta"]:
        (tmp_path / name).mkdir()
    np.save(tmp_path / "image" / "s0.npy", np.zeros((3, 16, 16), np.float32))
    np.save(tmp_path / "meta" / "s0.npy", np.zeros(4, np.float32))
    np.save(tmp_path / "image" / "s1.npy", np.zeros((3, 16, 16), np.float32))
    with expect_error("sample 's1' has a file for input.s. image but none for input 'meta'", "data/meta/s1.npy"):
        data_files(spec(tmp_path))
    infos = input_infos(models.multi_input_model())
    assert len(load_inputs(spec(tmp_path, count=1), infos)) == 1
    with expect_error("no subfolder of .npy files for input 'other'", "data/other"):
        load_inputs(spec(tmp_path, count=1), [*infos, InputInfo("other", (1, 2), F32)])
    with expect_error("no model input is named 'meta'", "data/meta"):
        load_inputs(spec(tmp_path, count=1), infos[:1])


def test_images_or_flat_arrays_for_a_multi_input_model(tmp_path: Path) -> None:
    save_png(tmp_path / "a.png")
    infos = input_infos(models.multi_input_model())
    with expect_error("the model has 2 inputs .image, meta.; images feed a model with one image input", "data/"):
        load_inputs(spec(tmp_path), infos)


def test_image_channels_must_match_the_input(tmp_path: Path) -> None:
    save_png(tmp_path / "a.png")
    with expect_error(r"color gray gives 1 channel.s. but input 'x' \[1, 3, 2, 3\] float32 .NCHW. takes 3", "data/"):
        load_inputs(spec(tmp_path, color="gray"), [nchw(2, 3)])
    with expect_error("images need a rank-4 image input", "data/"):
        load_inputs(spec(tmp_path), [InputInfo("x", (1, 18), F32)])


def test_input_infos_from_a_model_with_an_initializer_listed_as_input() -> None:
    w = helper.make_tensor("w", TensorProto.FLOAT, [1], [2.0])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 224, 224, 3]),
                               helper.make_tensor_value_info("w", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 224, 224, 3])], [w])
    assert input_infos(helper.make_model(graph)) == [InputInfo("x", (1, 224, 224, 3), F32, "NHWC")]
