"""One small single-operator TFLite model per builtin operator, for the TFLite conformance suite.

Each :class:`Case` is a flatbuffer written in-process by :class:`~accelbuild.util.tflite_builder.TFLiteBuilder`
(seeded, tiny tensors) and the range its inputs are drawn from. :data:`CASES` maps an operator name to its
cases; an operator of LiteRT's builtin resolver without an entry is tried through :func:`probe`, a
one-input, one-output model of that operator, which is what a file using it gives the frontend to read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from flatbuffers import flexbuffers

from accelbuild.util.tflite_builder import TFLiteBuilder


@dataclass(frozen=True)
class Case:
    """A model, how to draw its inputs (floats uniform in [low, high), whole numbers when ``integers``;
    int32 inputs whole numbers in [low, high]) and the absolute tolerance of its float outputs."""

    data: bytes
    low: float = -3.0
    high: float = 3.0
    integers: bool = False
    atol: float = 1e-5


Body = Callable[..., "int | list[int]"]


def build(shapes: Sequence[tuple], body: Body, dtypes: Sequence[str] = (), **draw: float | bool) -> Case:
    """Inputs ``in0, in1, ...`` of ``shapes`` (float32 unless ``dtypes`` says), ``body(b, *inputs)`` the rest."""
    b = TFLiteBuilder(0, "accelbuild.testing.tflite_op_cases")
    xs = [b.add_tensor(f"in{k}", s, dtypes[k] if k < len(dtypes) else "float32") for k, s in enumerate(shapes)]
    outs = body(b, *xs)
    return Case(b.finish(xs, outs if isinstance(outs, list) else [outs]), **draw)


def op(b: TFLiteBuilder, builtin: str, inputs: Sequence[int], shape: tuple, options: dict | None = None,
       dtype: str = "float32", name: str = "y") -> int:
    y = b.add_tensor(name, shape, dtype)
    b.add_op(builtin, inputs, [y], options)
    return y


def const(b: TFLiteBuilder, name: str, shape: tuple, scale: float = 0.5) -> int:
    return b.const(name, b.rng.normal(0.0, scale, shape).astype(np.float32))


def ints(b: TFLiteBuilder, name: str, values: Sequence | int) -> int:
    return b.const(name, np.asarray(values, np.int32), "int32")


def unary(builtin: str, shape: tuple = (2, 3, 4), options: dict | None = None, **draw: float | bool) -> Case:
    return build([shape], lambda b, x: op(b, builtin, [x], shape, options), **draw)


def binary(builtin: str, a: tuple = (2, 3, 4), c: tuple = (3, 4), out: tuple = (2, 3, 4), dtype: str = "float32",
           out_dtype: str | None = None, options: dict | None = None, **draw: float | bool) -> Case:
    return build([a, c], lambda b, x, y: op(b, builtin, [x, y], out, options, out_dtype or dtype),
                 (dtype, dtype), **draw)


def compare_select(builtin: str, dtype: str = "float32") -> Case:
    """A comparison's BOOL result picks between its inputs (SELECT_V2), so the graph output is numeric."""
    def body(b: TFLiteBuilder, x: int, y: int) -> int:
        mask = op(b, builtin, [x, y], (2, 3, 4), dtype="bool", name="mask")
        return op(b, "SELECT_V2", [mask, x, y], (2, 3, 4), dtype=dtype)
    return build([(2, 3, 4), (3, 4)], body, (dtype, dtype), low=-2, high=2, integers=True)


def logical(builtin: str) -> Case:
    """Two comparisons' BOOL results combined, then SELECT_V2 between the inputs."""
    def body(b: TFLiteBuilder, x: int, y: int) -> int:
        zero = b.const("zero", np.zeros((), np.float32))
        p = op(b, "GREATER", [x, zero], (2, 3, 4), dtype="bool", name="p")
        q = op(b, "LESS", [y, zero], (2, 3, 4), dtype="bool", name="q")
        both = op(b, builtin, [p, q], (2, 3, 4), dtype="bool", name="both") if builtin != "LOGICAL_NOT" else \
            op(b, builtin, [p], (2, 3, 4), dtype="bool", name="both")
        return op(b, "SELECT_V2", [both, x, y], (2, 3, 4))
    return build([(2, 3, 4), (2, 3, 4)], body)


def reducer(builtin: str, keep: bool = False, **draw: float | bool) -> Case:
    out = (2, 1, 4) if keep else (2, 4)
    return build([(2, 3, 4)], lambda b, x: op(b, builtin, [x, ints(b, "axes", [1])], out, {"keep_dims": keep}),
                 **draw)


def conv(builtin: str, x: tuple, w: tuple, out: tuple, **options: int | str) -> Case:
    def body(b: TFLiteBuilder, v: int) -> int:
        bias = w[3] if builtin == "DEPTHWISE_CONV_2D" else w[0]
        return op(b, builtin, [v, const(b, "w", w), const(b, "b", (bias,))], out,
                  {"padding": "SAME", "stride_h": 1, "stride_w": 1, **options})
    return build([x], body)


def pool(builtin: str) -> Case:
    options = {"padding": "SAME", "stride_h": 2, "stride_w": 2, "filter_height": 3, "filter_width": 3}
    return build([(1, 5, 6, 2)], lambda b, x: op(b, builtin, [x], (1, 3, 3, 2), options))


def rfft2d(reader: str) -> Case:
    """RFFT2D of a [1, 6, 10] signal at fft_length [4, 8] (crops rows, pads columns), read by ``reader``."""
    def body(b: TFLiteBuilder, x: int) -> int:
        spectrum = op(b, "RFFT2D", [x, ints(b, "fft_length", [4, 8])], (1, 4, 5), dtype="complex64",
                      name="spectrum")
        return op(b, reader, [spectrum], (1, 4, 5))
    return build([(1, 6, 10)], body)


def computed_slice() -> Case:
    """SLICE whose begin is computed: [0, 1, 0] + shift * [0, 1, 1] for an int32 input ``shift`` in {0, 1}."""
    def body(b: TFLiteBuilder, x: int, shift: int) -> int:
        moved = op(b, "MUL", [shift, ints(b, "mask", [0, 1, 1])], (3,), dtype="int32", name="moved")
        begin = op(b, "ADD", [ints(b, "base", [0, 1, 0]), moved], (3,), dtype="int32", name="begin")
        return op(b, "SLICE", [x, begin, ints(b, "size", [-1, 2, 3])], (2, 2, 3))
    return build([(2, 5, 4), (3,)], body, ("float32", "int32"), low=0, high=1)


