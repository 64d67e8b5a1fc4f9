"""Operator-support predicates of family npu: the reasons (user messages) and the documentation rows."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq
from accelbuild.targets.npu import support
from accelbuild.targets.npu.graph_info import GraphInfo
from accelbuild.targets.npu.hardware import load_npu_hardware
from accelbuild.testing import npu_graphs


def _model(op: str, in_shape: list[int], out_shape: list[int], weight: tuple[int, ...] | None = None,
           extra: list[str] | None = None, domain: str = "", inits: list[onnx.TensorProto] | None = None,
           **attrs: object) -> tuple[GraphInfo, onnx.NodeProto]:
    inputs = ["x"] + (["w"] if weight else []) + (extra or [])
    tensors = list(inits or [])
    if weight:
        tensors.append(numpy_helper.from_array(np.ones(weight, np.float32), "w"))
    node = helper.make_node(op, inputs, ["y"], name="n", domain=domain, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], tensors)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    info = GraphInfo.of(model)
    return info, info.node("n")


def _check(platform: str, info: GraphInfo, node: onnx.NodeProto, **support_changes: object) -> tuple[bool, str]:
    """``node`` on a built-in profile, with ``support_changes`` (Support fields) where a test needs a setting
    no built-in profile has."""
    hw = load_npu_hardware(platform)
    if support_changes:
        hw = dataclasses.replace(hw, support=dataclasses.replace(hw.support, **support_changes))
    return support.is_supported(node, info, hw)


def test_plain_conv_is_supported_everywhere() -> None:
    info, node = _model("Conv", [1, 16, 8, 8], [1, 16, 8, 8], (16, 16, 3, 3), kernel_shape=[3, 3], pads=[1] * 4)
    for platform in ("tda4vm", "am68a", "am62a", "mlsoc", "x3", "x5"):
        assert _check(platform, info, node) == (True, "")


@pytest.mark.parametrize("attrs,weight,reason", [
    ({"kernel_shape": [9, 9], "pads": [4] * 4}, (16, 16, 9, 9), "kernel 9x9 is larger than 7x7"),
    ({"kernel_shape": [3, 3], "pads": [1] * 4, "strides": [4, 4]}, (16, 16, 3, 3), "stride 4 is larger than 2"),
    ({"kernel_shape": [3, 3], "pads": [8] * 4, "dilations": [8, 8]}, (16, 16, 3, 3), "dilation 8 is larger than 4"),
])
def test_conv_window_limits(attrs: dict, weight: tuple[int, ...], reason: str) -> None:
    stride = attrs.get("strides", [1])[0]
    size = 8 // stride
    info, node = _model("Conv", [1, 16, 8, 8], [1, 16, size, size], weight, **attrs)
    assert _check("tda4vm", info, node) == (False, reason)


def test_grouped_conv_rules() -> None:
    depthwise = _model("Conv", [1, 16, 8, 8], [1, 16, 8, 8], (16, 1, 3, 3), kernel_shape=[3, 3], pads=[1] * 4,
                       group=16)
    grouped = _model("Conv", [1, 16, 8, 8], [1, 16, 8, 8], (16, 8, 3, 3), kernel_shape=[3, 3], pads=[1] * 4, group=2)
    assert _check("tda4vm", *depthwise, conv_grouped="depthwise") == (True, "")
    assert _check("tda4vm", *grouped, conv_grouped="depthwise") == (
        False, "grouped (2 groups) convolutions are not supported on tda4vm")
    assert _check("tda4vm", *depthwise, conv_grouped="none") == (
        False, "depthwise convolutions are not supported on tda4vm")
    assert _check("x3", *grouped) == (True, "")  # the RDK X3 list limits channels per group, not groups


def test_conv_transpose_where_the_profile_says_so() -> None:
    info, node = _model("ConvTranspose", [1, 16, 8, 8], [1, 16, 16, 16], (16, 16, 2, 2), kernel_shape=[2, 2],
                        strides=[2, 2])
    assert _check("x5", info, node) == (True, "")
    assert _check("x5", info, node, conv_transpose=False) == (False, "ConvTranspose is not supported on x5")


def test_an_operator_can_have_its_own_window() -> None:
    """The RDK X3 list: Conv kernels up to 7x7 but ConvTranspose up to 14x14; MaxPool windows up to 64x64 but
    AveragePool up to 7x7."""
    transpose = _model("ConvTranspose", [1, 8, 8, 8], [1, 8, 32, 32], (8, 8, 12, 12), kernel_shape=[12, 12],
                       strides=[4, 4], pads=[4] * 4)
    conv = _model("Conv", [1, 8, 8, 8], [1, 8, 8, 8], (8, 8, 9, 9), kernel_shape=[9, 9], pads=[4] * 4)
    max_pool = _model("MaxPool", [1, 8, 16, 16], [1, 8, 16, 16], kernel_shape=[13, 13], pads=[6] * 4)
    average_pool = _model("AveragePool", [1, 8, 16, 16], [1, 8, 16, 16], kernel_shape=[13, 13], pads=[6] * 4)
    assert _check("x3", *transpose) == (True, "")
    assert _check("x3", *conv) == (False, "kernel 9x9 is larger than 7x7")
    assert _check("x3", *max_pool) == (True, "")
    assert _check("x3", *average_pool) == (False, "pooling window 13x13 is larger than 7x7")
    rows = dict(support.rows(load_npu_hardware("x3")))
    assert "window at most 64x64, stride at most 185" in rows["MaxPool"]
    assert "window at most 7x7, stride at most 185" in rows["AveragePool"]
    assert "kernel at most 7x7," in rows["Conv"] and "kernel at most 14x14," in rows["ConvTranspose"]


def test_an_operator_limited_to_a_number_of_elements() -> None:
    """The RDK X3 list runs Sigmoid on the BPU up to 8192 elements a frame: a squeeze-excitation gate
    (C x 1 x 1) runs there, a detector's 80 x 80 score map does not."""
    gate = _model("Sigmoid", [1, 256, 1, 1], [1, 256, 1, 1])
    scores = _model("Sigmoid", [1, 80, 80, 80], [1, 80, 80, 80])
    assert _check("x3", *gate) == (True, "")
    assert _check("x3", *scores) == (False, "x has 512000 elements a frame; x3 runs Sigmoid on at most 8192")
    assert _check("x5", *scores) == (True, "")
    rows = dict(support.rows(load_npu_hardware("x3")))
    assert rows["Sigmoid"].startswith("VPU (vector). Requires: at most 8192 elements a frame (C x H x W)")


