"""The npu cost model and scheduler: hand-computed costs per unit kind, batch, effort, compile mode, records."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq
from accelbuild.targets.npu.hardware import load_npu_hardware
from accelbuild.targets.npu.schedule import _ahead, _Idle, schedule, stream_band
from accelbuild.testing import models, npu_graphs

from .hand_profile import hand_x5

X5 = hand_x5()  # the stated values the hand computations below use


def _four_units() -> onnx.ModelProto:
    """Conv 1x1 32->32 on 8x8 (TAE), Sigmoid (VAE), MaxPool 2x2/2 (AAE), Transpose (TRANS)."""
    w = numpy_helper.from_array(np.full((32, 32, 1, 1), 0.01, np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["conv"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("Sigmoid", ["conv"], ["sig"], name="sig"),
             helper.make_node("MaxPool", ["sig"], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Transpose", ["pool"], ["y"], name="t", perm=[0, 1, 3, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 4, 4])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_cost_model_by_hand_one_layer_per_unit_kind() -> None:
    sched = schedule(_four_units(), X5, effort="lazy")
    conv, sig, pool, trans = sched.layers
    assert [p.layer.unit for p in sched.layers] == ["TAE", "VAE", "AAE", "TRANS"]
    # compute: matrix MACs / (5000 x 0.5 x util 1); vector 2 ops per Sigmoid element / (128 x 0.5);
    # pool 512 outputs x 4 window / (64 x 0.5); layout 512 moves / (64 x 0.5)
    assert conv.compute_cycles == math.ceil(8 * 8 * 32 * 32 / 2500) == 27
    assert sig.compute_cycles == math.ceil(2 * 2048 / 64) == 64
    assert pool.compute_cycles == math.ceil(4 * 512 / 32) == 64
    assert trans.compute_cycles == math.ceil(512 / 32) == 16
    # DDR: the conv loads its input (2,048 B) and weights (1,024 B); outputs stay on chip for the next layer
    # except the last, stored (512 B); 8.532 bytes per cycle (17.064 GB/s x 0.5 at 1 GHz)
    assert (conv.load_bytes, conv.store_bytes) == (2048 + 1024, 0)
    assert (sig.ddr_bytes, pool.ddr_bytes) == (0, 0)
    assert (trans.load_bytes, trans.store_bytes) == (0, 512)
    assert conv.load_cycles == math.ceil(3072 / 8.532)
    overhead = 20000 + 4 * 300  # layer + 4 tiles
    assert conv.cycles == max(27, conv.load_cycles) + overhead and conv.bound == "overhead"
    assert sig.cycles == 64 + overhead and trans.cycles == max(16, math.ceil(512 / 8.532)) + overhead
    assert sched.cycles == sum(p.cycles for p in sched.layers)
    assert [(p.start_cycle, p.end_cycle) for p in sched.layers][1] == (conv.cycles, conv.cycles + sig.cycles)


def test_a_unit_with_its_own_set_up_costs_that_per_layer() -> None:
    """A unit's ``overhead_cycles`` replaces npu.layer_overhead_cycles for its layers only (a layout engine
    started per layer by the controller); the simulator opens each layer with the same overhead."""
    from accelbuild.targets.npu.timeline import run_subgraph

    own = dataclasses.replace(X5, units=tuple(dataclasses.replace(u, overhead_cycles=500)
                                              if u.name == "TRANS" else u for u in X5.units))
    before, after = schedule(_four_units(), X5, effort="lazy"), schedule(_four_units(), own, effort="lazy")
    assert [p.overhead_cycles for p in after.layers] == [20000 + 1200] * 3 + [500 + 1200]
    assert [p.cycles for p in after.layers][:3] == [p.cycles for p in before.layers][:3]
    assert after.layers[3].cycles == before.layers[3].cycles - (20000 - 500)
    assert run_subgraph(before, X5).cycles - run_subgraph(after, own).cycles == pytest.approx(20000 - 500)


def test_a_unit_that_waits_on_its_dma_adds_that_wait_to_its_compute() -> None:
    """``npu.dma_overlap`` below 1: the unit waits (1 - overlap) x the DDR time of the bytes that move while it
    computes (all of them, double-buffered), prefetched weights included; the simulator's tiles wait the same."""
    from accelbuild.targets.npu.timeline import run_subgraph

    bare = dataclasses.replace(X5, layer_overhead_cycles=0, tile_overhead_cycles=0)
    waits = dataclasses.replace(bare, dma_overlap=0.25)
    before, after = schedule(compute_then_weights(), bare), schedule(compute_then_weights(), waits)
    bytes_per_cycle = 8.532  # 17.064 GB/s x 0.5 at 1 GHz
    assert all(p.stall_cycles == 0 for p in before.layers)
    conv, fc = after.layers[0], after.layers[-1]
    assert conv.double_buffered and conv.compute_cycles == before.layers[0].compute_cycles
    assert conv.stall_cycles == math.ceil(0.75 * (conv.load_bytes + conv.store_bytes) / bytes_per_cycle)
    assert conv.cycles == max(conv.compute_cycles + conv.stall_cycles, conv.load_cycles + conv.store_cycles)
    assert fc.prefetch_bytes > 0 and fc.stall_cycles == math.ceil(0.75 * fc.ddr_bytes / bytes_per_cycle)
    assert fc.record()["stall_cycles"] == fc.stall_cycles
    assert after.cycles - before.cycles == conv.stall_cycles + fc.cycles - before.layers[-1].cycles > 0
    # the simulator's tiles wait as long (10,663 cycles against the cost model's 10,300)
    assert run_subgraph(after, waits).cycles - run_subgraph(before, bare).cycles == \
        pytest.approx(after.cycles - before.cycles, rel=0.05)


