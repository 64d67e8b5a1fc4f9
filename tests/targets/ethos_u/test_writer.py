"""The int8 TFLite writer of family ethos-u, against LiteRT and Vela (both real, from the ethos-u extra)."""

from __future__ import annotations

import hashlib

import pytest

pytest.importorskip("ai_edge_litert")
pytest.importorskip("ethosu.vela")

from ethos_u_models import CASES, conv_relu, feeds  # noqa: E402

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq  # noqa: E402
from accelbuild.targets.ethos_u import vela  # noqa: E402
from accelbuild.targets.ethos_u.tflite.verify import compare, layerwise  # noqa: E402
from accelbuild.targets.ethos_u.tflite.writer import UnsupportedOperatorsError, write_int8_tflite  # noqa: E402

# cases whose output goes through more than one requantization after the last exact one: each may
# round one step away from onnxruntime, so a few values can be two steps off
CHAINED = {"hard_sigmoid_div", "add_sub_mul", "global_pool_mean", "activations", "depthwise_relu6", "pad_slice_split",
           "bounded_into_concat", "one_sided_clip",  # these two: a requantize after the fixed grid or the bound
           "conv_transpose_valid",  # the stem and the transposed conv requantize in a row
           "hard_swish",  # int16: three operators in a row
           "matmul_two_activations",  # int16: the stem, then a float MatMul quantized
           "pad_reflect",  # the stem and the head conv requantize in a row
           "gather_tokens",  # int16: the stem, then the Relu requantizes
           "pad_value"}  # the stem, the requantize before PADV2 and the head in a row
INT16_UNSUPPORTED = {"activations": "PRELU", "depth_to_space": "DEPTH_TO_SPACE"}  # no int16 kernel in TFLite


def _build(name: str, bits: int = 8) -> tuple[bytes, object, list]:
    inputs = feeds()
    config = QdqConfig(conventions="tflite", activation_bits=bits, share_concat_scales=True)
    q = quantize_qdq(CASES[name](), inputs, config)
    return write_int8_tflite(q.model), q.model, inputs


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_writer_matches_qdq_in_litert(name: str, bits: int) -> None:
    if bits == 16 and name in INT16_UNSUPPORTED:
        with pytest.raises(UnsupportedOperatorsError, match=f"{INT16_UNSUPPORTED[name]} has no int16 kernel"):
            _build(name, bits)
        return
    data, qdq, inputs = _build(name, bits)
    layers = layerwise(data, qdq, inputs)  # every operator fed the same codes: within one step
    # int16 Logistic/Tanh/Softmax in TFLite are lookup-table approximations: 2 steps of 1/32768
    lookup_tables = bits == 16 and name in ("bounded", "softmax_into_transpose", "bounded_into_concat")
    assert layers.max_steps <= (2 if lookup_tables else 1) and layers.tensors >= 1, layers
    agreement = compare(data, qdq, inputs)  # end to end: one step per requantization in a chain at most
    # int16 Softmax's lookup table is off by up to 2 steps of 1/32768 for inputs a step apart: 3 end to end
    assert agreement.worst <= (3.01 if lookup_tables and name == "softmax_into_transpose" else
                               2.01 if name in CHAINED else 1.01), agreement
    assert agreement.within_one >= 0.95, agreement


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
@pytest.mark.parametrize("name", ["depthwise_relu6", "gemm_relu", "bounded", "pad_slice_split", "resize_bilinear",
                                  "bounded_into_concat", "softmax_into_transpose", "one_sided_clip",
                                  "conv_transpose_valid", "conv_transpose_same", "matmul_two_activations",
                                  "pad_reflect", "gemm_alpha_beta_trans_a", "pad_value"])
def test_vela_compiles_generated_models(name: str, accelerator: str) -> None:
    data, _, _ = _build(name)
    result = vela.compile_tflite(data, vela.VelaOptions(accelerator))
    assert result.model[4:8] == b"TFL3"
    assert result.cpu_ops == [] and result.npu_ops > 0
    assert result.summary["accelerator_configuration"] == accelerator.replace("ethos-u", "Ethos_U").replace("-", "_")
    assert float(result.summary["inferences_per_second"]) > 0
    assert sum(int(layer["op_cycles"]) for layer in result.layers) > 0