def test_pool_window() -> None:
    info, node = _model("MaxPool", [1, 8, 16, 16], [1, 8, 16, 16], kernel_shape=[5, 5], pads=[2] * 4)
    assert _check("tda4vm", info, node) == (False, "pooling window 5x5 is larger than 3x3")
    assert _check("mlsoc", info, node) == (True, "")


def test_resize_modes_and_scales() -> None:
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")
    linear = _model("Resize", [1, 8, 8, 8], [1, 8, 16, 16], extra=["", "s"], inits=[scales], mode="linear")
    assert _check("x5", *linear) == (True, "")
    assert _check("mlsoc", *linear) == (False, "Resize mode linear is not supported on mlsoc (nearest)")
    odd = numpy_helper.from_array(np.array([1, 1, 1.5, 1.5], np.float32), "s")
    fractional = _model("Resize", [1, 8, 8, 8], [1, 8, 12, 12], extra=["", "s"], inits=[odd], mode="nearest")
    assert _check("tda4vm", *fractional) == (False, "Resize scale 1.5 is not a whole number")
    assert _check("x5", *fractional) == (True, "")


def test_softmax_axis() -> None:
    last = _model("Softmax", [1, 10], [1, 10], axis=-1)
    first = _model("Softmax", [4, 10], [4, 10], axis=0)
    assert _check("tda4vm", *last) == (True, "")
    assert _check("tda4vm", *first) == (False, "Softmax over axis 0; tda4vm runs it over the last axis only")
    assert _check("x3", *last) == (False, "Softmax is not an operator the x3 NPU runs")


def test_rank_and_channels() -> None:
    """x3's operator list limits channels to 2048; mlsoc has no limit (SiMa's zoo runs RegNetY-16GF's 3,024)."""
    info, node = _model("Relu", [1, 2, 3, 4, 5], [1, 2, 3, 4, 5])
    assert _check("tda4vm", info, node) == (False, "x is 5-D; the NPU takes at most 4-D tensors")
    wide = _model("Relu", [1, 4096, 2, 2], [1, 4096, 2, 2])
    assert _check("x3", *wide) == (False, "x has 4096 channels; the NPU takes at most 2048")
    assert _check("tda4vm", *wide) == (True, "")
    assert _check("mlsoc", *_model("Relu", [1, 3024, 7, 7], [1, 3024, 7, 7])) == (True, "")