def test_the_dma_overlap_is_one_unless_a_profile_sets_it() -> None:
    assert {load_npu_hardware(name).dma_overlap for name in ("tda4vm", "am62a", "am68a", "x3")} == {1.0}


def _depthwise(kernel: int) -> onnx.ModelProto:
    """A depthwise kernel x kernel convolution, 32 channels, 8x8 in and out."""
    w = numpy_helper.from_array(np.full((32, 1, kernel, kernel), 0.01, np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="dw", kernel_shape=[kernel, kernel], group=32,
                            pads=[kernel // 2] * 4)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 8, 8])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_depthwise_keeps_its_lanes_of_the_array_busy() -> None:
    """A depthwise convolution keeps ``depthwise_efficiency`` of the 32 reduction lanes busy (0.25 on the hand
    x5): its time grows with its kernel's taps; a compiler that keeps 8 lanes busy is 32 times faster."""
    def cycles(kernel: int, hw: object = X5) -> int:
        return schedule(_depthwise(kernel), hw, effort="lazy").layers[0].compute_cycles

    # MACs / (5000 x 0.5 x 0.25 / 32)
    assert cycles(3) == math.ceil(8 * 8 * 32 * 9 / (2500 * 0.25 / 32)) == 944
    assert cycles(5) == math.ceil(8 * 8 * 32 * 25 / (2500 * 0.25 / 32)) == 2622
    eight = dataclasses.replace(X5, units=tuple(dataclasses.replace(u, depthwise_efficiency=8.0)
                                                if u.name == "TAE" else u for u in X5.units))
    assert cycles(3, eight) == math.ceil(8 * 8 * 32 * 9 / (2500 * 8 / 32)) == 30


def test_a_depthwise_kernel_larger_than_3x3_keeps_its_own_lanes_busy() -> None:
    """``large_depthwise_efficiency`` prices kernels of more than 9 taps (5x5, 7x7); a 3x3 one keeps
    ``depthwise_efficiency`` lanes, and a profile without the field prices every kernel alike."""
    slow = dataclasses.replace(X5, units=tuple(dataclasses.replace(u, large_depthwise_efficiency=0.05)
                                               if u.name == "TAE" else u for u in X5.units))

    def cycles(kernel: int, hw: object) -> int:
        return schedule(_depthwise(kernel), hw, effort="lazy").layers[0].compute_cycles

    assert cycles(3, slow) == cycles(3, X5) == 944
    assert cycles(5, slow) == math.ceil(8 * 8 * 32 * 25 / (2500 * 0.05 / 32)) == 13108
    assert cycles(7, slow) == math.ceil(8 * 8 * 32 * 49 / (2500 * 0.05 / 32)) == 25691
    assert cycles(5, X5) == 2622


def test_a_matmul_of_two_run_time_tensors_keeps_its_own_share_of_the_array() -> None:
    """``dynamic_matmul_efficiency`` prices attention's MatMuls (both operands computed per frame); a MatMul
    by constant weights keeps the aligned price, and a profile without the field prices both alike."""
    attention = dataclasses.replace(X5, units=tuple(dataclasses.replace(u, dynamic_matmul_efficiency=0.25)
                                                    if u.name == "TAE" else u for u in X5.units))
    weights = numpy_helper.from_array(np.full((64, 64), 0.01, np.float32), "w")

    def model(second: str) -> onnx.ModelProto:
        nodes = [helper.make_node("Relu", ["x"], ["k"], name="k"),
                 helper.make_node("MatMul", ["x", second], ["y"], name="mm")]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 64])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 64])],
                                  [weights] if second == "w" else [])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    def cycles(second: str, hw: object) -> int:
        return next(p for p in schedule(model(second), hw, effort="lazy").layers if p.layer.name == "mm").compute_cycles

    assert cycles("k", X5) == cycles("w", X5) == cycles("w", attention) == math.ceil(64 ** 3 / (5000 * 0.5))
    assert cycles("k", attention) == math.ceil(64 ** 3 / (5000 * 0.5 * 0.25))


