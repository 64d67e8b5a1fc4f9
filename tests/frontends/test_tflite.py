"""The TFLite frontend: every supported operator and fused activation, float16/sparse/quantized weights,
names and layout, and malformed files, each converted model checked numerically against LiteRT."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tflite
from ai_edge_litert.interpreter import Interpreter

from accelbuild.errors import InputFileError, UserError
from accelbuild.frontends import supported_ops
from accelbuild.frontends.tflite import QUANT_METADATA_KEY, load_tflite
from accelbuild.frontends.tflite.reader import read_model
from accelbuild.testing import tflite_models as tm
from accelbuild.testing.tflite_models import TFLiteBuilder

from conftest import run_cli, write

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- running both sides


def _inputs(data: bytes, low: float, high: float, seed: int, integers: bool = False) -> list[np.ndarray]:
    """Random inputs: floats in [low, high) (whole numbers with ``integers``, so that equality tests hit),
    int32 (indices) in [low, high], int8/uint8 over their range."""
    rng = np.random.default_rng(seed)
    values = []
    for d in Interpreter(model_content=data).get_input_details():
        if d["dtype"] == np.float32:
            value = rng.uniform(low, high, d["shape"])
            values.append((np.round(value) if integers else value).astype(np.float32))
        elif d["dtype"] == np.int32:
            values.append(rng.integers(int(low), int(high) + 1, d["shape"]).astype(np.int32))
        else:
            info = np.iinfo(d["dtype"])
            values.append(rng.integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"]))
    return values


def litert(data: bytes, values: list[np.ndarray]) -> list[np.ndarray]:
    interp = Interpreter(model_content=data)
    interp.allocate_tensors()
    for d, v in zip(interp.get_input_details(), values):
        interp.set_tensor(d["index"], v)
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


def convert(data: bytes, tmp_path: Path, name: str = "model") -> onnx.ModelProto:
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(data)
    model = load_tflite(path)
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)  # as import does
    return model


def onnxrt(model: onnx.ModelProto, values: list[np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: v for i, v in zip(model.graph.input, values)})


def compare(data: bytes, tmp_path: Path, low: float = -3.0, high: float = 3.0, seed: int = 0,
            rtol: float = 1e-4, atol: float = 1e-5, integers: bool = False) -> tuple[onnx.ModelProto, float]:
    """Convert, run both, assert close; returns the model and the max abs error."""
    values = _inputs(data, low, high, seed, integers)
    expected = litert(data, values)
    model = convert(data, tmp_path)
    got = onnxrt(model, values)
    assert len(got) == len(expected)
    worst = 0.0
    for want, have in zip(expected, got):
        assert want.shape == have.shape and want.dtype == have.dtype
        np.testing.assert_allclose(have, want, rtol=rtol, atol=atol)
        worst = max(worst, float(np.abs(have.astype(np.float64) - want).max()))
    return model, worst


# --------------------------------------------------------------------------- one-operator models


def build(in_shapes: list[tuple], body: Callable[..., int | list[int]], seed: int = 0,
          in_dtypes: tuple[str, ...] = ()) -> bytes:
    """A model with inputs ``in0, in1, ...``; ``body(b, *inputs)`` returns its output(s)."""
    b = TFLiteBuilder(seed)
    xs = [b.add_tensor(f"in{i}", s, in_dtypes[i] if i < len(in_dtypes) else "float32")
          for i, s in enumerate(in_shapes)]
    outs = body(b, *xs)
    return b.finish(xs, outs if isinstance(outs, list) else [outs])


def op(b: TFLiteBuilder, builtin: str, inputs: list[int], shape: tuple, options: dict | None = None,
       name: str = "y", dtype: str = "float32") -> int:
    y = b.add_tensor(name, shape, dtype)
    b.add_op(builtin, inputs, [y], options)
    return y


def w(b: TFLiteBuilder, name: str, shape: tuple, scale: float = 0.5) -> int:
    return b.const(name, b.rng.normal(0.0, scale, shape).astype(np.float32))


def i32(b: TFLiteBuilder, name: str, values: list) -> int:
    return b.const(name, np.asarray(values, np.int32), "int32")


def conv_opts(padding: str = "SAME", stride: int = 1, dilation: int = 1, act: str = "NONE", **extra) -> dict:
    return {"padding": padding, "stride_h": stride, "stride_w": stride, "dilation_h_factor": dilation,
            "dilation_w_factor": dilation, "fused_activation_function": act, **extra}


def conv_case(x_shape: tuple, w_shape: tuple, out: tuple, bias: bool = True, **opts) -> bytes:
    def body(b, x):
        inputs = [x, w(b, "w", w_shape)] + ([w(b, "b", (w_shape[0],))] if bias else [])
        return op(b, "CONV_2D", inputs, out, conv_opts(**opts))
    return build([x_shape], body)


def dw_case(x_shape: tuple, w_shape: tuple, out: tuple, **opts) -> bytes:
    def body(b, x):
        multiplier = w_shape[3] // x_shape[3]
        return op(b, "DEPTHWISE_CONV_2D", [x, w(b, "w", w_shape), w(b, "b", (w_shape[3],))], out,
                  conv_opts(depth_multiplier=multiplier, **opts))
    return build([x_shape], body)


def tconv_case(x_shape: tuple, w_shape: tuple, out: tuple, padding: str, stride: int, bias: bool = False) -> bytes:
    def body(b, x):
        inputs = [i32(b, "output_shape", list(out)), w(b, "w", w_shape), x]
        inputs += [w(b, "b", (w_shape[0],))] if bias else []
        return op(b, "TRANSPOSE_CONV", inputs, out, {"padding": padding, "stride_h": stride, "stride_w": stride})
    return build([x_shape], body)


def fc_case(x_shape: tuple, units: int, out: tuple, bias: bool = True, **opts) -> bytes:
    def body(b, x):
        width = int(np.prod(x_shape)) // (int(np.prod(out)) // units)
        inputs = [x, w(b, "w", (units, width))] + ([w(b, "b", (units,))] if bias else [])
        return op(b, "FULLY_CONNECTED", inputs, out, {"fused_activation_function": "NONE", **opts})
    return build([x_shape], body)


def binary_case(builtin: str, a: tuple, c: tuple, out: tuple, const: bool = False, act: str | None = None) -> bytes:
    options = None if act is None else {"fused_activation_function": act}
    if const:
        return build([a], lambda b, x: op(b, builtin, [x, w(b, "k", c, 1.0)], out, options))
    return build([a, c], lambda b, x, y: op(b, builtin, [x, y], out, options))


def unary_case(builtin: str, shape: tuple = (1, 4, 5, 3), options: dict | None = None) -> bytes:
    return build([shape], lambda b, x: op(b, builtin, [x], shape, options))


def pool_case(builtin: str, x_shape: tuple, out: tuple, k: int, stride: int, padding: str) -> bytes:
    options = {"padding": padding, "stride_h": stride, "stride_w": stride, "filter_height": k, "filter_width": k,
               "fused_activation_function": "NONE"}
    return build([x_shape], lambda b, x: op(b, builtin, [x], out, options))


def resize_case(builtin: str, x_shape: tuple, size: tuple, **flags) -> bytes:
    out = (x_shape[0], *size, x_shape[3])
    return build([x_shape], lambda b, x: op(b, builtin, [x, i32(b, "size", list(size))], out, flags))


def strided_case(x_shape: tuple, begin: list, end: list, strides: list, out: tuple, **masks) -> bytes:
    def body(b, x):
        inputs = [x, i32(b, "begin", begin), i32(b, "end", end), i32(b, "strides", strides)]
        return op(b, "STRIDED_SLICE", inputs, out, masks)
    return build([x_shape], body)


def concat_case(shapes: list[tuple], axis: int, out: tuple, act: str = "NONE") -> bytes:
    return build(shapes, lambda b, *xs: op(b, "CONCATENATION", list(xs), out,
                                           {"axis": axis, "fused_activation_function": act}))


def split_case(x_shape: tuple, axis: int, outs: list[tuple]) -> bytes:
    def body(b, x):
        ys = [b.add_tensor(f"y{i}", s) for i, s in enumerate(outs)]
        b.add_op("SPLIT", [i32(b, "axis", axis), x], ys, {"num_splits": len(outs)})
        return ys
    return build([x_shape], body)


def split_v_case(x_shape: tuple, sizes: list, axis: int, outs: list[tuple]) -> bytes:
    def body(b, x):
        ys = [b.add_tensor(f"y{i}", s) for i, s in enumerate(outs)]
        b.add_op("SPLIT_V", [x, i32(b, "sizes", sizes), i32(b, "axis", axis)], ys, {"num_splits": len(outs)})
        return ys
    return build([x_shape], body)


def gather_const_params() -> bytes:
    def body(b, idx):
        return op(b, "GATHER", [w(b, "table", (10, 4)), idx], (3, 4), {"axis": 0, "batch_dims": 0})
    b_shapes = [(3,)]
    return build(b_shapes, body, in_dtypes=("int32",))


def select_of_equal() -> bytes:
    """EQUAL's bool output picks, broadcast, between an input and a constant (a BOOL graph output is avoided)."""
    def body(b, x, y):
        mask = op(b, "EQUAL", [x, y], (1, 4, 5), {}, name="eq", dtype="bool")
        return op(b, "SELECT_V2", [mask, x, w(b, "k", (1, 4, 1))], (1, 4, 5), {})
    return build([(1, 4, 5), (1, 1, 5)], body)