def test_an_operator_can_take_higher_ranks_than_the_rest() -> None:
    """x5's operator list: 4-D tensors, except where an operator's row says more (reshapes and elementwise
    ops up to 10-D), so a 5-D Relu or 6-D Reshape runs on the NPU while a 5-D Softmax does not."""
    relu = _model("Relu", [1, 2, 3, 4, 5], [1, 2, 3, 4, 5])
    reshape = _model("Reshape", [1, 2, 3, 4, 5, 6], [1, 6, 4, 30], extra=["shape"],
                     inits=[numpy_helper.from_array(np.array([1, 6, 4, 30], np.int64), "shape")])
    softmax = _model("Softmax", [1, 2, 3, 4, 5], [1, 2, 3, 4, 5], axis=-1)
    assert _check("x5", *relu) == (True, "")
    assert _check("x5", *reshape) == (True, "")
    assert _check("x5", *softmax) == (False, "x is 5-D; the NPU takes at most 4-D tensors")
    assert _check("tda4vm", *reshape) == (False, "x is 6-D; the NPU takes at most 4-D tensors")
    rows = dict(support.rows(load_npu_hardware("x5")))
    assert rows["Reshape"].startswith("TRANS (layout). Requires: tensors of rank 10 or less")
    assert "an operator's row gives its own rank" in rows["(every operator)"]


def test_div_by_a_run_time_tensor_where_the_profile_says_so() -> None:
    info, node = _model("Div", [1, 8, 4, 4], [1, 8, 4, 4], extra=["x"])
    assert _check("x5", info, node) == (True, "")
    assert _check("tda4vm", info, node) == (
        False, "Div by a tensor computed at run time; the NPU divides by constants only")
    by_constant = _model("Div", [1, 8, 4, 4], [1, 8, 4, 4], extra=["c"],
                         inits=[numpy_helper.from_array(np.array(1.4142, np.float32), "c")])
    assert _check("tda4vm", *by_constant) == (True, "")
    assert _check("x3", info, node) == (True, "")  # the RDK X3 list: feature maps on both sides
    assert _check("x3", *by_constant) == (True, "")  # as a Mul by the reciprocal (see the x3 profile's sources)


def test_expand_along_one_axis_only() -> None:
    def expand(before: list[int], after: list[int]) -> tuple[GraphInfo, onnx.NodeProto]:
        return _model("Expand", before, after, extra=["shape"],
                      inits=[numpy_helper.from_array(np.array(after, np.int64), "shape")])
    assert _check("x5", *expand([1, 4, 8, 1], [1, 4, 8, 16])) == (True, "")
    assert _check("x5", *expand([1, 4, 1, 1], [1, 4, 8, 16])) == (
        False, "Expand broadcasts along 2 axes; x5 expands along one axis only")
    assert _check("tda4vm", *expand([1, 4, 8, 1], [1, 4, 8, 16])) == (
        False, "Expand is not an operator the tda4vm NPU runs")


def test_custom_and_unknown_ops_never_run() -> None:
    info, node = _model("Mystery", [1, 4], [1, 4], domain="com.example")
    for platform in ("tda4vm", "x5"):
        assert _check(platform, info, node) == (False, "custom operator com.example.Mystery runs on the host")
    sin = _model("Sin", [1, 4], [1, 4])
    assert _check("x5", *sin) == (False, "Sin is not an operator the x5 NPU runs")


def test_sixteen_bit_layers_only_where_the_profile_allows() -> None:
    model = npu_graphs.chain(["conv"], channels=8, size=8)
    feeds = [{"x": np.random.default_rng(0).standard_normal((1, 8, 8, 8)).astype(np.float32)}]
    qdq = quantize_qdq(model, feeds, QdqConfig(weight_bits=16, activation_bits=16)).model
    info = GraphInfo.of(qdq)
    conv = info.node("l0.conv")
    assert info.weight_bits(conv) == 16 and info.activation_bits(conv) == 16
    assert support.is_supported(conv, info, load_npu_hardware("x5")) == (True, "")
    ok, reason = support.is_supported(conv, info, load_npu_hardware("x3"))
    assert not ok and reason == "16-bit weights; x3 takes 8-bit weights"


def test_unsupported_lists_every_host_layer_in_order() -> None:
    model = npu_graphs.chain(["conv", "sin", "pool5", "conv", "custom"], channels=8, size=8)
    info = GraphInfo.of(model)
    reasons = support.unsupported(info, load_npu_hardware("tda4vm"))
    assert list(reasons) == ["l1.sin", "l2.pool5", "l4.custom"]


def test_rows_document_the_profile_limits() -> None:
    rows = dict(support.rows(load_npu_hardware("tda4vm")))
    assert rows["Conv"].startswith("MMA (matrix). Requires: kernel at most 7x7, stride at most 2, dilation at most 4")
    assert "window at most 3x3" in rows["MaxPool"]
    assert rows["Resize"].startswith("C7x (vector). Requires: mode nearest or linear, up to 4x per axis")
    assert "custom and vendor-domain operators always run on the host" in rows["(every operator)"]
    assert rows["anything else"] == "runs on the host: Cortex-A72 or C7x (offload.host: dsp)"
    x5 = dict(support.rows(load_npu_hardware("x5")))
    assert x5["anything else"] == "runs on the host: Cortex-A55"
