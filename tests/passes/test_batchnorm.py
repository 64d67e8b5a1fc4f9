"""A constant scale and shift after a convolution (PP-LCNetV3's learnable affine blocks) folded into it, and a
constant scale before convolutions (NFNet's activation gains and block input scales) folded into them."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.passes.batchnorm import fold_input_scale, fold_pad, fold_scale_shift

RNG = np.random.default_rng(0)


def _model(after: list[onnx.NodeProto], constants: dict[str, np.ndarray], outputs: tuple[str, ...] = ("y",),
           transpose: bool = False) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    shape = [1, 4, 9, 9] if transpose else [1, 4, 8, 8]
    ys = [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name in outputs]
    weight = RNG.normal(0, 0.5, (3, 4, 2, 2) if transpose else (4, 3, 3, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(RNG.normal(0, 1, 4).astype(np.float32), "b")]
    inits += [numpy_helper.from_array(v.astype(np.float32), k) for k, v in constants.items()]
    conv = helper.make_node("ConvTranspose" if transpose else "Conv", ["x", "w", "b"], ["c"], name="conv",
                            **({} if transpose else {"pads": [1, 1, 1, 1]}))
    graph = helper.make_graph([conv, *after], "g", [x], ys, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("shape", [(1,), (), (4, 1, 1), (1, 4, 1, 1)])
def test_scale_then_shift_fold_into_the_convolution(shape: tuple[int, ...], transpose: bool) -> None:
    after = [helper.make_node("Mul", ["scale", "c"], ["scaled"], name="lab_scale"),
             helper.make_node("Add", ["scaled", "shift"], ["y"], name="lab_shift")]
    model = _model(after, {"scale": RNG.uniform(0.5, 2, shape), "shift": RNG.normal(0, 1, shape)}, transpose=transpose)
    x = RNG.normal(0, 1, (1, 3, 8, 8)).astype(np.float32)
    want = _run(model, x)
    assert fold_scale_shift(model) == ["Mul lab_scale into conv", "Add lab_shift into conv"]
    assert [(n.op_type, list(n.output)) for n in model.graph.node] == [("ConvTranspose" if transpose else "Conv", ["y"])]
    np.testing.assert_allclose(_run(model, x), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["spatial constant", "conv read twice", "conv is an output", "other operand"])
def test_what_would_change_the_result_is_left_alone(case: str) -> None:
    constants = {"scale": RNG.uniform(0.5, 2, (1,))}
    after = [helper.make_node("Mul", ["c", "scale"], ["y"], name="mul")]
    outputs: tuple[str, ...] = ("y",)
    if case == "spatial constant":  # varies over H: not a per-channel scale
        constants["scale"] = RNG.uniform(0.5, 2, (1, 8, 1))
    elif case == "conv read twice":
        after.append(helper.make_node("Relu", ["c"], ["r"], name="relu"))
        outputs = ("y", "r")
    elif case == "conv is an output":
        outputs = ("y", "c")
    elif case == "other operand":  # the Mul's other input is computed, not a constant
        after = [helper.make_node("Sigmoid", ["c"], ["s"], name="gate"),
                 helper.make_node("Mul", ["c", "s"], ["y"], name="mul")]
    model = _model(after, constants, outputs)
    assert fold_scale_shift(model) == []


def _scaled_inputs(scales: dict[str, np.ndarray], readers: list[onnx.NodeProto], group: int = 1) -> onnx.ModelProto:
    """x -> Relu -> Mul(scale_a) -> Mul(scale_b) -> ``readers`` (of "m"); a 4-channel input."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    outputs = sorted({o for n in readers for o in n.output})
    ys = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs]
    inits = [numpy_helper.from_array(RNG.normal(0, 0.5, (4, 4 // group, 3, 3)).astype(np.float32), "w"),
             *(numpy_helper.from_array(v.astype(np.float32), k) for k, v in scales.items())]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="act"),
             helper.make_node("Mul", ["r", "scale_a"], ["ra"], name="gain"),
             helper.make_node("Mul", ["scale_b", "ra"], ["m"], name="beta"), *readers]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], ys, inits), opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("group", [1, 4])
def test_scales_before_convolutions_fold_into_their_weights(group: int) -> None:
    per_channel = RNG.uniform(0.5, 2, (1, 4, 1, 1)) if group == 1 else RNG.uniform(0.5, 2, ())
    readers = [helper.make_node("Conv", ["m", "w"], ["y1"], name="conv1", pads=[1, 1, 1, 1], group=group),
               helper.make_node("Conv", ["m", "w"], ["y2"], name="conv2", strides=[2, 2], group=group)]
    model = _scaled_inputs({"scale_a": RNG.uniform(0.5, 2, (1,)), "scale_b": per_channel}, readers, group)
    x = RNG.normal(0, 1, (1, 4, 8, 8)).astype(np.float32)
    want = _run(model, x)
    assert fold_input_scale(model) == ["Mul beta into conv1, conv2", "Mul gain into conv1, conv2"]
    assert [n.op_type for n in model.graph.node] == ["Relu", "Conv", "Conv"]
    np.testing.assert_allclose(_run(model, x), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["another reader", "weight operand", "channels of a grouped conv"])