def fill() -> Case:
    def body(b: TFLiteBuilder, value: int) -> int:
        filled = op(b, "FILL", [ints(b, "dims", [2, 3]), value], (2, 3), name="filled")
        return op(b, "ADD", [filled, const(b, "k", (2, 3))], (2, 3))
    return build([()], body)


def _cases() -> dict[str, list[Callable[[], Case]]]:
    c: dict[str, list[Callable[[], Case]]] = {}
    for name, extra in (("ADD", {}), ("SUB", {}), ("MUL", {}), ("MAXIMUM", {}), ("MINIMUM", {}),
                        ("SQUARED_DIFFERENCE", {}), ("DIV", {"low": 0.5, "high": 2.0}),
                        ("POW", {"low": 0.5, "high": 2.0})):
        c[name] = [lambda n=name, e=extra: binary(n, **e)]
    c["FLOOR_DIV"] = [lambda: binary("FLOOR_DIV", low=0.5, high=3.0),
                      lambda: binary("FLOOR_DIV", dtype="int32", low=1, high=7)]
    c["FLOOR_MOD"] = [lambda: binary("FLOOR_MOD", low=0.5, high=3.0),
                      lambda: binary("FLOOR_MOD", dtype="int32", low=1, high=7)]
    for name, extra in (("LOGISTIC", {}), ("NEG", {}), ("TANH", {}), ("RELU", {}), ("RELU6", {"low": -8, "high": 8}),
                        ("RELU_N1_TO_1", {}), ("RELU_0_TO_1", {}), ("HARD_SWISH", {"low": -5, "high": 5}),
                        ("SIN", {}), ("COS", {}), ("EXP", {}), ("FLOOR", {}), ("CEIL", {}), ("ABS", {}),
                        ("SIGN", {}), ("SQUARE", {}), ("ELU", {}), ("LOG", {"low": 0.1, "high": 5}),
                        ("SQRT", {"low": 0.0, "high": 5}), ("RSQRT", {"low": 0.1, "high": 5}),
                        ("ROUND", {"low": -4, "high": 4})):
        c[name] = [lambda n=name, e=extra: unary(n, **e)]
    c["GELU"] = [lambda: unary("GELU", options={"approximate": False}),
                 lambda: unary("GELU", options={"approximate": True})]
    c["LEAKY_RELU"] = [lambda: unary("LEAKY_RELU", options={"alpha": 0.2})]
    c["SOFTMAX"] = [lambda: unary("SOFTMAX", options={"beta": 0.5})]
    c["LOG_SOFTMAX"] = [lambda: unary("LOG_SOFTMAX")]
    c["PRELU"] = [lambda: build([(1, 4, 3)], lambda b, x: op(b, "PRELU", [x, const(b, "alpha", (3,))], (1, 4, 3)))]
    for name in ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL"):
        c[name] = [lambda n=name: compare_select(n)]
    c["SELECT_V2"] = [lambda: compare_select("LESS", "int32")]
    for name in ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT"):
        c[name] = [lambda n=name: logical(n)]
    for name in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"):
        c[name] = [lambda n=name: reducer(n), lambda n=name: reducer(n, keep=True)]
    c["CONV_2D"] = [lambda: conv("CONV_2D", (1, 5, 6, 3), (4, 3, 3, 3), (1, 5, 6, 4))]
    c["DEPTHWISE_CONV_2D"] = [lambda: conv("DEPTHWISE_CONV_2D", (1, 5, 6, 3), (1, 3, 3, 3), (1, 5, 6, 3),
                                           depth_multiplier=1)]
    c["TRANSPOSE_CONV"] = [lambda: build([(1, 3, 3, 2)], lambda b, x: op(
        b, "TRANSPOSE_CONV", [ints(b, "shape", [1, 6, 6, 3]), const(b, "w", (3, 3, 3, 2)), x], (1, 6, 6, 3),
        {"padding": "SAME", "stride_h": 2, "stride_w": 2}))]
    c["FULLY_CONNECTED"] = [lambda: build([(2, 6)], lambda b, x: op(
        b, "FULLY_CONNECTED", [x, const(b, "w", (4, 6)), const(b, "b", (4,))], (2, 4), {}))]
    c["BATCH_MATMUL"] = [lambda: build([(2, 3, 4), (2, 4, 5)], lambda b, x, y: op(b, "BATCH_MATMUL", [x, y],
                                                                                  (2, 3, 5), {}))]
    c["MAX_POOL_2D"] = [lambda: pool("MAX_POOL_2D")]
    c["AVERAGE_POOL_2D"] = [lambda: pool("AVERAGE_POOL_2D")]
    c["CONCATENATION"] = [lambda: build([(1, 2, 3), (1, 4, 3)], lambda b, x, y: op(
        b, "CONCATENATION", [x, y], (1, 6, 3), {"axis": 1}))]
    c["RESHAPE"] = [lambda: build([(2, 6)], lambda b, x: op(b, "RESHAPE", [x, ints(b, "shape", [3, 4])], (3, 4))),
                    lambda: build([(1, 1, 1)], lambda b, x: op(
                        b, "RESHAPE", [x, b.add_tensor("shape", (0,), "int32", np.zeros(0, np.int32))], ()))]
    c["SQUEEZE"] = [lambda: build([(1, 4, 1, 3)], lambda b, x: op(b, "SQUEEZE", [x], (4, 3), {}))]
    c["EXPAND_DIMS"] = [lambda: build([(2, 5)], lambda b, x: op(b, "EXPAND_DIMS", [x, ints(b, "axis", [-1])],
                                                                (2, 5, 1)))]
    c["PAD"] = [lambda: build([(1, 3, 4)], lambda b, x: op(b, "PAD", [x, ints(b, "p", [[0, 0], [1, 2], [0, 1]])],
                                                           (1, 6, 5)))]
    c["PADV2"] = [lambda: build([(1, 3, 4)], lambda b, x: op(
        b, "PADV2", [x, ints(b, "p", [[0, 0], [2, 0], [1, 1]]), b.const("v", np.float32(0.5))], (1, 5, 6)))]
    c["MIRROR_PAD"] = [lambda: build([(1, 4, 5)], lambda b, x: op(
        b, "MIRROR_PAD", [x, ints(b, "p", [[0, 0], [2, 1], [0, 3]])], (1, 7, 8), {"mode": "REFLECT"}))]
    c["TRANSPOSE"] = [lambda: build([(2, 3, 4)], lambda b, x: op(b, "TRANSPOSE", [x, ints(b, "perm", [2, 0, 1])],
                                                                 (4, 2, 3)))]
    c["GATHER"] = [lambda: build([(1, 5, 3)], lambda b, x: op(b, "GATHER", [x, ints(b, "idx", [4, 0, 2])],
                                                              (1, 3, 3), {"axis": 1}))]
    c["PACK"] = [lambda: build([(2, 3), (2, 3)], lambda b, x, y: op(b, "PACK", [x, y], (2, 2, 3),
                                                                    {"values_count": 2, "axis": 1}))]
    c["SLICE"] = [lambda: build([(2, 5, 4)], lambda b, x: op(
        b, "SLICE", [x, ints(b, "begin", [0, 1, 0]), ints(b, "size", [-1, 2, 3])], (2, 2, 3))), computed_slice]
    c["STRIDED_SLICE"] = [lambda: build([(1, 6, 7)], lambda b, x: op(
        b, "STRIDED_SLICE", [x, ints(b, "begin", [0, 1, 0]), ints(b, "end", [1, 5, 7]), ints(b, "strides", [1, 2, 3])],
        (1, 2, 3), {}))]
    c["SPLIT"] = [lambda: build([(2, 6)], lambda b, x: _multi(b, "SPLIT", [ints(b, "axis", 1), x], [(2, 3)] * 2,
                                                             {"num_splits": 2}))]
    c["SPLIT_V"] = [lambda: build([(2, 6)], lambda b, x: _multi(
        b, "SPLIT_V", [x, ints(b, "sizes", [1, 5]), ints(b, "axis", 1)], [(2, 1), (2, 5)], {"num_splits": 2}))]
    c["DEPTH_TO_SPACE"] = [lambda: build([(1, 2, 3, 8)], lambda b, x: op(b, "DEPTH_TO_SPACE", [x], (1, 4, 6, 2),
                                                                         {"block_size": 2}))]
    c["SPACE_TO_DEPTH"] = [lambda: build([(1, 4, 6, 2)], lambda b, x: op(b, "SPACE_TO_DEPTH", [x], (1, 2, 3, 8),
                                                                         {"block_size": 2}))]
    c["RESIZE_BILINEAR"] = [lambda: build([(1, 3, 4, 2)], lambda b, x: op(
        b, "RESIZE_BILINEAR", [x, ints(b, "size", [6, 8])], (1, 6, 8, 2), {}))]
    c["RESIZE_NEAREST_NEIGHBOR"] = [lambda: build([(1, 3, 4, 2)], lambda b, x: op(
        b, "RESIZE_NEAREST_NEIGHBOR", [x, ints(b, "size", [6, 8])], (1, 6, 8, 2), {}))]
    c["SHAPE"] = [lambda: build([(1, 4, 6)], lambda b, x: op(
        b, "RESHAPE", [const(b, "t", (4, 6)), op(b, "SHAPE", [x], (3,), {"out_type": "INT32"}, "int32", "s")],
        (1, 4, 6)))]
    c["QUANTIZE"] = [_quantize_pair]
    c["DEQUANTIZE"] = [_quantize_pair]
    c["FILL"] = [fill]
    c["ZEROS_LIKE"] = [lambda: build([(2, 3)], lambda b, x: op(
        b, "ADD", [op(b, "ZEROS_LIKE", [x], (2, 3), name="zeros"), const(b, "k", (2, 3))], (2, 3)))]
    c["RFFT2D"] = [lambda: rfft2d("COMPLEX_ABS")]
    c["COMPLEX_ABS"] = [lambda: rfft2d("COMPLEX_ABS")]
    c["REAL"] = [lambda: rfft2d("REAL")]
    c["IMAG"] = [lambda: rfft2d("IMAG")]
    _indexing(c)
    _arrays(c)
    _spatial(c)
    _levels(c)
    _scatters(c)
    _recurrent(c)
    _control(c)
    return c