def test_a_1x1_and_a_strided_convolution_keep_their_own_efficiencies() -> None:
    """``pointwise_efficiency`` prices a 1x1 convolution and a Gemm, ``strided_efficiency`` a dense convolution
    with a stride above 1 (a strided 1x1 one too); a 3x3 at stride 1 keeps ``efficiency``, and a profile
    without the fields prices every dense kernel alike."""
    shaped = dataclasses.replace(X5, units=tuple(dataclasses.replace(u, pointwise_efficiency=0.25,
                                                                     strided_efficiency=0.125)
                                                 if u.name == "TAE" else u for u in X5.units))

    def model(kernel: int, stride: int) -> onnx.ModelProto:
        w = numpy_helper.from_array(np.full((32, 32, kernel, kernel), 0.01, np.float32), "w")
        conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[kernel, kernel],
                                strides=[stride, stride], pads=[kernel // 2] * 4)
        side = 16 // stride
        graph = helper.make_graph([conv], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 16, 16])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, side, side])], [w])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    def cycles(kernel: int, stride: int, hw: object) -> int:
        return schedule(model(kernel, stride), hw, effort="lazy").layers[0].compute_cycles

    assert cycles(3, 1, shaped) == cycles(3, 1, X5) == math.ceil(16 * 16 * 32 * 32 * 9 / (5000 * 0.5)) == 944
    assert cycles(1, 1, X5) == math.ceil(16 * 16 * 32 * 32 / (5000 * 0.5)) == 105
    assert cycles(1, 1, shaped) == math.ceil(16 * 16 * 32 * 32 / (5000 * 0.25)) == 210
    assert cycles(3, 2, X5) == math.ceil(8 * 8 * 32 * 32 * 9 / (5000 * 0.5)) == 236
    assert cycles(3, 2, shaped) == math.ceil(8 * 8 * 32 * 32 * 9 / (5000 * 0.125)) == 944
    assert cycles(1, 2, shaped) == math.ceil(8 * 8 * 32 * 32 / (5000 * 0.125)) == 105  # strided, not pointwise
    b = numpy_helper.from_array(np.full((64, 64), 0.01, np.float32), "b")
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "b"], ["y"], name="fc")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 64])], [b])
    gemm = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert schedule(gemm, X5, effort="lazy").layers[0].compute_cycles == math.ceil(16 * 64 * 64 / (5000 * 0.5))
    assert schedule(gemm, shaped, effort="lazy").layers[0].compute_cycles == math.ceil(16 * 64 * 64 / (5000 * 0.25))


def _concat_of_two_convs() -> onnx.ModelProto:
    """Two 1x1 convolutions of x, their channel Concat, and a 1x1 convolution of that."""
    w = numpy_helper.from_array(np.full((16, 32, 1, 1), 0.01, np.float32), "w")
    v = numpy_helper.from_array(np.full((32, 32, 1, 1), 0.01, np.float32), "v")
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="a", kernel_shape=[1, 1]),
             helper.make_node("Conv", ["x", "w"], ["b"], name="b", kernel_shape=[1, 1]),
             helper.make_node("Concat", ["a", "b"], ["cat"], name="cat", axis=1),
             helper.make_node("Conv", ["cat", "v"], ["y"], name="c", kernel_shape=[1, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 8, 8])], [w, v])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_concat_costs_nothing_its_producers_write_into_its_buffer() -> None:
    sched = schedule(_concat_of_two_convs(), X5, effort="lazy")
    cat = next(p for p in sched.layers if p.layer.name == "cat")
    assert (cat.cycles, cat.compute_cycles, cat.ddr_bytes, cat.overhead_cycles) == (0, 0, 0, 0)
    assert sched.cycles == sum(p.cycles for p in sched.layers if p.layer.name != "cat")
    assert {p.layer.name for p in sched.layers if p.cycles} == {"a", "b", "c"}