CASES: dict[str, tuple[Callable[[], bytes], dict]] = {
    # convolutions
    "CONV_2D-same": (lambda: conv_case((1, 7, 9, 3), (5, 3, 3, 3), (1, 7, 9, 5)), {}),
    "CONV_2D-same-stride2-asymmetric": (lambda: conv_case((1, 8, 9, 3), (4, 3, 3, 3), (1, 4, 5, 4), stride=2), {}),
    "CONV_2D-valid-stride2-dilation2": (lambda: conv_case((1, 11, 10, 2), (3, 3, 3, 2), (1, 4, 3, 3),
                                                          padding="VALID", stride=2, dilation=2), {}),
    "CONV_2D-same-dilation2": (lambda: conv_case((1, 6, 7, 2), (3, 3, 3, 2), (1, 6, 7, 3), dilation=2), {}),
    "CONV_2D-5x5-stride3-same": (lambda: conv_case((1, 10, 11, 2), (3, 5, 5, 2), (1, 4, 4, 3), stride=3), {}),
    "CONV_2D-grouped": (lambda: conv_case((1, 6, 6, 4), (6, 3, 3, 2), (1, 6, 6, 6)), {}),
    "DEPTHWISE_CONV_2D-same": (lambda: dw_case((1, 7, 7, 4), (1, 3, 3, 4), (1, 7, 7, 4)), {}),
    "DEPTHWISE_CONV_2D-multiplier2-valid-stride2": (lambda: dw_case((1, 9, 8, 3), (1, 3, 3, 6), (1, 4, 3, 6),
                                                                    padding="VALID", stride=2), {}),
    "DEPTHWISE_CONV_2D-same-stride2-dilation2": (lambda: dw_case((1, 8, 8, 2), (1, 3, 3, 2), (1, 4, 4, 2),
                                                                 stride=2, dilation=2), {}),
    "TRANSPOSE_CONV-same-stride2": (lambda: tconv_case((1, 4, 4, 3), (5, 3, 3, 3), (1, 8, 8, 5), "SAME", 2), {}),
    "TRANSPOSE_CONV-same-stride2-k4-bias": (lambda: tconv_case((1, 4, 5, 3), (2, 4, 4, 3), (1, 8, 10, 2), "SAME", 2,
                                                               bias=True), {}),
    "TRANSPOSE_CONV-same-odd-output": (lambda: tconv_case((1, 4, 4, 2), (3, 3, 3, 2), (1, 7, 7, 3), "SAME", 2), {}),
    "TRANSPOSE_CONV-valid": (lambda: tconv_case((1, 3, 4, 2), (3, 3, 3, 2), (1, 7, 9, 3), "VALID", 2), {}),
    "TRANSPOSE_CONV-valid-extra-row": (lambda: tconv_case((1, 3, 3, 2), (3, 3, 3, 2), (1, 8, 8, 3), "VALID", 2), {}),
    "FULLY_CONNECTED-2d": (lambda: fc_case((2, 6), 4, (2, 4)), {}),
    "FULLY_CONNECTED-4d-input": (lambda: fc_case((1, 2, 3, 4), 5, (2, 5)), {}),
    "FULLY_CONNECTED-keep-num-dims": (lambda: fc_case((1, 3, 6), 4, (1, 3, 4), keep_num_dims=True), {}),
    "FULLY_CONNECTED-no-bias": (lambda: fc_case((1, 8), 3, (1, 3), bias=False), {}),
    # element-wise
    "ADD-broadcast": (lambda: binary_case("ADD", (1, 4, 4, 3), (1, 1, 4, 3), (1, 4, 4, 3)), {}),
    "ADD-const": (lambda: binary_case("ADD", (1, 4, 4, 3), (3,), (1, 4, 4, 3), const=True), {}),
    "SUB": (lambda: binary_case("SUB", (1, 4, 4, 3), (1, 4, 4, 3), (1, 4, 4, 3)), {}),
    "MUL-broadcast": (lambda: binary_case("MUL", (1, 4, 1, 3), (1, 1, 5, 1), (1, 4, 5, 3)), {}),
    "DIV": (lambda: binary_case("DIV", (2, 3), (2, 3), (2, 3)), {"low": 0.5, "high": 2.0}),
    "MAXIMUM": (lambda: binary_case("MAXIMUM", (1, 4, 4, 3), (1, 4, 4, 3), (1, 4, 4, 3)), {}),
    "MINIMUM-const": (lambda: binary_case("MINIMUM", (1, 4, 4, 3), (1, 1, 1, 3), (1, 4, 4, 3), const=True), {}),
    "LOGISTIC": (lambda: unary_case("LOGISTIC"), {}),
    "RELU": (lambda: unary_case("RELU"), {}),
    "RELU6": (lambda: unary_case("RELU6"), {"low": -8.0, "high": 8.0}),
    "RELU_N1_TO_1": (lambda: unary_case("RELU_N1_TO_1"), {}),
    "LEAKY_RELU": (lambda: unary_case("LEAKY_RELU", options={"alpha": 0.2}), {}),
    "PRELU": (lambda: build([(1, 4, 4, 3)], lambda b, x: op(b, "PRELU", [x, w(b, "alpha", (1, 1, 3))],
                                                           (1, 4, 4, 3))), {}),
    "TANH": (lambda: unary_case("TANH"), {}),
    "HARD_SWISH": (lambda: unary_case("HARD_SWISH", options={}), {"low": -5.0, "high": 5.0}),
    "SOFTMAX": (lambda: unary_case("SOFTMAX", (2, 7), {"beta": 1.0}), {}),
    "SOFTMAX-beta-4d": (lambda: unary_case("SOFTMAX", (1, 3, 4, 5), {"beta": 0.5}), {}),
    # data movement
    "CONCATENATION": (lambda: concat_case([(1, 4, 4, 3), (1, 4, 4, 2)], 3, (1, 4, 4, 5)), {}),
    "CONCATENATION-negative-axis": (lambda: concat_case([(1, 2, 3), (1, 4, 3), (1, 1, 3)], -2, (1, 7, 3)), {}),
    "RESHAPE": (lambda: build([(1, 4, 4, 3)], lambda b, x: tm.reshape(b, "y", x, (1, 48))), {}),
    "RESHAPE-no-shape-input": (lambda: build([(2, 6)], lambda b, x: op(b, "RESHAPE", [x], (3, 4),
                                                                       {"new_shape": [3, 4]})), {}),
    "SQUEEZE": (lambda: build([(1, 1, 4, 1, 3)], lambda b, x: op(b, "SQUEEZE", [x], (1, 4, 3),
                                                                 {"squeeze_dims": [1, -2]})), {}),
    "SQUEEZE-all": (lambda: build([(1, 4, 1, 3)], lambda b, x: op(b, "SQUEEZE", [x], (4, 3), {})), {}),
    "PAD": (lambda: build([(1, 4, 5, 3)], lambda b, x: op(b, "PAD", [x, i32(b, "p", [[0, 0], [1, 2], [0, 1], [0, 0]])],
                                                          (1, 7, 6, 3), {})), {}),
    "PADV2": (lambda: build([(1, 4, 5, 3)], lambda b, x: op(
        b, "PADV2", [x, i32(b, "p", [[0, 0], [2, 0], [1, 1], [0, 1]]), b.const("v", np.float32(0.5))],
        (1, 6, 7, 4), {})), {}),
    "MAX_POOL_2D-same-stride2": (lambda: pool_case("MAX_POOL_2D", (1, 7, 8, 3), (1, 4, 4, 3), 3, 2, "SAME"), {}),
    "MAX_POOL_2D-valid": (lambda: pool_case("MAX_POOL_2D", (1, 6, 6, 2), (1, 3, 3, 2), 2, 2, "VALID"), {}),
    "AVERAGE_POOL_2D-same-stride2": (lambda: pool_case("AVERAGE_POOL_2D", (1, 7, 8, 3), (1, 4, 4, 3), 3, 2,
                                                       "SAME"), {}),
    "AVERAGE_POOL_2D-valid": (lambda: pool_case("AVERAGE_POOL_2D", (1, 6, 7, 2), (1, 2, 2, 2), 3, 3, "VALID"), {}),
    "MEAN-keep-dims": (lambda: build([(1, 5, 4, 3)], lambda b, x: op(b, "MEAN", [x, i32(b, "axes", [1, 2])],
                                                                     (1, 1, 1, 3), {"keep_dims": True})), {}),
    "MEAN-last-axis": (lambda: build([(2, 3, 4)], lambda b, x: op(b, "MEAN", [x, i32(b, "axes", [-1])], (2, 3),
                                                                  {"keep_dims": False})), {}),
    "RESIZE_BILINEAR-asymmetric": (lambda: resize_case("RESIZE_BILINEAR", (1, 4, 5, 3), (8, 10)), {}),
    "RESIZE_BILINEAR-align-corners": (lambda: resize_case("RESIZE_BILINEAR", (1, 4, 5, 3), (7, 9),
                                                          align_corners=True), {}),
    "RESIZE_BILINEAR-half-pixel": (lambda: resize_case("RESIZE_BILINEAR", (1, 4, 5, 3), (8, 11),
                                                       half_pixel_centers=True), {}),
    "RESIZE_BILINEAR-half-pixel-down": (lambda: resize_case("RESIZE_BILINEAR", (1, 8, 9, 2), (3, 5),
                                                            half_pixel_centers=True), {}),
    "RESIZE_NEAREST_NEIGHBOR-asymmetric": (lambda: resize_case("RESIZE_NEAREST_NEIGHBOR", (1, 4, 5, 3), (8, 7)), {}),
    "RESIZE_NEAREST_NEIGHBOR-align-corners": (lambda: resize_case("RESIZE_NEAREST_NEIGHBOR", (1, 4, 5, 3), (7, 9),
                                                                  align_corners=True), {}),
    "RESIZE_NEAREST_NEIGHBOR-half-pixel": (lambda: resize_case("RESIZE_NEAREST_NEIGHBOR", (1, 4, 5, 3), (8, 11),
                                                               half_pixel_centers=True), {}),
    "RESIZE_NEAREST_NEIGHBOR-half-pixel-down": (lambda: resize_case("RESIZE_NEAREST_NEIGHBOR", (1, 9, 8, 2), (4, 3),
                                                                    half_pixel_centers=True), {}),
    "DEPTH_TO_SPACE": (lambda: build([(1, 3, 4, 8)], lambda b, x: op(b, "DEPTH_TO_SPACE", [x], (1, 6, 8, 2),
                                                                     {"block_size": 2})), {}),
    "SPACE_TO_DEPTH": (lambda: build([(1, 6, 8, 3)], lambda b, x: op(b, "SPACE_TO_DEPTH", [x], (1, 3, 4, 12),
                                                                     {"block_size": 2})), {}),
    "STRIDED_SLICE": (lambda: strided_case((1, 6, 7, 4), [0, 1, 0, 1], [1, 5, 7, 4], [1, 2, 3, 1], (1, 2, 3, 3)), {}),
    "STRIDED_SLICE-masks-negative": (lambda: strided_case((1, 6, 7, 4), [0, -2, 5, 0], [0, 0, -9, 2], [1, -1, -2, 1],
                                                          (1, 4, 3, 2), begin_mask=1, end_mask=1), {}),
    "STRIDED_SLICE-shrink": (lambda: strided_case((1, 6, 7, 4), [0, 2, 0, -1], [1, 3, 7, 0], [1, 1, 2, 1], (4,),
                                                  shrink_axis_mask=0b1011, end_mask=0b0100), {}),
    "STRIDED_SLICE-offset": (lambda: strided_case((1, 6, 7, 4), [0, 1, 2, 0], [1, 3, 4, 4], [1, 1, 1, 2],
                                                  (1, 3, 4, 2), offset=True), {}),
    "SLICE": (lambda: build([(1, 5, 6, 4)], lambda b, x: op(b, "SLICE", [x, i32(b, "begin", [0, 1, 0, 1]),
                                                                         i32(b, "size", [-1, 2, 3, -1])],
                                                            (1, 2, 3, 3))), {}),
    "SPLIT": (lambda: split_case((1, 4, 6, 4), 3, [(1, 4, 6, 2), (1, 4, 6, 2)]), {}),
    "SPLIT-negative-axis": (lambda: split_case((1, 4, 6, 3), -2, [(1, 4, 2, 3)] * 3), {}),
    "SPLIT_V": (lambda: split_v_case((1, 3, 6, 2), [1, -1, 2], 2, [(1, 3, 1, 2), (1, 3, 3, 2), (1, 3, 2, 2)]), {}),
    "TRANSPOSE": (lambda: build([(1, 4, 5, 3)], lambda b, x: op(b, "TRANSPOSE", [x, i32(b, "perm", [0, 3, 1, 2])],
                                                                (1, 3, 4, 5))), {}),
    "TRANSPOSE-3d": (lambda: build([(2, 3, 4)], lambda b, x: op(b, "TRANSPOSE", [x, i32(b, "perm", [2, 0, 1])],
                                                                (4, 2, 3))), {}),
    "GATHER-const-params": (gather_const_params, {"low": 0, "high": 9}),
    "GATHER-axis1": (lambda: build([(1, 5, 3)], lambda b, x: op(b, "GATHER", [x, i32(b, "idx", [4, 0, 2])],
                                                               (1, 3, 3), {"axis": 1, "batch_dims": 0})), {}),
    # operators of deployed audio and detection models
    "EXPAND_DIMS": (lambda: build([(1, 16, 3)], lambda b, x: op(b, "EXPAND_DIMS", [x, i32(b, "axis", [1])],
                                                                (1, 1, 16, 3), {})), {}),
    "EXPAND_DIMS-negative": (lambda: build([(2, 5)], lambda b, x: op(b, "EXPAND_DIMS", [x, i32(b, "axis", [-1])],
                                                                     (2, 5, 1), {})), {}),
    "PACK": (lambda: build([(2, 3), (2, 3), (2, 3)], lambda b, *xs: op(b, "PACK", list(xs), (2, 3, 3),
                                                                       {"values_count": 3, "axis": 2})), {}),
    "PACK-axis0": (lambda: build([(4,), (4,)], lambda b, *xs: op(b, "PACK", list(xs), (2, 4),
                                                                 {"values_count": 2, "axis": 0})), {}),
    "MIRROR_PAD-reflect": (lambda: build([(1, 5, 6, 2)], lambda b, x: op(
        b, "MIRROR_PAD", [x, i32(b, "p", [[0, 0], [2, 1], [0, 3], [0, 0]])], (1, 8, 9, 2), {"mode": "REFLECT"})), {}),
    "MIRROR_PAD-symmetric": (lambda: build([(1, 4, 5, 2)], lambda b, x: op(
        b, "MIRROR_PAD", [x, i32(b, "p", [[0, 0], [4, 1], [2, 5], [0, 0]])], (1, 9, 12, 2),
        {"mode": "SYMMETRIC"})), {}),
    "NEG": (lambda: unary_case("NEG", options={}), {}),
    "LOG": (lambda: unary_case("LOG"), {"low": 0.1, "high": 5.0}),
    "SQRT": (lambda: unary_case("SQRT"), {"low": 0.0, "high": 5.0}),
    "SQUARE": (lambda: unary_case("SQUARE", options={}), {}),
    "SUM": (lambda: build([(1, 5, 4, 3)], lambda b, x: op(b, "SUM", [x, i32(b, "axes", [1, 2])], (1, 3),
                                                          {"keep_dims": False})), {}),
    "REDUCE_MAX-keep-dims": (lambda: build([(2, 6, 3)], lambda b, x: op(b, "REDUCE_MAX", [x, i32(b, "axes", [1])],
                                                                        (2, 1, 3), {"keep_dims": True})), {}),
    "REDUCE_MIN": (lambda: build([(2, 6, 3)], lambda b, x: op(b, "REDUCE_MIN", [x, i32(b, "axes", [-1])],
                                                              (2, 6), {"keep_dims": False})), {}),
    "SHAPE-then-RESHAPE": (lambda: build([(1, 4, 6)], lambda b, x: op(
        b, "RESHAPE", [w(b, "t", (4, 6)), op(b, "SHAPE", [x], (3,), {"out_type": "INT32"}, name="s", dtype="int32")],
        (1, 4, 6))), {}),
    "SELECT_V2-of-EQUAL": (select_of_equal, {"low": 0.0, "high": 2.0, "integers": True}),
    "EQUAL-into-SELECT_V2": (select_of_equal, {"low": 0.0, "high": 2.0, "integers": True}),
    "BATCH_MATMUL-activations": (lambda: build([(2, 3, 4), (2, 4, 5)], lambda b, x, y: op(
        b, "BATCH_MATMUL", [x, y], (2, 3, 5), {"adj_x": False, "adj_y": False})), {}),
    "BATCH_MATMUL-adj-broadcast-const": (lambda: build([(2, 4, 3)], lambda b, x: op(
        b, "BATCH_MATMUL", [x, w(b, "k", (5, 4))], (2, 3, 5), {"adj_x": True, "adj_y": True})), {}),
}