def composite() -> Case:
    """STABLEHLO_COMPOSITE whose decomposition subgraph computes tanh(a) * b + k."""
    def body(b: TFLiteBuilder, x: int, y: int) -> int:
        sub = b.subgraph()
        a, c = sub.add_tensor("a", (2, 3)), sub.add_tensor("b", (2, 3))
        t = op(sub, "TANH", [a], (2, 3), name="t")
        product = op(sub, "MUL", [t, c], (2, 3), {}, name="p")
        result = op(sub, "ADD", [product, const(sub, "k", (2, 3))], (2, 3), {}, name="r")
        index = b.add_subgraph(sub, [a, c], [result], "decomposition")
        return op(b, "STABLEHLO_COMPOSITE", [x, y], (2, 3), {
            "name": "accelbuild.tanh_mul_add", "decomposition_subgraph_index": index, "version": 1,
            "composite_attributes": bytes(flexbuffers.Dumps({"k": 1}))})
    return build([(2, 3), (2, 3)], body)


def if_case(low: float, high: float) -> Case:
    """IF on ``s > 0`` (drawn from [low, high)): then x * x + s, else tanh(x - k) (one branch a constant's)."""
    def body(b: TFLiteBuilder, x: int, s: int) -> int:
        cond = op(b, "GREATER", [s, b.const("zero", np.zeros((1,), np.float32))], (1,), dtype="bool", name="cond")
        then = b.subgraph()
        tx, ts = then.add_tensor("x", (2, 3)), then.add_tensor("s", (1,))
        square = op(then, "MUL", [tx, tx], (2, 3), {}, name="square")
        then_out = op(then, "ADD", [square, ts], (2, 3), {}, name="out")
        other = b.subgraph()
        ex, es = other.add_tensor("x", (2, 3)), other.add_tensor("s", (1,))
        moved = op(other, "SUB", [ex, const(other, "k", (2, 3))], (2, 3), {}, name="moved")
        else_out = op(other, "TANH", [moved], (2, 3), name="out")
        options = {"then_subgraph_index": b.add_subgraph(then, [tx, ts], [then_out], "then"),
                   "else_subgraph_index": b.add_subgraph(other, [ex, es], [else_out], "else")}
        return op(b, "IF", [cond, x, s], (2, 3), options)
    return build([(2, 3), (1,)], body, low=low, high=high)