def test_sixteen_bits_slow_the_unit_by_its_factor() -> None:
    model = _four_units()
    feeds = [{"x": np.random.default_rng(0).standard_normal((1, 32, 8, 8)).astype(np.float32)}]
    eight = schedule(quantize_qdq(model, feeds, QdqConfig()).model, X5, effort="lazy")
    sixteen = schedule(quantize_qdq(model, feeds, QdqConfig(weight_bits=16, activation_bits=16)).model, X5,
                       effort="lazy")
    assert [p.layer.name for p in eight.layers] == ["conv", "sig", "pool", "t"]  # Q/DQ folded away
    assert eight.layers[0].compute_cycles == 27 and eight.layers[0].layer.bits == 8
    assert sixteen.layers[0].compute_cycles == math.ceil(65536 * 4 / 2500)
    assert sixteen.layers[1].compute_cycles == 2 * 64
    assert sixteen.layers[0].load_bytes == 2 * eight.layers[0].load_bytes


def test_fusion_follows_the_profile() -> None:
    model = npu_graphs.residual_net(2, channels=32, size=16)
    sched = schedule(model, X5)
    assert [p.layer.ops for p in sched.layers] == [("Conv", "Relu"), ("Conv", "Add", "Relu")] * 2
    assert sched.layers[1].layer.members == ("b0.conv2", "b0.add", "b0.out")
    x3 = schedule(model, load_npu_hardware("x3"))  # x3 fuses Conv+Add+Relu too, not Conv+Add
    assert len(x3.layers) == 4


def _conv_gelu(leak: bool = False) -> onnx.ModelProto:
    """Conv 1x1 16->16 on 8x8, then GELU as torch exports it below opset 20: Div(x, sqrt 2), Erf, Add 1,
    Mul(x, .), Mul 0.5; ``leak``: a Relu also reads the Erf's output."""
    consts = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
              (("root2", 2 ** 0.5), ("one", 1.0), ("half", 0.5))]
    w = numpy_helper.from_array(np.full((16, 16, 1, 1), 0.01, np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("Div", ["c", "root2"], ["d"], name="div"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="add"),
             helper.make_node("Mul", ["c", "a"], ["m"], name="mul"),
             helper.make_node("Mul", ["m", "half"], ["y"], name="half_mul")]
    shape = [1, 16, 8, 8]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)]
    if leak:
        nodes.append(helper.make_node("Relu", ["e"], ["r"], name="relu"))
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], outputs,
                              [w, *consts])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_gelu_in_its_erf_form_runs_in_the_convolutions_output_stage() -> None:
    """x5 fuses Conv + GELU (the five nodes of x * 0.5 * (1 + erf(x / sqrt 2))) into one layer; an
    intermediate read elsewhere keeps them apart, as does a profile without the chain."""
    x5 = load_npu_hardware("x5")
    fused = schedule(_conv_gelu(), x5)
    assert [p.layer.members for p in fused.layers] == [("conv", "div", "erf", "add", "mul", "half_mul")]
    assert fused.layers[0].layer.ops[0] == "Conv"
    apart = schedule(_conv_gelu(leak=True), x5)  # only the 0.5 joins its producer (a rescale)
    assert [p.layer.members for p in apart.layers] == [("conv",), ("div",), ("erf",), ("add",), ("mul", "half_mul"),
                                                      ("relu",)]
    without = dataclasses.replace(x5, fusion=tuple(c for c in x5.fusion if "GELU" not in c))
    assert [p.layer.members for p in schedule(_conv_gelu(), without).layers] == [
        ("conv",), ("div", "erf", "add", "mul", "half_mul")]  # GELU alone: one activation layer