ACTIVATIONS = ["NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH"]
for _act in ACTIVATIONS:
    CASES[f"fused-{_act}-CONV_2D"] = (
        (lambda a: lambda: conv_case((1, 5, 6, 3), (4, 3, 3, 3), (1, 5, 6, 4), act=a))(_act), {})
    CASES[f"fused-{_act}-ADD"] = (
        (lambda a: lambda: binary_case("ADD", (1, 3, 4, 2), (1, 3, 4, 2), (1, 3, 4, 2), act=a))(_act),
        {"low": -8.0, "high": 8.0})
    CASES[f"fused-{_act}-DEPTHWISE_CONV_2D"] = (
        (lambda a: lambda: dw_case((1, 5, 5, 3), (1, 3, 3, 3), (1, 5, 5, 3), act=a))(_act), {})
    if _act != "TANH":  # the TFLite interpreter rejects a fused TANH on FULLY_CONNECTED
        CASES[f"fused-{_act}-FULLY_CONNECTED"] = (
            (lambda a: lambda: fc_case((2, 5), 3, (2, 3), fused_activation_function=a))(_act), {})


@pytest.mark.parametrize("case", sorted(CASES))
def test_operator_matches_litert(case: str, tmp_path: Path) -> None:
    make, ranges = CASES[case]
    compare(make(), tmp_path, **ranges)