def while_case() -> Case:
    """WHILE i < 3: i += 1, x = tanh(x) * 1.5 + x (the counter starts as a constant)."""
    def body(b: TFLiteBuilder, x: int) -> list[int]:
        cond = b.subgraph()
        ci, cx = cond.add_tensor("i", (), "int32"), cond.add_tensor("x", (2, 3))
        more = op(cond, "LESS", [ci, ints(cond, "n", 3)], (), dtype="bool", name="more")
        loop = b.subgraph()
        li, lx = loop.add_tensor("i", (), "int32"), loop.add_tensor("x", (2, 3))
        step = op(loop, "ADD", [li, ints(loop, "one", 1)], (), {}, "int32", "next_i")
        t = op(loop, "TANH", [lx], (2, 3), name="t")
        scaled = op(loop, "MUL", [t, loop.const("k", np.float32(1.5))], (2, 3), {}, name="scaled")
        nx = op(loop, "ADD", [scaled, lx], (2, 3), {}, name="next_x")
        options = {"cond_subgraph_index": b.add_subgraph(cond, [ci, cx], [more], "cond"),
                   "body_subgraph_index": b.add_subgraph(loop, [li, lx], [step, nx], "body")}
        outs = [b.add_tensor("count", (), "int32"), b.add_tensor("y", (2, 3))]
        b.add_op("WHILE", [ints(b, "start", 0), x], outs, options)
        return outs
    return build([(2, 3)], body)


def variables() -> Case:
    """CALL_ONCE's initializer assigns a constant to variable ``v``; the main graph reads it, adds the input,
    assigns the sum and reads it again."""
    def body(b: TFLiteBuilder, x: int) -> int:
        init = b.subgraph()
        handle = op(init, "VAR_HANDLE", [], (), {"shared_name": "v"}, "resource", "v")
        init.add_op("ASSIGN_VARIABLE", [handle, const(init, "v0", (2, 3))], [])
        b.add_op("CALL_ONCE", [], [], {"init_subgraph_index": b.add_subgraph(init, [], [], "init")})
        main = op(b, "VAR_HANDLE", [], (), {"shared_name": "v"}, "resource", "v")
        value = op(b, "READ_VARIABLE", [main], (2, 3), name="value")
        total = op(b, "ADD", [x, value], (2, 3), {}, name="total")
        b.add_op("ASSIGN_VARIABLE", [main, total], [])
        again = op(b, "READ_VARIABLE", [main], (2, 3), name="again")
        return op(b, "MUL", [again, x], (2, 3), {})
    return build([(2, 3)], body)


def body_subgraph(b: TFLiteBuilder, function: str | None, dtype: str = "float32") -> int:
    """A reduction body: ``function`` of two scalars (``None``: returns the second, a scatter's "take the
    update")."""
    sub = b.subgraph()
    acc, x = sub.add_tensor("acc", (), dtype), sub.add_tensor("x", (), dtype)
    out = x if function is None else op(sub, function, [acc, x], (), dtype=dtype, name="out")
    return b.add_subgraph(sub, [acc, x], [out], "body")


def stablehlo_reduce_window(function: str, init: float) -> Case:
    """A [1, 2, 3, 1] window with strides [1, 1, 2, 1], window dilations [1, 2, 1, 1] and padding (one side
    negative) over a [2, 5, 6, 3] input."""
    def body(b: TFLiteBuilder, x: int) -> int:
        options = {"window_dimensions": [1, 2, 3, 1], "window_strides": [1, 1, 2, 1], "base_dilations": [1, 1, 1, 1],
                   "window_dilations": [1, 2, 1, 1], "padding": [0, 0, 1, 0, 0, 1, 0, -1],
                   "body_subgraph_index": body_subgraph(b, function)}
        return op(b, "STABLEHLO_REDUCE_WINDOW", [x, b.const("init", np.float32(init))], (2, 4, 3, 2), options)
    return build([(2, 5, 6, 3)], body, low=0.5, high=1.5)


def stablehlo_gather(rows: bool, implicit: bool = False) -> Case:
    """GatherND form: [3, 2] index pairs into a [4, 3, 2] operand (one pair out of range: clamped), or rows
    of it picked by a [2, 3, 1] int32 input in [0, 3] (``tf.gather`` on axis 0; ``implicit``: a [2, 3] input
    with the index vector implicit after its last axis, a form LiteRT 2.3's kernel reads past memory on)."""
    def pairs(b: TFLiteBuilder, x: int) -> int:
        return op(b, "STABLEHLO_GATHER", [x, ints(b, "idx", [[2, 1], [0, 5], [3, -1]])], (3, 2), {
            "offset_dims": [1], "collapsed_slice_dims": [0, 1], "start_index_map": [0, 1], "index_vector_dim": 1,
            "slice_sizes": [1, 1, 2]})

    def picked(b: TFLiteBuilder, x: int, idx: int) -> int:
        return op(b, "STABLEHLO_GATHER", [x, idx], (2, 3, 3, 2), {
            "offset_dims": [2, 3], "collapsed_slice_dims": [0], "start_index_map": [0],
            "index_vector_dim": 2, "slice_sizes": [1, 3, 2]})
    if rows:
        return build([(4, 3, 2), (2, 3) if implicit else (2, 3, 1)], picked, ("float32", "int32"), low=0, high=3)
    return build([(4, 3, 2)], pairs)


def stablehlo_scatter(function: str | None) -> Case:
    """ScatterND form: [3, 2] updates of rows [1, 3, 4] (or [1, 3, 1], repeated, when the body reduces) of a
    [5, 2] operand."""
    def body(b: TFLiteBuilder, x: int, u: int) -> int:
        rows = [[1], [3], [4]] if function is None else [[1], [3], [1]]
        return op(b, "STABLEHLO_SCATTER", [x, ints(b, "idx", rows), u], (5, 2), {
            "update_window_dims": [1], "inserted_window_dims": [0], "scatter_dims_to_operand_dims": [0],
            "index_vector_dim": 1, "update_computation_subgraph_index": body_subgraph(b, function)})
    return build([(5, 2), (3, 2)], body)