def _conv_mish(leak: bool = False) -> onnx.ModelProto:
    """Conv 1x1 16->16 on 8x8, then Mish as torch exports it below opset 18: Softplus, Tanh, Mul(x, .);
    ``leak``: a Relu also reads the Softplus' output."""
    w = numpy_helper.from_array(np.full((16, 16, 1, 1), 0.01, np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("Softplus", ["c"], ["s"], name="softplus"),
             helper.make_node("Tanh", ["s"], ["t"], name="tanh"),
             helper.make_node("Mul", ["c", "t"], ["y"], name="mul")]
    shape = [1, 16, 8, 8]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)]
    if leak:
        nodes.append(helper.make_node("Relu", ["s"], ["r"], name="relu"))
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], outputs,
                              [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_mish_runs_in_the_convolutions_output_stage() -> None:
    """mlsoc fuses Conv + Mish (Softplus, Tanh, Mul(x, .): YOLOv4's backbone) into one layer; an intermediate
    read elsewhere keeps them apart, as does a profile without the chain."""
    mlsoc = load_npu_hardware("mlsoc")
    fused = schedule(_conv_mish(), mlsoc)
    assert [p.layer.members for p in fused.layers] == [("conv", "softplus", "tanh", "mul")]
    assert len(schedule(_conv_mish(leak=True), mlsoc).layers) == 5
    without = dataclasses.replace(mlsoc, fusion=tuple(c for c in mlsoc.fusion if "Mish" not in c))
    assert [p.layer.members for p in schedule(_conv_mish(), without).layers] == [
        ("conv",), ("softplus", "tanh", "mul")]


def test_batch_shrinks_when_feature_maps_do_not_fit() -> None:
    small = npu_graphs.chain(["conv", "relu", "conv"], channels=16, size=16)   # 8 KB per frame per layer
    big = npu_graphs.chain(["conv", "relu", "conv"], channels=128, size=112)  # 1.6 MB per tensor and frame
    mlsoc = load_npu_hardware("mlsoc")
    assert schedule(small, mlsoc, batch_size=16).actual_batch_size == 16
    fits = schedule(big, mlsoc, batch_size=16)
    footprint = 2 * 128 * 112 * 112
    assert fits.desired_batch_size == 16
    assert fits.actual_batch_size == mlsoc.memory.feature_buffer_bytes // footprint < 16
    assert schedule(big, X5, batch_size=16).actual_batch_size == 1  # not even one frame fits: tiled, batch 1
    assert schedule(small, X5, batch_size=64).actual_batch_size == X5.max_batch


def test_batching_amortises_weights() -> None:
    model = models.resnet18(size=64)
    mlsoc = load_npu_hardware("mlsoc")
    one, eight = schedule(model, mlsoc, batch_size=1), schedule(model, mlsoc, batch_size=8)
    assert eight.actual_batch_size == 8
    weights = sum(p.layer.weight_bytes for p in one.layers)
    assert one.ddr_bytes >= weights
    assert eight.ddr_bytes / 8 < one.ddr_bytes / 2
    assert eight.cycles / 8 < one.cycles


def test_effort_searches_more() -> None:
    model = models.resnet18(size=112)
    cycles = {e: schedule(model, X5, effort=e).cycles for e in ("lazy", "normal", "hard")}
    assert cycles["hard"] <= cycles["normal"] < cycles["lazy"]


def test_compile_mode_trades_latency_for_bandwidth() -> None:
    model = models.resnet18(size=288)  # layer1's maps fit half of x5's feature buffer, its skips do not
    latency = schedule(model, X5, compile_mode="latency")
    bandwidth = schedule(model, X5, compile_mode="bandwidth")
    balance = schedule(model, X5, compile_mode="balance")
    assert latency.cycles < bandwidth.cycles and bandwidth.ddr_bytes < latency.ddr_bytes
    assert latency.cycles <= balance.cycles and bandwidth.ddr_bytes <= balance.ddr_bytes


def test_record_fields() -> None:
    record = schedule(_four_units(), X5, batch_size=2).record()
    assert {"desired_batch_size", "actual_batch_size", "cycles", "layers"} <= set(record)
    assert record["desired_batch_size"] == 2 and record["actual_batch_size"] == 2
    layer = record["layers"][0]
    assert list(layer)[:5] == ["name", "unit", "start_cycle", "end_cycle", "ddr_bytes"]
    assert {"compute_cycles", "load_cycles", "store_cycles"} <= set(layer)
    assert record["layers"][-1]["end_cycle"] == record["cycles"]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="effort"):
        schedule(_four_units(), X5, effort="max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compile_mode"):
        schedule(_four_units(), X5, compile_mode="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size"):
        schedule(_four_units(), X5, batch_size=0)
    with pytest.raises(ValueError, match="does not run Sin"):
        schedule(npu_graphs.chain(["sin"]), X5)