@pytest.mark.parametrize("bits", [8, 16])
def test_vela_runs_hard_swish_on_the_npu(bits: int) -> None:
    data, _, _ = _build("hard_swish", bits)
    result = vela.compile_tflite(data, vela.VelaOptions("ethos-u55-128"))
    assert result.cpu_ops == []
    ops = [layer["original_operator"] for layer in result.layers]
    assert ("HardSwish" in ops) == (bits == 8) and ("Mul" in ops) == (bits == 16), ops


def test_vela_reports_cpu_operators() -> None:
    from ethos_u_models import Net

    n = Net()
    y = n.op("ReduceMean", [n.conv("x", 4, 8, 1, "stem")], "channel_mean", axes=[1], keepdims=1)
    model = n.model(y, [1, 1, 8, 8])
    inputs = feeds()
    data = write_int8_tflite(quantize_qdq(model, inputs, QdqConfig(conventions="tflite")).model)
    result = vela.compile_tflite(data, vela.VelaOptions("ethos-u55-128"))
    assert [(op["op"], op["name"]) for op in result.cpu_ops] == [("MEAN", "channel_mean")]
    assert "depth" in result.cpu_ops[0]["reason"]


def test_vela_leaves_depth_to_space_to_the_cpu_and_says_so() -> None:
    """Vela has no NPU form of DEPTH_TO_SPACE (MediaPipe's full-range detectors): the writer still writes it,
    and Vela's CPU operator list names it, which the build reports."""
    data, _, _ = _build("depth_to_space")
    result = vela.compile_tflite(data, vela.VelaOptions("ethos-u55-128"))
    assert [(op["op"], op["name"]) for op in result.cpu_ops] == [("DEPTH_TO_SPACE", "d2sp")]
    assert result.npu_ops > 0


def test_vela_runs_an_int8_gather_on_the_cpu_without_dequantizing() -> None:
    """GATHER has no NPU form in Vela: written in int8, it is the only CPU operator (no DEQUANTIZE/QUANTIZE)."""
    data, _, _ = _build("gather_tokens")
    result = vela.compile_tflite(data, vela.VelaOptions("ethos-u55-128"))
    assert [(op["op"], op["name"]) for op in result.cpu_ops] == [("GATHER", "picked")]


def test_unsupported_operators_are_listed() -> None:
    """Operators with neither an int8 nor a float TFLite form are refused together, each named with its node,
    and the message says what the user can do; a Div of two tensors is no longer among them (float DIV)."""
    from ethos_u_models import Net

    n = Net()
    y = n.op("Div", [n.conv("x", 4, 8, 1, "stem"), n.conv("x", 4, 8, 1, "other")], "div")
    y = n.op("Erf", [y], "erf")
    y = n.op("Einsum", [y], "einsum", equation="nchw->nc")  # a sum within one operand
    model = n.model(y, [1, 8])
    q = quantize_qdq(model, feeds(), QdqConfig(conventions="tflite"))
    with pytest.raises(UnsupportedOperatorsError) as info:
        write_int8_tflite(q.model)
    assert info.value.exit_code == 2
    assert {(op, name) for op, name, _ in info.value.problems} == {("Erf", "erf"), ("Einsum", "einsum")}
    message = str(info.value)
    assert "Erf (erf)" in message and "Einsum (einsum)" in message and "what to do: crop them" in message


def test_bytes_identical_across_runs() -> None:
    first = [_build("pad_slice_split")[0], _build("bounded", 16)[0]]
    second = [_build("pad_slice_split")[0], _build("bounded", 16)[0]]
    assert first == second
    compiled = [vela.compile_tflite(first[0], vela.VelaOptions("ethos-u55-128")) for _ in range(2)]
    assert hashlib.sha256(compiled[0].model).digest() == hashlib.sha256(compiled[1].model).digest()
    assert compiled[0].per_layer_csv == compiled[1].per_layer_csv