def lookup_sparse(combiner: str) -> Case:
    """EMBEDDING_LOOKUP_SPARSE of 5 ids (an int32 input in [0, 3]) with weights (an input in [0, 3)) at sparse
    indices of a [5, 4] dense shape (rows 0, 0, 1, 3, 3: rows 2 and 4 empty) into a [4, 2, 3] table."""
    def body(b: TFLiteBuilder, ids: int, weights: int) -> int:
        indices = ints(b, "indices", [[0, 0], [0, 2], [1, 1], [3, 0], [3, 1]])
        return op(b, "EMBEDDING_LOOKUP_SPARSE", [ids, indices, ints(b, "dense_shape", [5, 4]), weights,
                                                 const(b, "table", (4, 2, 3))], (5, 2, 3),
                  {"combiner": {"SUM": 0, "MEAN": 1, "SQRTN": 2}[combiner]})
    return build([(5,), (5,)], body, ("int32", "float32"), low=0, high=3)


def _control(c: dict[str, list[Callable[[], Case]]]) -> None:
    """Subgraph calls (STABLEHLO_COMPOSITE, IF both ways, WHILE) and resource variables."""
    c["STABLEHLO_COMPOSITE"] = [composite]
    c["IF"] = [lambda: if_case(0.1, 3.0), lambda: if_case(-3.0, -0.1)]
    c["WHILE"] = [while_case]
    c["EMBEDDING_LOOKUP_SPARSE"] = [lambda f=f: lookup_sparse(f) for f in ("SUM", "MEAN", "SQRTN")]
    c["STABLEHLO_GATHER"] = [lambda: stablehlo_gather(False), lambda: stablehlo_gather(True)]
    c["STABLEHLO_SCATTER"] = [lambda f=f: stablehlo_scatter(f) for f in (None, "STABLEHLO_ADD", "STABLEHLO_MULTIPLY",
                                                                         "STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM")]
    c["STABLEHLO_REDUCE_WINDOW"] = [lambda: stablehlo_reduce_window("STABLEHLO_ADD", 0.0),
                                    lambda: stablehlo_reduce_window("STABLEHLO_MAXIMUM", 1.25),
                                    lambda: stablehlo_reduce_window("STABLEHLO_MINIMUM", 0.75),
                                    lambda: stablehlo_reduce_window("STABLEHLO_MULTIPLY", 1.0)]
    for name in ("CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"):
        c[name] = [variables]


def _indexing(c: dict[str, list[Callable[[], Case]]]) -> None:
    """EMBEDDING_LOOKUP, GATHER_ND, SCATTER_ND, the segment reductions, ONE_HOT, TOPK_V2, ARG_MAX/ARG_MIN."""
    c["EMBEDDING_LOOKUP"] = [lambda: build([(4, 3)], lambda b, t: op(b, "EMBEDDING_LOOKUP", [ints(b, "ids", [3, 0, 3]),
                                                                                            t], (3, 3)))]
    c["GATHER_ND"] = [lambda: build([(3, 4, 2)], lambda b, x: op(
        b, "GATHER_ND", [x, ints(b, "idx", [[2, 1], [0, 3], [1, 0]])], (3, 2)))]
    c["SCATTER_ND"] = [lambda: build([(3, 2)], lambda b, u: op(
        b, "SCATTER_ND", [ints(b, "idx", [[1], [3], [1]]), u, ints(b, "shape", [5, 2])], (5, 2)))]
    c["SEGMENT_SUM"] = [lambda: build([(4, 3)], lambda b, x: op(b, "SEGMENT_SUM", [x, ints(b, "ids", [0, 0, 1, 2])],
                                                                (3, 3)))]
    for name in ("UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN"):
        c[name] = [lambda n=name: build([(4, 3)], lambda b, x: op(
            b, n, [x, ints(b, "ids", [2, 0, 2, 1]), ints(b, "segments", 4)], (4, 3)))]
    c["ONE_HOT"] = [lambda: build([(2, 3)], lambda b, i: op(
        b, "ONE_HOT", [i, ints(b, "depth", 4), b.const("on", np.float32(2.0)), b.const("off", np.float32(-1.0))],
        (2, 3, 4), {"axis": -1}), ("int32",), low=0, high=4)]
    c["TOPK_V2"] = [lambda: build([(2, 6)], lambda b, x: _multi_typed(
        b, "TOPK_V2", [x, ints(b, "k", 3)], [((2, 3), "float32"), ((2, 3), "int32")]))]
    for name in ("ARG_MAX", "ARG_MIN"):
        c[name] = [lambda n=name: build([(2, 3, 4)], lambda b, x: op(b, n, [x, ints(b, "axis", [1])], (2, 4),
                                                                     {"output_type": 2}, "int32"))]