def test_every_supported_operator_and_activation_is_covered() -> None:
    from accelbuild.frontends.tflite.ops import OPS
    from accelbuild.testing.tflite_op_cases import CASES as CONFORMANCE  # test_tflite_conformance runs them
    covered = {case.split("-")[0] for case in CASES} | {"QUANTIZE", "DEQUANTIZE", "DENSIFY"} | set(CONFORMANCE)
    assert set(OPS) <= covered
    assert {case.split("-")[1] for case in CASES if case.startswith("fused-")} == set(ACTIVATIONS)


# --------------------------------------------------------------------------- canned models


@pytest.mark.parametrize("name", ["mobilenet_like", "detection_head", "fp16_weights", "sparse_weights"])
def test_float_models_match_litert(name: str, tmp_path: Path) -> None:
    model, _ = compare(tm.CANNED[name](), tmp_path, -1.0, 1.0)
    assert model.opset_import[0].version == 21 and model.opset_import[0].domain == ""
    assert model.ir_version == 10 and model.producer_name == "accelbuild-tflite"
    assert {i.domain for i in model.opset_import} == {""}


def test_fp16_weights_are_folded_into_float32_initializers(tmp_path: Path) -> None:
    model = convert(tm.fp16_weights(), tmp_path)
    assert "DequantizeLinear" not in {n.op_type for n in model.graph.node}
    assert {t.data_type for t in model.graph.initializer} <= {onnx.TensorProto.FLOAT, onnx.TensorProto.INT64}


def test_sparse_model_is_accepted_by_litert_and_densified(tmp_path: Path) -> None:
    data = tm.sparse_weights()
    interp = Interpreter(model_content=data)
    interp.allocate_tensors()  # LiteRT itself accepts the sparse tensors...
    assert [d["op_name"] for d in interp._get_ops_details()].count("DENSIFY") == 3  # ...behind DENSIFY
    model = convert(data, tmp_path)
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    assert weights["fc2/weights"].shape == (6, 16) and (weights["fc2/weights"] == 0).mean() > 0.2


@pytest.mark.parametrize("name, steps", [("int8_cnn", 2), ("uint8_cnn", 2), ("int8_float_io", 2)])
def test_quantized_models_within_two_steps(name: str, steps: int, tmp_path: Path) -> None:
    data = tm.CANNED[name]()
    values = _inputs(data, -1.0, 1.5, 3)
    (expected,) = litert(data, values)
    model = convert(data, tmp_path)
    (got,) = onnxrt(model, values)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    quant = json.loads({p.key: p.value for p in model.metadata_props}[QUANT_METADATA_KEY])
    out_scale = quant["logits/q" if name.endswith("float_io") else "logits"]["scale"][0]
    error = np.abs(got.astype(np.float64) - expected.astype(np.float64)).max()
    step_error = error / out_scale if got.dtype == np.float32 else error
    assert step_error <= steps, f"{name}: {step_error:.2f} output steps"