def test_a_scale_a_reader_cannot_take_stays(case: str) -> None:
    scales = {"scale_a": RNG.uniform(0.5, 2, (1,)), "scale_b": RNG.uniform(0.5, 2, (1,))}
    readers = [helper.make_node("Conv", ["m", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])]
    group = 1
    if case == "another reader":  # a pool reads the scaled tensor too
        readers.append(helper.make_node("MaxPool", ["m"], ["p"], name="pool", kernel_shape=[2, 2]))
    elif case == "weight operand":  # the scaled tensor is a convolution's weight, not its input
        readers = [helper.make_node("Conv", ["w", "m"], ["y"], name="conv")]
    else:  # one scale per channel cannot go into a depthwise weight's single input channel
        scales["scale_b"] = RNG.uniform(0.5, 2, (1, 4, 1, 1))
        group = 4
        readers = [helper.make_node("Conv", ["m", "w"], ["y"], name="conv", pads=[1, 1, 1, 1], group=group)]
    model = _scaled_inputs(scales, readers, group)
    assert fold_input_scale(model) == []


def _padded(pads: list[int], mode: str = "constant", reader: str = "Conv") -> onnx.ModelProto:
    """x -> Pad(pads) -> a stride-2 3x3 Conv (or ``reader``): "same" padding as timm and TensorFlow export it."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    inits = [numpy_helper.from_array(RNG.normal(0, 0.5, (4, 4, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(pads, np.int64), "pads")]
    read = helper.make_node("Conv", ["p", "w"], ["y"], name="conv", strides=[2, 2]) if reader == "Conv" else \
        helper.make_node("MaxPool", ["p"], ["y"], name="pool", kernel_shape=[3, 3], strides=[2, 2])
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], name="pad", mode=mode), read]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                                None)], inits),
                              opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return onnx.shape_inference.infer_shapes(model)


def test_a_zero_pad_before_a_convolution_becomes_its_pads() -> None:
    model = _padded([0, 0, 0, 0, 0, 0, 1, 1])  # bottom and right only: TensorFlow's "same" at stride 2
    x = RNG.normal(0, 1, (1, 4, 8, 8)).astype(np.float32)
    want = _run(model, x)
    assert fold_pad(model) == ["pad into conv"]
    (conv,) = model.graph.node
    assert list(helper.get_attribute_value(conv.attribute[-1])) == [0, 0, 1, 1] and conv.input[0] == "x"
    np.testing.assert_allclose(_run(model, x), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["reflect", "channels padded", "pool reads it"])
def test_a_pad_a_convolution_cannot_take_stays(case: str) -> None:
    pads = [0, 1, 0, 0, 0, 1, 1, 1] if case == "channels padded" else [0, 0, 0, 0, 0, 0, 1, 1]
    model = _padded(pads, mode="reflect" if case == "reflect" else "constant",
                    reader="MaxPool" if case == "pool reads it" else "Conv")
    assert fold_pad(model) == []


def test_a_search_round_walks_the_graph_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Twenty constant scales of one convolution's output, summed: none folds (the output has other readers;
    the scaled values feed no convolution). Each pass looks at every Mul and Add with one index of the
    graph's readers, not a walk of the whole graph per node (quadratic in a large model)."""
    from accelbuild.util import onnx_graph as g

    after, last = [], "c"
    for i in range(20):
        after += [helper.make_node("Mul", ["c", "s"], [f"m{i}"], name=f"mul{i}"),
                  helper.make_node("Add", [f"m{i}", last], [f"a{i}"], name=f"add{i}")]
        last = f"a{i}"
    after.append(helper.make_node("Identity", [last], ["y"], name="out"))
    model = _model(after, {"s": RNG.uniform(0.5, 2, (1,))})
    walks: list[str] = []
    real = g.readers, g.sole_consumer, g.ReaderIndex
    monkeypatch.setattr(g, "readers", lambda *a: walks.append("readers") or real[0](*a))
    monkeypatch.setattr(g, "sole_consumer", lambda *a: walks.append("sole_consumer") or real[1](*a))
    monkeypatch.setattr(g, "ReaderIndex", lambda graph: walks.append("index") or real[2](graph))
    assert fold_scale_shift(model) == [] and fold_input_scale(model) == []
    assert walks == ["index", "index"]