def test_a_chain_too_big_for_on_chip_memory_streams_in_row_bands() -> None:
    """Feature maps of 1.6 MB (more than the feature buffer) between convolutions: lazy stores and reloads
    them; normal hands each to the next layer in row bands (2 x 3 rows of 112), so only the chain's input
    and output touch DDR."""
    model = npu_graphs.chain(["conv", "conv", "conv"], channels=128, size=112)
    lazy, normal = schedule(model, X5, effort="lazy"), schedule(model, X5, effort="normal")
    layers = [plan.layer for plan in normal.layers]
    band = stream_band(layers[0], layers[1], 1)
    assert band == layers[0].out_bytes * 6 / 112 < X5.memory.feature_buffer_bytes / 4
    assert [p.store_bytes for p in normal.layers] == [0, 0, layers[-1].out_bytes]
    assert all(p.store_bytes == p.layer.out_bytes for p in lazy.layers)
    assert normal.ddr_bytes < lazy.ddr_bytes / 2


def compute_then_weights() -> onnx.ModelProto:
    """Conv 3x3 64->64 on 32x32 (compute-bound, 36,864 weight bytes), GlobalAveragePool, Flatten, MatMul
    64x2048 (131,072 weight bytes, almost no compute)."""
    w = numpy_helper.from_array(np.full((64, 64, 3, 3), 0.01, np.float32), "w")
    g = numpy_helper.from_array(np.full((64, 2048), 0.01, np.float32), "g")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "g"], ["y"], name="fc")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2048])], [w, g])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_weights_load_ahead_in_the_previous_layers_idle_dma_time() -> None:
    conv, pool, flat, fc = schedule(compute_then_weights(), X5).layers
    bytes_per_cycle = 8.532  # 17.064 GB/s x 0.5 at 1 GHz
    assert conv.prefetch_bytes == 0 and conv.prefetch_depth == 0  # nothing runs before the first layer
    assert flat.tiles == 0
    # the pool has no DDR traffic: its 23,248 cycles of idle DMA carry all 131,072 weight bytes (half the
    # 512 KB weight buffer is room enough), so the MatMul's own DDR time is its 2,048-byte output only
    assert (fc.weight_load_bytes, fc.prefetch_bytes, fc.prefetch_depth) == (131072, 131072, 1)
    assert fc.prefetch_cycles == math.ceil(131072 / bytes_per_cycle) == fc.load_cycles
    assert fc.own_ddr_cycles == fc.store_cycles == math.ceil(2048 / bytes_per_cycle)
    assert fc.cycles == max(fc.compute_cycles, fc.own_ddr_cycles) + fc.overhead_cycles
    assert fc.bound == "overhead" and fc.record()["prefetch_bytes"] == 131072


def test_weights_load_ahead_over_several_layers_when_one_has_too_little_idle_time() -> None:
    bare = dataclasses.replace(X5, layer_overhead_cycles=0, tile_overhead_cycles=0)
    conv, pool, _, fc = schedule(compute_then_weights(), bare).layers
    bytes_per_cycle = 8.532
    assert conv.bound == "compute" and pool.ddr_bytes == 0
    idle = pool.cycles + (conv.cycles - conv.own_ddr_cycles)  # the pool's 2,048 cycles are not enough
    assert fc.prefetch_depth == 2 and fc.prefetch_bytes == int(idle * bytes_per_cycle) < 131072
    assert fc.cycles == math.ceil((fc.load_bytes + fc.store_bytes - fc.prefetch_bytes) / bytes_per_cycle)


def test_loading_ahead_needs_room_in_the_weight_buffer() -> None:
    # a 512-byte buffer: the newest layer holds 100 and has no idle time; the one before holds 400 and has
    # plenty, but only 12 bytes are left beside both chunks
    assert _ahead([_Idle(10**6, 400), _Idle(0, 100)], 100, 512, 1.0) == (2, 12)
    assert _ahead([_Idle(10**6, 412), _Idle(0, 100)], 100, 512, 1.0) == (0, 0)  # full: nothing loads ahead
    assert _ahead([_Idle(10**6, 0), _Idle(50, 100)], 100, 512, 1.0) == (2, 100)
    assert _ahead([_Idle(10**6, 0), _Idle(150, 100)], 100, 512, 1.0) == (1, 100)  # the nearest layer suffices