def _q(scale: float, zero: int) -> tm.Quant:
    return tm.Quant([scale], [zero])


QIN = {"int8": _q(0.05, 3), "uint8": _q(0.05, 131)}


def qop_case(builtin: str, dtype: str, in_shapes: list[tuple], out: tuple, out_q: tm.Quant | None = None,
             options: dict | None = None, extra: Callable[[TFLiteBuilder], list[int]] = lambda b: []) -> bytes:
    """One quantized operator with quantized graph inputs and output (output quantization defaults to
    the input's, as the range-preserving TFLite kernels require)."""
    b = TFLiteBuilder(0)
    xs = [b.add_tensor(f"in{i}", s, dtype, quant=QIN[dtype]) for i, s in enumerate(in_shapes)]
    y = b.add_tensor("y", out, dtype, quant=out_q or QIN[dtype])
    b.add_op(builtin, [*xs, *extra(b)], [y], options)
    return b.finish(xs, [y])


_POOL = {"padding": "SAME", "stride_h": 2, "stride_w": 2, "filter_height": 3, "filter_width": 3,
         "fused_activation_function": "NONE"}
QCASES: dict[str, Callable[[], bytes]] = {
    "MAX_POOL_2D-int8": lambda: qop_case("MAX_POOL_2D", "int8", [(1, 5, 6, 3)], (1, 3, 3, 3), options=_POOL),
    "MAX_POOL_2D-uint8": lambda: qop_case("MAX_POOL_2D", "uint8", [(1, 5, 6, 3)], (1, 3, 3, 3), options=_POOL),
    "AVERAGE_POOL_2D-int8": lambda: qop_case("AVERAGE_POOL_2D", "int8", [(1, 5, 6, 3)], (1, 3, 3, 3),
                                             options=_POOL),
    "RESHAPE-int8": lambda: qop_case("RESHAPE", "int8", [(1, 2, 3, 4)], (1, 24), options={"new_shape": [1, 24]}),
    "CONCATENATION-int8": lambda: qop_case("CONCATENATION", "int8", [(1, 2, 3, 2), (1, 2, 3, 1)], (1, 2, 3, 3),
                                           options={"axis": 3, "fused_activation_function": "NONE"}),
    "LOGISTIC-int8": lambda: qop_case("LOGISTIC", "int8", [(1, 4, 5)], (1, 4, 5), _q(1 / 256, -128)),
    "SOFTMAX-int8": lambda: qop_case("SOFTMAX", "int8", [(2, 6)], (2, 6), _q(1 / 256, -128), {"beta": 1.0}),
    "TANH-int8": lambda: qop_case("TANH", "int8", [(1, 4, 5)], (1, 4, 5), _q(1 / 128, 0)),
    "HARD_SWISH-int8": lambda: qop_case("HARD_SWISH", "int8", [(1, 4, 5)], (1, 4, 5), _q(6.6 / 255, -113)),
    "LEAKY_RELU-int8": lambda: qop_case("LEAKY_RELU", "int8", [(1, 4, 5)], (1, 4, 5), _q(7.6 / 255, -77),
                                        {"alpha": 0.2}),
    "ADD-int8": lambda: qop_case("ADD", "int8", [(1, 3, 4, 2), (1, 3, 4, 2)], (1, 3, 4, 2), _q(0.1, -2),
                                 {"fused_activation_function": "NONE"}),
    "ADD-uint8": lambda: qop_case("ADD", "uint8", [(1, 3, 4, 2), (1, 3, 4, 2)], (1, 3, 4, 2), _q(0.1, 128),
                                  {"fused_activation_function": "RELU6"}),
    "MUL-int8": lambda: qop_case("MUL", "int8", [(1, 3, 4, 2), (1, 1, 4, 2)], (1, 3, 4, 2), _q(0.35, 0),
                                 {"fused_activation_function": "NONE"}),
    "MEAN-int8": lambda: qop_case("MEAN", "int8", [(1, 4, 5, 3)], (1, 3), options={"keep_dims": False},
                                  extra=lambda b: [i32(b, "axes", [1, 2])]),
    "PAD-int8": lambda: qop_case("PAD", "int8", [(1, 3, 4, 2)], (1, 5, 5, 2), options={},
                                 extra=lambda b: [i32(b, "p", [[0, 0], [1, 1], [0, 1], [0, 0]])]),
    "TRANSPOSE-int8": lambda: qop_case("TRANSPOSE", "int8", [(1, 3, 4, 2)], (1, 2, 3, 4), options={},
                                       extra=lambda b: [i32(b, "perm", [0, 3, 1, 2])]),
    "RESIZE_BILINEAR-int8": lambda: qop_case("RESIZE_BILINEAR", "int8", [(1, 3, 4, 2)], (1, 6, 8, 2),
                                             options={"half_pixel_centers": True},
                                             extra=lambda b: [i32(b, "size", [6, 8])]),
}


@pytest.mark.parametrize("case", sorted(QCASES))
def test_quantized_operator_within_one_step(case: str, tmp_path: Path) -> None:
    data = QCASES[case]()
    values = _inputs(data, 0, 0, 5)
    (expected,) = litert(data, values)
    (got,) = onnxrt(convert(data, tmp_path), values)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    steps = int(np.abs(got.astype(np.int64) - expected.astype(np.int64)).max())
    assert steps <= 1, f"{case}: {steps} quantization steps"


def test_quantized_io_keeps_tflite_types_and_records_scales(tmp_path: Path) -> None:
    model = convert(tm.quantized_cnn("int8"), tmp_path)
    (inp,), (out,) = model.graph.input, model.graph.output
    assert (inp.name, inp.type.tensor_type.elem_type) == ("input", onnx.TensorProto.INT8)
    assert (out.name, out.type.tensor_type.elem_type) == ("logits", onnx.TensorProto.INT8)
    assert [d.dim_value for d in inp.type.tensor_type.shape.dim] == [1, 8, 8, 3]
    ops = [(n.op_type, n.name) for n in model.graph.node]
    assert ops[0] == ("DequantizeLinear", "input/dequantize") and ops[-1] == ("QuantizeLinear", "logits/quantize")
    quant = json.loads({p.key: p.value for p in model.metadata_props}[QUANT_METADATA_KEY])
    assert quant["conv1/weights"]["axis"] == 0 and len(quant["conv1/weights"]["scale"]) == 8
    assert quant["input"]["zero_point"] != [0]
    weights = {t.name: t for t in model.graph.initializer}
    assert weights["conv1/weights/oihw"].data_type == onnx.TensorProto.FLOAT


def test_float_io_quantized_model_is_float_inside(tmp_path: Path) -> None:
    model = convert(tm.quantized_cnn("int8", float_io=True), tmp_path)
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    kinds = {n.op_type for n in model.graph.node}
    assert not kinds & {"QuantizeLinear", "DequantizeLinear"}


# --------------------------------------------------------------------------- names and layout