def test_tflite_conventions_fix_bounded_outputs() -> None:
    q = quantize_qdq(CASES["bounded"](), feeds(), QdqConfig(conventions="tflite"))
    records = q.tensors
    assert (records["sigmoid"]["scale"], records["sigmoid"]["zero_point"]) == (1 / 256, -128)
    assert (records["tanh"]["scale"], records["tanh"]["zero_point"]) == (1 / 128, 0)
    assert (records["softmax"]["scale"], records["softmax"]["zero_point"]) == (1 / 256, -128)
    plain = quantize_qdq(conv_relu(), feeds(), QdqConfig(conventions="tflite", activation_bits=16))
    assert all(r["zero_point"] == 0 and r["dtype"] == "int16" for r in plain.tensors.values())


def test_missing_extra_is_exit_2_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vela, "_installed", lambda module: module != "ethosu.vela")
    with pytest.raises(vela.MissingExtraError, match=r"ethos-u-vela: pip install 'accelbuild\[ethos-u\]'") as info:
        vela.require()
    assert info.value.exit_code == 2


@pytest.mark.parametrize("scale", [0.05, None])  # its own parameters, or the tensor's (no requantize)
def test_a_model_ending_in_its_own_quantize_linear_builds(scale: float | None) -> None:
    """The model's output is int8 codes (its own QuantizeLinear after the last layer): written as TFLite's
    requantize (or the same codes) and a transpose back to NCHW; LiteRT's codes match onnxruntime's."""
    import numpy as np
    from ethos_u_models import Net
    from onnx import TensorProto, helper

    from accelbuild.targets.ethos_u.tflite.verify import check

    n = Net()
    y = n.op("Relu", [n.conv("x", 4, 8, 1, "stem")], "relu")
    inputs = feeds()
    if scale is None:  # the QDQ model's own parameters for the Relu's output, read from a first pass
        first = quantize_qdq(n.model(y, [1, 8, 8, 8]), inputs, QdqConfig(conventions="tflite"))
        scale = first.tensors["relu"]["scale"]
        zero = first.tensors["relu"]["zero_point"]
    else:
        zero = -128
    n.nodes.append(helper.make_node("QuantizeLinear", [y, n.const("s", np.float32(scale)),
                                                       n.const("z", np.int8(zero), np.int8)], ["codes"], name="q"))
    graph = helper.make_graph(n.nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("codes", TensorProto.INT8, [1, 8, 8, 8])], n.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    q = quantize_qdq(model, inputs, QdqConfig(conventions="tflite"))
    data = write_int8_tflite(q.model)
    checked = check(data, q.model, inputs)
    assert checked.layers.max_steps <= 1 and checked.outputs.max_steps["codes"] <= 1, checked
    result = vela.compile_tflite(data, vela.VelaOptions("ethos-u55-128"))
    assert result.npu_ops > 0


@pytest.mark.parametrize("attrs", [{"ceil_mode": 1, "pads": [0, 0, 0, 0]}, {"ceil_mode": 1, "pads": [1, 0, 0, 1]},
                                   {"ceil_mode": 0, "pads": [1, 1, 0, 0]}])
def test_max_pool_with_ceil_mode_or_uneven_pads_is_int8(attrs: dict) -> None:
    """A PADV2 with the lowest code, then a VALID MAX_POOL_2D: the same codes as onnxruntime, all on the NPU."""
    from ethos_u_models import Net

    from accelbuild.targets.ethos_u.tflite.verify import check

    n = Net()
    y = n.op("MaxPool", [n.conv("x", 4, 8, 1, "stem")], "pool", kernel_shape=[3, 3], strides=[2, 2], **attrs)
    model = n.model(y, [1, 8, 4, 4])  # 8x8 -> 4x4 in every case (3x3 windows, stride 2)
    inputs = feeds()
    q = quantize_qdq(model, inputs, QdqConfig(conventions="tflite"))
    data = write_int8_tflite(q.model)
    checked = check(data, q.model, inputs)
    assert checked.layers.max_steps <= 1 and checked.outputs.worst <= 1.01, checked
    assert checked.layers.differing.get("MaxPool", 0.0) == 0.0
    result = vela.compile_tflite(data, vela.VelaOptions("ethos-u55-128"))
    assert result.cpu_ops == [] and result.npu_ops > 0