def _arrays(c: dict[str, list[Callable[[], Case]]]) -> None:
    """ADD_N, ATAN2, SELECT, CAST, StableHLO element-wise, shifts, and the array operators."""
    c["ADD_N"] = [lambda: build([(2, 3)] * 3, lambda b, *xs: op(b, "ADD_N", list(xs), (2, 3)))]
    c["ATAN2"] = [lambda: build([(2, 3, 4), (2, 3, 4)], lambda b, y, x: op(b, "ATAN2", [y, x], (2, 3, 4)))]
    c["SELECT"] = [lambda: build([(2, 3), (2, 3)], lambda b, x, y: op(
        b, "SELECT", [op(b, "LESS", [x, y], (2, 3), dtype="bool", name="mask"), x, y], (2, 3))),
        lambda: build([(2, 3), (2, 3)], lambda b, x, y: op(
            b, "SELECT", [b.const("rows", np.array([True, False]), "bool"), x, y], (2, 3)))]
    c["CAST"] = [lambda: build([(2, 3)], lambda b, x: op(b, "CAST", [x], (2, 3), dtype="int32"), low=-5, high=5),
                 lambda: build([(2, 3)], lambda b, x: op(b, "CAST", [x], (2, 3)), ("int32",), low=-5, high=5)]
    for name in ("STABLEHLO_ADD", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM"):
        c[name] = [lambda n=name: binary(n, c=(2, 3, 4))]
    c["STABLEHLO_AND"] = [lambda: binary("STABLEHLO_AND", c=(2, 3, 4), dtype="int32", low=0, high=15)]
    c["BITWISE_XOR"] = [lambda: binary("BITWISE_XOR", dtype="int32", low=-20, high=20)]
    c["RIGHT_SHIFT"] = [lambda: build([(2, 3, 4)], lambda b, x: op(
        b, "RIGHT_SHIFT", [x, ints(b, "shift", np.arange(12).reshape(3, 4) % 5)], (2, 3, 4), dtype="int32"),
        ("int32",), low=-100, high=100)]
    c["STABLEHLO_SHIFT_LEFT"] = [lambda: build([(2, 3)], lambda b, x: op(
        b, "STABLEHLO_SHIFT_LEFT", [x, ints(b, "shift", [[0, 1, 2], [3, 4, 5]])], (2, 3), dtype="int32"),
        ("int32",), low=-100, high=100)]
    c["BROADCAST_TO"] = [broadcast_to]
    c["TILE"] = [lambda: build([(2, 3)], lambda b, x: op(b, "TILE", [x, ints(b, "reps", [2, 3])], (4, 9)))]
    c["REVERSE_V2"] = [lambda: build([(2, 3, 4)], lambda b, x: op(b, "REVERSE_V2", [x, ints(b, "axes", [1, -1])],
                                                                  (2, 3, 4)))]
    c["REVERSE_SEQUENCE"] = [lambda: build([(3, 5, 2)], lambda b, x: op(
        b, "REVERSE_SEQUENCE", [x, ints(b, "lengths", [5, 2, 0])], (3, 5, 2), {"seq_dim": 1, "batch_dim": 0}))]
    c["UNPACK"] = [lambda: build([(2, 3, 4)], lambda b, x: _multi(b, "UNPACK", [x], [(2, 4)] * 3,
                                                                  {"num": 3, "axis": 1}))]
    c["RANK"] = [lambda: build([(2, 3)], lambda b, x: op(
        b, "MUL", [x, op(b, "CAST", [op(b, "RANK", [x], (), dtype="int32", name="rank")], (), name="r")], (2, 3)))]
    c["RANGE"] = [lambda: build([()], lambda b, start: op(
        b, "RANGE", [start, b.const("limit", np.float32(7.0)), b.const("delta", np.float32(1.5))], (5,)),
        low=0.0, high=0.5)]
    c["MATRIX_DIAG"] = [lambda: unary_shaped("MATRIX_DIAG", (2, 3), (2, 3, 3))]
    c["MATRIX_SET_DIAG"] = [lambda: build([(2, 3, 4), (2, 3)], lambda b, x, d: op(b, "MATRIX_SET_DIAG", [x, d],
                                                                                  (2, 3, 4)))]
    c["CUMSUM"] = [lambda: build([(2, 3, 4)], lambda b, x: op(b, "CUMSUM", [x, ints(b, "axis", 1)], (2, 3, 4),
                                                              {"exclusive": True, "reverse": True}))]
    for name in ("REDUCE_ANY", "REDUCE_ALL"):
        c[name] = [lambda n=name: build([(2, 3, 4)], lambda b, x: op(b, "SELECT_V2", [op(
            b, n, [op(b, "GREATER", [x, b.const("zero", np.float32(-1.0))], (2, 3, 4), dtype="bool", name="p"),
                   ints(b, "axes", [2])], (2, 3, 1), {"keep_dims": True}, "bool", "q"), x, b.const("k", np.float32(9))],
            (2, 3, 4)))]
    c["BROADCAST_ARGS"] = [lambda: build([(3,), (2,)], lambda b, s, t: op(b, "BROADCAST_ARGS", [s, t], (3,),
                                                                          dtype="int32"),
                                         ("int32", "int32"), low=1, high=1)]
    c["DILATE"] = [lambda: build([(2, 3, 4)], lambda b, x: op(
        b, "DILATE", [x, ints(b, "dilations", [1, 3, 2]), b.const("fill", np.float32(-0.5))], (2, 7, 7)))]
    c["STABLEHLO_PAD"] = [lambda: build([(2, 3, 4)], lambda b, x: op(
        b, "STABLEHLO_PAD", [x, b.const("fill", np.float32(0.25))], (4, 4, 8),
        {"edge_padding_low": [1, -1, 0], "edge_padding_high": [1, 0, 1], "interior_padding": [0, 1, 1]}))]
    c["L2_NORMALIZATION"] = [lambda: unary("L2_NORMALIZATION", options={})]


def _spatial(c: dict[str, list[Callable[[], Case]]]) -> None:
    """SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND, L2_POOL_2D, LOCAL_RESPONSE_NORMALIZATION."""
    c["SPACE_TO_BATCH_ND"] = [lambda: build([(2, 3, 5, 2)], lambda b, x: op(
        b, "SPACE_TO_BATCH_ND", [x, ints(b, "block", [2, 3]), ints(b, "pads", [[1, 0], [0, 1]])], (12, 2, 2, 2)))]
    c["BATCH_TO_SPACE_ND"] = [lambda: build([(12, 2, 2, 2)], lambda b, x: op(
        b, "BATCH_TO_SPACE_ND", [x, ints(b, "block", [2, 3]), ints(b, "crops", [[1, 0], [0, 1]])], (2, 3, 5, 2))),
        lambda: build([(8, 2, 3, 1)], lambda b, x: op(
            b, "BATCH_TO_SPACE_ND", [x, ints(b, "block", [2, 2]), ints(b, "crops", [[0, 0], [0, 0]])], (2, 4, 6, 1)))]
    for function in ("ADD", "MAXIMUM", "MINIMUM"):
        c.setdefault("REDUCE_WINDOW", []).append(lambda f=function: build([(2, 5, 6, 3)], lambda b, x: op(
            b, "REDUCE_WINDOW", [x, b.const("init", np.float32(0.5)), b.const("window", np.array([1, 2, 3, 1]), "int64"),
                                 b.const("strides", np.array([1, 1, 2, 1]), "int64"),
                                 b.const("dilations", np.array([1, 2, 1, 1]), "int64")],
            (2, 3, 2, 3), {"reduce_function": {"ADD": 1, "MAXIMUM": 4, "MINIMUM": 3}[f]})))
    c["L2_POOL_2D"] = [lambda: pool("L2_POOL_2D")]
    c["LOCAL_RESPONSE_NORMALIZATION"] = [lambda: unary("LOCAL_RESPONSE_NORMALIZATION", (1, 3, 4, 7), {
        "radius": 2, "bias": 1.5, "alpha": 0.3, "beta": 0.75})]


def _levels(c: dict[str, list[Callable[[], Case]]]) -> None:
    """BUCKETIZE, FAKE_QUANT."""
    c["BUCKETIZE"] = [lambda: build([(2, 3, 4)], lambda b, x: op(b, "BUCKETIZE", [x], (2, 3, 4), {
        "boundaries": [-1.5, 0.0, 0.25, 2.0]}, "int32"))]
    c["FAKE_QUANT"] = [lambda: unary("FAKE_QUANT", options={"min": -1.3, "max": 2.1, "num_bits": 4}),
                       lambda: unary("FAKE_QUANT", options={"min": -2.0, "max": 1.0, "num_bits": 8})]


def unary_shaped(builtin: str, shape: tuple, out: tuple) -> Case:
    return build([shape], lambda b, x: op(b, builtin, [x], out))


def _scatters(c: dict[str, list[Callable[[], Case]]]) -> None:
    """SPARSE_TO_DENSE, DYNAMIC_UPDATE_SLICE (computed starts, one of them clamped)."""
    c["SPARSE_TO_DENSE"] = [lambda: build([(3,)], lambda b, v: op(
        b, "SPARSE_TO_DENSE", [ints(b, "idx", [[0, 1], [2, 3], [1, 0]]), ints(b, "shape", [3, 4]), v,
                               b.const("default", np.float32(0.5))], (3, 4), {}))]

    def update(b: TFLiteBuilder, x: int, u: int, starts: int) -> int:
        return op(b, "DYNAMIC_UPDATE_SLICE", [x, u, starts], (4, 5))
    c["CONV_3D"] = [lambda: build([(1, 4, 5, 6, 2)], lambda b, x: op(
        b, "CONV_3D", [x, const(b, "w", (3, 3, 2, 2, 4)), const(b, "b", (4,))], (1, 4, 3, 3, 4),
        {"padding": "SAME", "stride_d": 1, "stride_h": 2, "stride_w": 2, "dilation_d_factor": 1,
         "dilation_h_factor": 1, "dilation_w_factor": 1, "fused_activation_function": "RELU"})),
        lambda: build([(1, 5, 5, 4, 3)], lambda b, x: op(
            b, "CONV_3D", [x, const(b, "w", (2, 3, 2, 3, 2))], (1, 2, 3, 3, 2),
            {"padding": "VALID", "stride_d": 2, "stride_h": 1, "stride_w": 1, "dilation_d_factor": 1,
             "dilation_h_factor": 1, "dilation_w_factor": 1}))]
    c["CONV_3D_TRANSPOSE"] = [lambda: build([(1, 2, 3, 3, 2)], lambda b, x: op(
        b, "CONV_3D_TRANSPOSE", [ints(b, "shape", [1, 4, 5, 6, 3]), const(b, "w", (3, 3, 2, 3, 2)), x,
                                 const(b, "b", (3,))], (1, 4, 5, 6, 3),
        {"padding": "SAME", "stride_d": 2, "stride_h": 2, "stride_w": 2, "dilation_d_factor": 1,
         "dilation_h_factor": 1, "dilation_w_factor": 1}))]
    c["DYNAMIC_UPDATE_SLICE"] = [lambda: build([(4, 5), (2, 3), (2,)], update, ("float32", "float32", "int32"),
                                               low=-1, high=3)]


def rnn(builtin: str, x: tuple, options: dict) -> Case:
    """An RNN of 4 units over ``x`` (its last axis: 3 features) from the zero state."""
    def body(b: TFLiteBuilder, v: int) -> int:
        batch = x[0] if builtin == "RNN" or not options.get("time_major") else x[1]
        state = b.add_tensor("state", (batch, 4), variable=True)
        out = (*x[:-1], 4)
        return op(b, builtin, [v, const(b, "w", (4, 3)), const(b, "r", (4, 4)), const(b, "b", (4,)), state], out,
                  options)
    return build([x], body)


def lstm(builtin: str, x: tuple, options: dict, peepholes: bool = False) -> Case:
    """An LSTM of 4 units over ``x`` (3 features) from zero states; 24 inputs, the optional ones omitted."""
    def body(b: TFLiteBuilder, v: int) -> int:
        batch = x[0] if builtin == "LSTM" or not options.get("time_major") else x[1]
        inputs = [v] + [const(b, f"w{k}", (4, 3)) for k in range(4)] + [const(b, f"r{k}", (4, 4)) for k in range(4)]
        inputs += [const(b, f"p{k}", (4,)) for k in range(3)] if peepholes else [-1] * 3
        inputs += [const(b, f"b{k}", (4,)) for k in range(4)] + [-1, -1]
        inputs += [b.add_tensor("h", (batch, 4), variable=True), b.add_tensor("c", (batch, 4), variable=True)]
        inputs += [-1] * 4
        return op(b, builtin, inputs, (*x[:-1], 4), options)
    return build([x], body)


def bidi_rnn(x: tuple, options: dict) -> Case:
    """A bidirectional RNN of 4 units per direction over ``x`` (3 features), merged or two outputs."""
    def body(b: TFLiteBuilder, v: int) -> int | list[int]:
        batch = x[1] if options.get("time_major", True) else x[0]
        inputs = [v]
        for d in ("fw", "bw"):
            inputs += [const(b, f"{d}_w", (4, 3)), const(b, f"{d}_r", (4, 4)), const(b, f"{d}_b", (4,)),
                       b.add_tensor(f"{d}_h", (batch, 4), variable=True)]
        return _outputs(b, "BIDIRECTIONAL_SEQUENCE_RNN", inputs + [-1] * 3, x, options)
    return build([x], body)


def bidi_lstm(x: tuple, options: dict, peepholes: bool = False) -> Case:
    """A bidirectional LSTM of 4 units per direction over ``x`` (3 features), 48 inputs."""
    def body(b: TFLiteBuilder, v: int) -> int | list[int]:
        batch = x[1] if options.get("time_major", True) else x[0]
        inputs = [v]
        for d in ("fw", "bw"):
            inputs += [const(b, f"{d}_w{k}", (4, 3)) for k in range(4)]
            inputs += [const(b, f"{d}_r{k}", (4, 4)) for k in range(4)]
            inputs += [const(b, f"{d}_p{k}", (4,)) for k in range(3)] if peepholes else [-1] * 3
            inputs += [const(b, f"{d}_b{k}", (4,)) for k in range(4)] + [-1, -1]
        for d in ("fw", "bw"):
            inputs += [b.add_tensor(f"{d}_h", (batch, 4), variable=True),
                       b.add_tensor(f"{d}_c", (batch, 4), variable=True)]
        return _outputs(b, "BIDIRECTIONAL_SEQUENCE_LSTM", inputs + [-1] * 9, x, options)
    return build([x], body)


def _outputs(b: TFLiteBuilder, builtin: str, inputs: list[int], x: tuple, options: dict) -> int | list[int]:
    if options.get("merge_outputs"):
        return op(b, builtin, inputs, (*x[:2], 8), options)
    outs = [b.add_tensor("fw_out", (*x[:2], 4)), b.add_tensor("bw_out", (*x[:2], 4))]
    b.add_op(builtin, inputs, outs, options)
    return outs


def nms(builtin: str, score_threshold: float = 0.2) -> Case:
    """Ten random boxes (corners in [0, 1), in either order) and scores; at most 6 kept (fewer, zeros after
    them, with a high ``score_threshold``)."""
    def body(b: TFLiteBuilder, boxes: int, scores: int) -> list[int]:
        inputs = [boxes, scores, ints(b, "max_output", 6), b.const("iou", np.float32(0.3)),
                  b.const("score_threshold", np.float32(score_threshold))]
        outs = [("selected", (6,), "int32")]
        if builtin == "NON_MAX_SUPPRESSION_V5":
            inputs.append(b.const("sigma", np.float32(0.0)))
            outs.append(("selected_scores", (6,), "float32"))
        indices = [b.add_tensor(name, shape, dtype) for name, shape, dtype in [*outs, ("valid", (), "int32")]]
        b.add_op(builtin, inputs, indices)
        return indices
    return build([(10, 4), (10,)], body, low=0.0, high=1.0)


def _recurrent(c: dict[str, list[Callable[[], Case]]]) -> None:
    for name in ("NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5"):
        c[name] = [lambda n=name: nms(n), lambda n=name: nms(n, 0.6)]
    c["SVDF"] = [lambda: build([(2, 3)], lambda b, x: op(
        b, "SVDF", [x, const(b, "wf", (6, 3)), const(b, "wt", (6, 5)), const(b, "b", (3,)),
                    b.add_tensor("state", (2, 30), variable=True)], (2, 3),
        {"rank": 2, "fused_activation_function": "RELU"}))]
    c["BIDIRECTIONAL_SEQUENCE_RNN"] = [
        lambda: bidi_rnn((5, 2, 3), {"time_major": True, "merge_outputs": True, "fused_activation_function": "TANH"}),
        lambda: bidi_rnn((2, 5, 3), {"time_major": False, "merge_outputs": False,
                                     "fused_activation_function": "RELU"})]
    c["BIDIRECTIONAL_SEQUENCE_LSTM"] = [
        lambda: bidi_lstm((5, 2, 3), {"time_major": True, "merge_outputs": True, "fused_activation_function": "TANH"}),
        lambda: bidi_lstm((2, 5, 3), {"time_major": False, "merge_outputs": False,
                                      "fused_activation_function": "TANH"}, peepholes=True)]
    c["RNN"] = [lambda: rnn("RNN", (2, 3), {"fused_activation_function": "TANH"})]
    c["UNIDIRECTIONAL_SEQUENCE_RNN"] = [
        lambda: rnn("UNIDIRECTIONAL_SEQUENCE_RNN", (5, 2, 3), {"time_major": True, "fused_activation_function": "TANH"}),
        lambda: rnn("UNIDIRECTIONAL_SEQUENCE_RNN", (2, 5, 3), {"time_major": False, "fused_activation_function": "RELU"})]
    c["LSTM"] = [lambda: lstm("LSTM", (2, 3), {"fused_activation_function": "TANH"})]
    c["UNIDIRECTIONAL_SEQUENCE_LSTM"] = [
        lambda: lstm("UNIDIRECTIONAL_SEQUENCE_LSTM", (2, 5, 3), {"fused_activation_function": "TANH"}),
        lambda: lstm("UNIDIRECTIONAL_SEQUENCE_LSTM", (5, 2, 3), {"fused_activation_function": "TANH",
                                                               "time_major": True}, peepholes=True)]


def broadcast_to() -> Case:
    """BROADCAST_TO (LiteRT registers it from version 2) of a [3, 1] input to [2, 3, 4]."""
    def body(b: TFLiteBuilder, x: int) -> int:
        y = b.add_tensor("y", (2, 3, 4))
        b.add_op("BROADCAST_TO", [x, ints(b, "shape", [2, 3, 4])], [y], version=2)
        return y
    return build([(3, 1)], body)


def _multi_typed(b: TFLiteBuilder, builtin: str, inputs: list[int], outs: list[tuple[tuple, str]],
                 options: dict | None = None) -> list[int]:
    indices = [b.add_tensor(f"y{k}", shape, dtype) for k, (shape, dtype) in enumerate(outs)]
    b.add_op(builtin, inputs, indices, options)
    return indices


def _multi(b: TFLiteBuilder, builtin: str, inputs: list[int], shapes: list[tuple], options: dict) -> list[int]:
    outs = [b.add_tensor(f"y{k}", s) for k, s in enumerate(shapes)]
    b.add_op(builtin, inputs, outs, options)
    return outs


def _quantize_pair() -> Case:
    """A float activation quantized to int8 and back (scale 0.05): the graph computes in float."""
    from accelbuild.util.tflite_builder import Quant

    def body(b: TFLiteBuilder, x: int) -> int:
        q = b.add_tensor("q", (2, 3), "int8", quant=Quant([0.05], [0]))
        b.add_op("QUANTIZE", [x], [q])
        return op(b, "DEQUANTIZE", [q], (2, 3))
    return build([(2, 3)], body, low=-2.0, high=2.0, atol=0.026)  # LiteRT rounds to the step, float does not


def _densify() -> Case:
    """A sparse (CSR) constant densified, then added to the input."""
    from accelbuild.testing.tflite_models import sparsify

    def body(b: TFLiteBuilder, x: int) -> int:
        dense = np.array([[0.0, 1.5, 0.0, -2.0], [3.0, 0.0, 0.0, 0.5]], np.float32)
        values, spec = sparsify(dense)
        sparse = b.add_tensor("sparse", dense.shape, data=values, sparsity=spec)
        densified = op(b, "DENSIFY", [sparse], dense.shape, name="dense")
        return op(b, "ADD", [x, densified], dense.shape)
    return build([(2, 4)], body)


CASES: dict[str, list[Callable[[], Case]]] = {**_cases(), "DENSIFY": [_densify]}


def probe(builtin: str, version: int = 1) -> Case:
    """``builtin`` (at operator ``version``) with one float [1, 4] input and output and no options."""
    def body(b: TFLiteBuilder, x: int) -> int:
        y = b.add_tensor("y", (1, 4))
        b.add_op(builtin, [x], [y], version=version)
        return y
    return build([(1, 4)], body)