def test_tflite_names_and_layout_are_kept(tmp_path: Path) -> None:
    model = convert(tm.mobilenet_like(), tmp_path)
    g = model.graph
    assert [i.name for i in g.input] == ["input"] and [o.name for o in g.output] == ["probs"]
    assert [d.dim_value for d in g.input[0].type.tensor_type.shape.dim] == [1, 16, 16, 3]  # -1 batch made static
    nodes = {n.name: n for n in g.node}
    tensors = {out for n in g.node for out in n.output}
    assert nodes["stem/conv"].op_type == "Conv" and nodes["block/pw"].op_type == "Conv"
    assert nodes["logits"].op_type == "Gemm"
    clip_bounds = {t.name: list(t.dims) for t in g.initializer if t.name.startswith("const/")}
    assert clip_bounds and all(dims == [] for dims in clip_bounds.values())  # Clip bounds are scalars
    assert "gap" in tensors  # a value read channel-last (by the flattening Reshape) keeps its name...
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in g.value_info}
    assert shapes["gap"] == [1, 1, 1, 16]  # ...and its TFLite shape
    # conv -> depthwise stays channel-first: the NHWC copy between them collapsed away
    assert "stem/conv" not in tensors and "stem/conv/nchw" in tensors
    assert nodes["block/dw"].input[0] == "stem/conv/nchw"
    # the hard-swish between the 1x1 conv and the pool runs channel-first: no Transpose pair around it
    assert nodes["block/hswish"].input[0] == "block/pw/nchw" and nodes["pool"].input[0] == "block/hswish/nchw"
    assert [n.name for n in g.node if n.op_type == "Transpose"] == ["stem/conv/nchw_in"]
    # [1, 16, 1, 1] -> [1, 1, 1, 16] moves no value: a Reshape, which every family takes as free
    assert nodes["gap/nhwc"].op_type == "Reshape" and nodes["gap/nhwc"].output[0] == "gap"


def test_duplicate_and_empty_tensor_names_are_made_unique(tmp_path: Path) -> None:
    def body(b, x):
        y = op(b, "RELU", [x], (1, 4), name="act")
        return op(b, "TANH", [y], (1, 4), name="act")
    b = TFLiteBuilder()
    x = b.add_tensor("", (1, 4))
    out = body(b, x)
    model = convert(b.finish([x], [out]), tmp_path)
    assert model.graph.input[0].name == "tensor_0" and model.graph.output[0].name == "act_2"


def test_conversion_is_deterministic(tmp_path: Path) -> None:
    data = tm.mobilenet_like()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = convert(data, tmp_path / "a").SerializeToString(deterministic=True)
    assert convert(data, tmp_path / "b").SerializeToString(deterministic=True) == first
    assert tm.mobilenet_like() == data


def test_buffers_after_the_flatbuffer_large_model_format(tmp_path: Path) -> None:
    b = TFLiteBuilder(1)
    x = b.add_tensor("input", (1, 6, 6, 3))
    y = tm.conv(b, "conv", x, 4, 3, act="RELU")
    external = b.finish([x], [y], external_buffers=True)
    assert b.finish([x], [y]) != external
    compare(external, tmp_path)


# --------------------------------------------------------------------------- malformed files


def _expect_input_error(data: bytes, tmp_path: Path, fragment: str = "") -> InputFileError:
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(InputFileError) as info:
        load_tflite(path)
    assert info.value.exit_code == 2 and str(info.value).startswith(str(path))
    assert fragment in str(info.value)
    return info.value


def test_truncated_files_are_rejected_cleanly(tmp_path: Path) -> None:
    data = tm.mobilenet_like()
    start = time.perf_counter()
    for cut in sorted({*range(0, len(data), max(1, len(data) // 97)), len(data) - 1, 7, 8, 9}):
        _expect_input_error(data[:cut], tmp_path)
    assert time.perf_counter() - start < 10


def test_random_bytes_are_rejected(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    _expect_input_error(rng.bytes(4096), tmp_path, "not a TFLite file")
    for seed in range(40):  # random bodies behind a valid header: decoding must fail as a malformed file
        body = bytearray(np.random.default_rng(seed).bytes(2048))
        body[0:4] = (16 + seed).to_bytes(4, "little")
        body[4:8] = b"TFL3"
        start = time.perf_counter()
        _expect_input_error(bytes(body), tmp_path)
        assert time.perf_counter() - start < 2


def test_corrupted_bytes_never_escape_as_raw_exceptions(tmp_path: Path) -> None:
    data = tm.detection_head()
    rng = np.random.default_rng(1)
    path = tmp_path / "m.tflite"
    for _ in range(150):
        corrupt = bytearray(data)
        for pos in rng.integers(0, min(len(data), 1200), size=3):
            corrupt[pos] = rng.integers(0, 256)
        path.write_bytes(bytes(corrupt))
        try:
            load_tflite(path)
        except UserError:
            pass


def test_buffer_offset_past_the_end(tmp_path: Path) -> None:
    b = TFLiteBuilder(0)
    x = b.add_tensor("input", (1, 4, 4, 3))
    y = tm.conv(b, "conv", x, 2, 1)
    data = b.finish([x], [y], external_buffers=True)
    root = tflite.Model.GetRootAs(data, 0)
    offset = max(root.Buffers(i).Offset() for i in range(root.BuffersLength()))
    assert offset > 1 and data.count(offset.to_bytes(8, "little")) == 1
    bad = data.replace(offset.to_bytes(8, "little"), (len(data) + 4096).to_bytes(8, "little"))
    _expect_input_error(bad, tmp_path, "past the end of the file")
    _expect_input_error(data[:offset + 2], tmp_path, "past the end of the file")  # the data itself cut off


def test_tensor_buffer_index_out_of_range(tmp_path: Path) -> None:
    b = TFLiteBuilder(0)
    x = b.add_tensor("input", (1, 4))
    y = tm.dense(b, "fc", x, 2)
    b.tensors[1].buffer = 99
    _expect_input_error(b.finish([x], [y]), tmp_path, "refers to buffer 99")


def test_tensor_data_size_mismatch(tmp_path: Path) -> None:
    b = TFLiteBuilder(0)
    x = b.add_tensor("input", (1, 4))
    y = tm.dense(b, "fc", x, 2)
    b.buffers[b.tensors[1].buffer] = b.buffers[b.tensors[1].buffer][:-4]
    _expect_input_error(b.finish([x], [y]), tmp_path, "needs 32")


# --------------------------------------------------------------------------- unsupported operators


def test_unsupported_operators_are_all_listed(tmp_path: Path) -> None:
    b = TFLiteBuilder(0)
    x = b.add_tensor("input", (1, 4, 4, 3))
    y1 = op(b, "RELU", [x], (1, 4, 4, 3), name="relu")
    y2 = b.add_tensor("my_custom_out", (1, 4, 4, 3))
    b.add_op("CUSTOM", [y1], [y2], custom_code="MyFancyOp")
    y3 = op(b, "CONCAT_EMBEDDINGS", [y2], (1, 4, 4, 3), name="embeddings")
    weights = b.add_tensor("runtime_weights", (2, 1, 1, 3))
    y4 = op(b, "CONV_2D", [y3, weights, w(b, "bias", (2,))], (1, 4, 4, 2), conv_opts(), name="conv_nonconst")
    flat = tm.reshape(b, "flat", y4, (1, 32))
    y5 = op(b, "FULLY_CONNECTED", [flat, w(b, "fc_w", (3, 32))], (1, 3), {"fused_activation_function": "TANH"},
            name="fc_tanh")
    error = _expect_input_error(b.finish([x, weights], [y5]), tmp_path)
    lines = str(error).splitlines()
    assert lines[0] == f"{tmp_path / 'bad.tflite'}: unsupported TFLite operators: 4"
    assert lines[1] == "  CUSTOM (tensor 'my_custom_out'): custom operator 'MyFancyOp' has no converter"
    assert lines[2] == "  CONCAT_EMBEDDINGS (tensor 'embeddings'): no converter for this builtin operator"
    assert lines[3] == "  CONV_2D (tensor 'conv_nonconst'): filter and bias are not constant tensors"
    assert lines[4] == ("  FULLY_CONNECTED (tensor 'fc_tanh'): fused activation TANH, which the TFLite "
                        "interpreter rejects on FULLY_CONNECTED")
    assert len(lines) == 5


def test_unsupported_option_is_reported(tmp_path: Path) -> None:
    data = strided_case((1, 4, 4, 3), [0, 0, 0, 0], [1, 2, 2, 3], [1, 1, 1, 1], (1, 2, 2, 3), ellipsis_mask=1)
    _expect_input_error(data, tmp_path, "STRIDED_SLICE (tensor 'y'): a zero stride, ellipsis_mask or new_axis_mask")


# --------------------------------------------------------------------------- through the CLI


def _pipeline(tmp_path: Path, data: bytes) -> Path:
    (tmp_path / "models").mkdir(exist_ok=True)
    (tmp_path / "models" / "net.tflite").write_bytes(data)
    return write(tmp_path / "p.yaml", "accelbuild: 1\nname: p\nmodels:\n  - name: m\n    path: models/net.tflite\n"
                                      "    input_shapes: auto\n")


def test_import_stage_converts_tflite(tmp_path: Path) -> None:
    _pipeline(tmp_path, tm.mobilenet_like())
    result = run_cli("run", "p.yaml", "--until", "import", "--state-dir", "s", cwd=tmp_path)
    assert result.code == 0, result.stderr
    record = json.loads((tmp_path / "build/p/m/import.json").read_text())
    assert record["outputs"] == [{"name": "probs", "shape": [1, 10]}]
    imported = onnx.load(tmp_path / "build/p/m/imported.onnx")
    assert {n.name for n in imported.graph.node} >= {"stem/conv", "block/dw", "block/pw", "logits"}


def test_unsupported_tflite_through_the_cli_exits_2(tmp_path: Path) -> None:
    _pipeline(tmp_path, build([(1, 4)], lambda b, x: op(b, "CONCAT_EMBEDDINGS", [x], (1, 4), name="embeddings")))
    result = run_cli("run", "p.yaml", "--until", "import", "--state-dir", "s", cwd=tmp_path)
    assert result.code == 2 and "Traceback" not in result.stderr
    assert "unsupported TFLite operators: 1" in result.stderr and "CONCAT_EMBEDDINGS (tensor 'embeddings')" in result.stderr


# --------------------------------------------------------------------------- generated documentation


def test_supported_ops_doc_is_current() -> None:
    assert (REPO / "docs" / "supported_ops.md").read_text() == supported_ops.render()


def test_supported_ops_doc_lists_every_operator() -> None:
    from accelbuild.frontends.tflite.ops import OPS
    text = supported_ops.render()
    assert "## TFLite" in text
    assert all(f"| {name} |" in text for name in OPS)


# --------------------------------------------------------------------------- MediaPipe Convolution2DTransposeBias


MEDIAPIPE_TCONV = "Convolution2DTransposeBias"


def mediapipe_tconv_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray, padding: str, stride_h: int,
                              stride_w: int) -> np.ndarray:
    """MediaPipe's kernel (transpose_conv_bias.cc) transcribed: Prepare's output size (crop
    P = max(0, k - (in - 1) % s - 1) for SAME, 0 for VALID; out = s * (in - 1) + k - P), then every input
    pixel scattered through the OHWI filter from (in * s - P // 2) onto a bias-filled output."""
    n, ih, iw, _ = x.shape
    _, kh, kw, _ = w.shape
    ph, pw = ((max(0, k - (i - 1) % s - 1) if padding == "SAME" else 0)
              for i, k, s in ((ih, kh, stride_h), (iw, kw, stride_w)))
    oh, ow = stride_h * (ih - 1) + kh - ph, stride_w * (iw - 1) + kw - pw
    out = np.tile(bias.astype(np.float64), (n, oh, ow, 1))
    for iy in range(ih):
        for ix in range(iw):
            for fy in range(kh):
                for fx in range(kw):
                    oy, ox = iy * stride_h - ph // 2 + fy, ix * stride_w - pw // 2 + fx
                    if 0 <= oy < oh and 0 <= ox < ow:
                        out[:, oy, ox] += x[:, iy, ix].astype(np.float64) @ w[:, fy, fx].T.astype(np.float64)
    return out.astype(np.float32)


def mediapipe_tconv_pair(x_shape: tuple, w_shape: tuple, padding: str, stride_h: int,
                         stride_w: int) -> tuple[bytes, bytes, tuple[np.ndarray, np.ndarray]]:
    """The custom op, and the builtin equivalent (TRANSPOSE_CONV with output_shape, then ADD of the bias),
    with the same weights; the output shape is the one MediaPipe's kernel computes."""
    rng = np.random.default_rng(7)
    weights = rng.normal(0.0, 0.5, w_shape).astype(np.float32)
    bias = rng.normal(0.0, 0.5, (w_shape[0],)).astype(np.float32)
    out = mediapipe_tconv_reference(np.zeros(x_shape, np.float32), weights, bias, padding, stride_h, stride_w).shape

    b = TFLiteBuilder()
    x = b.add_tensor("in0", x_shape)
    y = b.add_tensor("y", out)
    b.add_op("CUSTOM", [x, b.const("w", weights), b.const("b", bias)], [y], custom_code=MEDIAPIPE_TCONV,
             custom_options=tm.transpose_conv_params(padding, stride_h, stride_w))
    custom = b.finish([x], [y])

    def builtin(b: TFLiteBuilder, x: int) -> int:
        pre = op(b, "TRANSPOSE_CONV", [i32(b, "output_shape", list(out)), b.const("w", weights), x], out,
                 {"padding": padding, "stride_h": stride_h, "stride_w": stride_w}, name="y/no_bias")
        return op(b, "ADD", [pre, b.const("b", bias)], out, {"fused_activation_function": "NONE"})
    return custom, build([x_shape], builtin), (weights, bias)


MEDIAPIPE_CASES = {  # x_shape, w_shape, padding, stride_h, stride_w
    "same-stride2-k3": ((1, 4, 6, 3), (5, 3, 3, 3), "SAME", 2, 2),  # output = input * stride
    "same-stride2-k3-odd-input": ((1, 5, 7, 3), (4, 3, 3, 3), "SAME", 2, 2),  # 2 * in - 1: MediaPipe's crop
    "same-stride2-k2-selfie": ((1, 6, 6, 8), (1, 2, 2, 8), "SAME", 2, 2),  # selfie_segmentation's last layer
    "same-stride2-k4-odd-input": ((2, 5, 4, 2), (3, 4, 4, 2), "SAME", 2, 2),  # crop 3: 1 before, 2 after
    "valid-stride2-k3": ((1, 4, 5, 2), (3, 3, 3, 2), "VALID", 2, 2),
    "valid-stride2-k2": ((1, 3, 4, 2), (3, 2, 2, 2), "VALID", 2, 2),
    "same-strides-1x3": ((1, 4, 5, 2), (3, 3, 5, 2), "SAME", 1, 3),  # stride_width before stride_height
    "valid-strides-3x2": ((1, 3, 4, 2), (2, 5, 3, 2), "VALID", 3, 2),
}


@pytest.mark.parametrize("case", sorted(MEDIAPIPE_CASES))
def test_mediapipe_transpose_conv_bias_matches_builtin_equivalent(case: str, tmp_path: Path) -> None:
    x_shape, w_shape, padding, stride_h, stride_w = MEDIAPIPE_CASES[case]
    custom, builtin, (weights, bias) = mediapipe_tconv_pair(x_shape, w_shape, padding, stride_h, stride_w)
    builtin_model, _ = compare(builtin, tmp_path)  # the builtin equivalent converts faithfully to LiteRT...
    values = _inputs(builtin, -3.0, 3.0, 1)
    (want,) = onnxrt(builtin_model, values)
    model = convert(custom, tmp_path, "custom")
    (got,) = onnxrt(model, values)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # ...and the custom op converts to the same
    reference = mediapipe_tconv_reference(values[0], weights, bias, padding, stride_h, stride_w)
    np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-5)  # which is MediaPipe's kernel
    (main,) = [n for n in model.graph.node if n.name == "y"]
    assert main.op_type == "ConvTranspose" and main.input[2] == "b"  # the bias is the ConvTranspose's


def test_mediapipe_transpose_conv_bias_reads_custom_options(tmp_path: Path) -> None:
    custom, _, _ = mediapipe_tconv_pair((1, 3, 3, 2), (2, 3, 3, 2), "SAME", 2, 1)
    path = tmp_path / "m.tflite"
    path.write_bytes(custom)
    (operator,) = read_model(path).operators
    assert (operator.name, operator.custom_code) == ("CUSTOM", MEDIAPIPE_TCONV)
    assert operator.custom_options == bytes([1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0])  # padding, stride_w, stride_h


def test_custom_options_after_the_flatbuffer(tmp_path: Path) -> None:
    b = TFLiteBuilder()
    x = b.add_tensor("in0", (1, 4, 4, 2))
    y = b.add_tensor("y", (1, 8, 8, 2))
    b.add_op("CUSTOM", [x, w(b, "w", (2, 3, 3, 2)), w(b, "b", (2,))], [y], custom_code=MEDIAPIPE_TCONV,
             custom_options=tm.transpose_conv_params("SAME", 2, 2))
    data = b.finish([x], [y], external_buffers=True)
    root = tflite.Model.GetRootAs(data, 0).Subgraphs(0).Operators(0)
    offset = root.LargeCustomOptionsOffset()
    assert root.CustomOptionsIsNone() and offset > 1 and root.LargeCustomOptionsSize() == 12
    path = tmp_path / "large.tflite"
    path.write_bytes(data)
    assert read_model(path).operators[0].custom_options == tm.transpose_conv_params("SAME", 2, 2)
    load_tflite(path)
    assert offset + 12 == len(data)  # the options are the last blob: cutting them off leaves the rest intact
    _expect_input_error(data[:offset + 4], tmp_path, f"operator 0 custom options (offset {offset}, size 12) lie "
                                                     "past the end of the file")


def test_mediapipe_transpose_conv_truncated_files_are_rejected_cleanly(tmp_path: Path) -> None:
    custom, _, _ = mediapipe_tconv_pair((1, 3, 3, 2), (2, 3, 3, 2), "VALID", 2, 2)
    for cut in range(0, len(custom), max(1, len(custom) // 61)):
        _expect_input_error(custom[:cut], tmp_path)


def _custom_tconv(options: bytes, out: tuple = (1, 8, 8, 2), x_dtype: str = "float32",
                  code: str = MEDIAPIPE_TCONV) -> bytes:
    b = TFLiteBuilder()
    x = b.add_tensor("in0", (1, 4, 4, 2), x_dtype, quant=None if x_dtype == "float32" else _q(0.1, 0))
    y = b.add_tensor("segment", out, x_dtype, quant=None if x_dtype == "float32" else _q(0.1, 0))
    b.add_op("CUSTOM", [x, w(b, "w", (2, 3, 3, 2)), w(b, "b", (2,))], [y], custom_code=code, custom_options=options)
    return b.finish([x], [y])


@pytest.mark.parametrize("options, out, x_dtype, reason", [
    (b"\x01\x00\x00\x00\x02\x00", (1, 8, 8, 2), "float32",
     "custom options hold 6 bytes, expected a 12-byte TfLiteTransposeConvParams"),
    (np.asarray([1, 2, 0], "<i4").tobytes(), (1, 8, 8, 2), "float32", "strides 0x2 (height x width) are not >= 1"),
    (np.asarray([0, 2, 2], "<i4").tobytes(), (1, 8, 8, 2), "float32", "padding 0 is not SAME (1) or VALID (2)"),
    (tm.transpose_conv_params("SAME", 2, 2), (1, 7, 7, 2), "float32",
     "output shape [1, 7, 7, 2] should be [1, 8, 8, 2]"),
    (tm.transpose_conv_params("VALID", 2, 2), (1, 8, 8, 2), "float32",
     "output shape [1, 8, 8, 2] should be [1, 9, 9, 2]"),
    (tm.transpose_conv_params("SAME", 2, 2), (1, 8, 8, 2), "int8", "MediaPipe kernel runs float32 only"),
])
def test_mediapipe_transpose_conv_unsupported_variants(options: bytes, out: tuple, x_dtype: str, reason: str,
                                                       tmp_path: Path) -> None:
    error = _expect_input_error(_custom_tconv(options, out, x_dtype), tmp_path)
    assert "CUSTOM (tensor 'segment'): " in str(error) and reason in str(error)


def test_other_custom_operators_stay_unsupported(tmp_path: Path) -> None:
    data = _custom_tconv(tm.transpose_conv_params("SAME", 2, 2), code="Convolution2DTransposeBiasV2")
    _expect_input_error(data, tmp_path, "CUSTOM (tensor 'segment'): custom operator "
                                        "'Convolution2DTransposeBiasV2' has no converter")


def test_supported_ops_doc_lists_custom_operators() -> None:
    from accelbuild.frontends.tflite.ops import CUSTOM_OPS
    text = supported_ops.render()
    assert CUSTOM_OPS and all(f"| CUSTOM {code} |" in text for code in CUSTOM_OPS)
    assert "| CUSTOM (any other custom_code) |" in text


def _vela_like() -> bytes:
    """What Vela writes: the layers as one CUSTOM 'ethos-u' operator reading the command stream (a constant),
    a scratch area and the fast scratch (filled by the NPU driver, so no operator writes them) and the input."""
    b = TFLiteBuilder()
    x = b.add_tensor("input", (1, 8, 8, 3), "int8")
    stream = b.const("command_stream", np.arange(64, dtype=np.uint8), "uint8")
    scratch, fast = b.add_tensor("scratch", (1, 1024), "uint8"), b.add_tensor("scratch_fast", (1, 256), "uint8")
    y = b.add_tensor("output", (1, 4), "int8")
    b.add_op("CUSTOM", [stream, scratch, fast, x], [y], custom_code="ethos-u")
    return b.finish([x], [y])


@pytest.mark.parametrize("command", ["inspect", "validate"])
def test_a_vela_compiled_model_is_named_for_what_it_is(tmp_path: Path, command: str) -> None:
    """inspect (and a pipeline naming it) say the file is a Vela-compiled program, which model to give instead,
    and what inspect reads, rather than that operator 0 reads a tensor that is not a constant."""
    (tmp_path / "int8_vela.tflite").write_bytes(_vela_like())
    write(tmp_path / "p.yaml", "accelbuild: 1\nmodels:\n  - path: int8_vela.tflite\n")
    result = run_cli(command, "int8_vela.tflite" if command == "inspect" else "p.yaml", cwd=tmp_path)
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert "int8_vela.tflite: a Vela-compiled (Arm Ethos-U) model: its layers were compiled into the 'ethos-u' " \
           "custom operator 0" in result.stderr
    assert "the int8.tflite beside it, or the float model" in result.stderr and "(.dfp)" in result.stderr
    assert "not a constant" not in result.stderr


def test_const_value_names_the_tensor_when_an_input_is_not_constant(tmp_path: Path) -> None:
    from accelbuild.frontends.tflite.graph import Graph
    from accelbuild.frontends.tflite.tensors import constant_values

    data = build([(1, 4)], lambda b, x: op(b, "ADD", [x, i32(b, "two", [2, 2, 2, 2])], (1, 4)))
    (tmp_path / "m.tflite").write_bytes(data)
    model = read_model(tmp_path / "m.tflite")
    g = Graph(model, constant_values(model))
    names = {t.name: t.index for t in model.tensors}
    assert g.const_value(names["two"]).tolist() == [2, 2, 2, 2]
    with pytest.raises(ValueError, match="tensor 'in0' is not a constant"):
        g.const_value(names["in0"])
