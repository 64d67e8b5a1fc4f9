"""NPU / host partitioning on planted graphs, standalone subgraphs and their composition (float and QDQ)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbuild.errors import AccelbuildError, StageError, UserError
from accelbuild.quantize.qdq import QdqConfig, quantize_qdq
from accelbuild.targets.npu.hardware import load_npu_hardware
from accelbuild.targets.npu.partition import (
    FallbackError,
    NoDspError,
    Offload,
    TooManySubgraphsError,
    assign_units,
    composition_error,
    partition,
)
from accelbuild.testing import models, npu_graphs

from .hand_profile import hand_tda4vm

TDA4VM = hand_tda4vm()  # the costs these layouts were worked out with (the built-in profile is refitted)


def _chain(words: list[str]) -> onnx.ModelProto:
    return npu_graphs.chain(words, channels=64, size=56)  # big enough that the NPU is worth its crossings


def _feeds(model: onnx.ModelProto, count: int = 2) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    result = []
    for _ in range(count):
        feed = {}
        for value in model.graph.input:
            shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
            feed[value.name] = rng.standard_normal(shape).astype(np.float32)
        result.append(feed)
    return result


def _layout(words: list[str], hw=TDA4VM, **offload) -> list[tuple[str, list[str]]]:
    part = partition(_chain(words), hw, Offload(**offload))
    return [(s.unit, s.nodes) for s in part.subgraphs]


def test_pre_and_post_processing_only() -> None:
    assert _layout(["sin", "conv", "conv", "conv", "sin"]) == [
        ("arm", ["l0.sin"]), ("npu", ["l1.conv", "l2.conv", "l3.conv"]), ("arm", ["l4.sin"])]


def test_mid_graph_offload_splits_the_npu_part() -> None:
    assert _layout(["conv", "conv", "sin", "conv", "conv"]) == [
        ("npu", ["l0.conv", "l1.conv"]), ("arm", ["l2.sin"]), ("npu", ["l3.conv", "l4.conv"])]
    assert _layout(["conv", "pool5", "conv"]) == [("npu", ["l0.conv"]), ("arm", ["l1.pool5"]), ("npu", ["l2.conv"])]


def test_small_island_merges_into_the_host() -> None:
    part = partition(_chain(["sin", "relu", "sin"]), TDA4VM, Offload())
    assert [(s.unit, s.nodes) for s in part.subgraphs] == [("arm", ["l0.sin", "l1.relu", "l2.sin"])]
    assert part.reasons["l1.relu"] == "merged into the host: its crossings cost more than the NPU saves"


def test_deny_lists() -> None:
    assert _layout(["conv", "conv", "relu", "conv"], deny_layers={"l1.conv"}, deny_ops={"Relu"}) == [
        ("npu", ["l0.conv"]), ("arm", ["l1.conv", "l2.relu"]), ("npu", ["l3.conv"])]
    part = partition(_chain(["conv", "conv"]), TDA4VM, Offload(deny_ops=frozenset({"Conv"})))
    assert part.reasons == {"l0.conv": "offload.deny_ops names Conv", "l1.conv": "offload.deny_ops names Conv"}
    assert part.npu_subgraphs == []


def test_dsp_host() -> None:
    assert _layout(["conv", "sin", "conv"], host="dsp")[1] == ("dsp", ["l1.sin"])
    with pytest.raises(NoDspError, match="platform x5 has no DSP") as info:
        _layout(["conv", "sin", "conv"], hw=load_npu_hardware("x5"), host="dsp")
    assert isinstance(info.value, UserError)


def test_too_many_subgraphs_names_the_splitting_layers() -> None:
    with pytest.raises(TooManySubgraphsError) as info:
        _layout(["conv", "sin"] * 5, max_subgraphs=3)
    assert info.value.count == 5 and info.value.limit == 3
    assert info.value.splitters == [["l1.sin"], ["l3.sin"], ["l5.sin"], ["l7.sin"]]
    assert "more than max_subgraphs 3" in str(info.value) and "l5.sin (Sin)" in str(info.value)
    assert "the host layers between them (Sin x4) (deny or crop them" in str(info.value)  # the operator named
    assert isinstance(info.value, StageError)


def test_profile_limit_on_subgraphs_applies_too() -> None:
    with pytest.raises(TooManySubgraphsError, match="more than max_subgraphs 16"):
        _layout(["conv", "sin"] * 17, max_subgraphs=64)


def test_fail_on_fallback_lists_host_layers() -> None:
    with pytest.raises(FallbackError) as info:
        _layout(["conv", "sin", "pool5", "conv"], fail_on_fallback=True)
    assert info.value.reasons == {"l1.sin": "Sin is not an operator the tda4vm NPU runs",
                                  "l2.pool5": "pooling window 5x5 is larger than 3x3"}
    assert isinstance(info.value, AccelbuildError) and info.value.exit_code == 1
    assert _layout(["conv", "conv"], fail_on_fallback=True) == [("npu", ["l0.conv", "l1.conv"])]


def test_parallel_host_branch_does_not_split_the_npu() -> None:
    """c1 feeds both a host branch (Sin, a model output) and c2 -> c3: one NPU subgraph, not two."""
    rng = np.random.default_rng(0)
    inits, nodes = [], []
    x = "x"
    for name in ("c1", "sin", "c2", "c3"):
        if name == "sin":
            nodes.append(helper.make_node("Sin", ["c1"], ["sin"], name="sin"))
            continue
        inits.append(numpy_helper.from_array(rng.standard_normal((64, 64, 3, 3)).astype(np.float32) * 0.05,
                                             f"{name}.w"))
        nodes.append(helper.make_node("Conv", [x, f"{name}.w"], [name], name=name, pads=[1] * 4))
        x = name
    shape = [1, 64, 56, 56]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(t, TensorProto.FLOAT, shape) for t in ("c3", "sin")],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    part = partition(model, TDA4VM, Offload())
    assert [(s.unit, s.nodes) for s in part.subgraphs] == [("npu", ["c1", "c2", "c3"]), ("arm", ["sin"])]
    assert part.subgraphs[0].outputs == ["c1", "c3"]
    assert composition_error(model, part, _feeds(model)) == 0.0


def test_subgraphs_are_standalone_and_compose() -> None:
    model = _chain(["sin", "conv", "relu", "pool5", "conv", "sigmoid", "sin"])
    part = partition(model, TDA4VM, Offload())
    assert [s.unit for s in part.subgraphs] == ["arm", "npu", "arm", "npu", "arm"]
    for sub in part.subgraphs:
        onnx.checker.check_model(sub.model, full_check=True)
        assert [v.name for v in sub.model.graph.input] == sub.inputs
        assert [v.name for v in sub.model.graph.output] == sub.outputs
    assert composition_error(model, part, _feeds(model)) == 0.0


def test_composition_of_a_qdq_model() -> None:
    model = _chain(["conv", "relu", "sin", "conv", "sigmoid", "pool5", "conv"])
    units = assign_units(model, TDA4VM, Offload())
    host = frozenset(name for name, unit in units.items() if unit != "npu")
    assert host == {"l2.sin", "l5.pool5"}
    qdq = quantize_qdq(model, _feeds(model, 3), QdqConfig(float_nodes=host)).model
    for given in (units, None):
        part = partition(qdq, TDA4VM, Offload(), units=given)
        assert [(s.unit, s.nodes) for s in part.subgraphs] == [
            ("npu", ["l0.conv", "l1.relu"]), ("arm", ["l2.sin"]), ("npu", ["l3.conv", "l4.sigmoid"]),
            ("arm", ["l5.pool5"]), ("npu", ["l6.conv"])]
        # Q/DQ nodes travel with their layers: the NPU subgraphs hold them, the records list layers only
        assert any(n.op_type == "QuantizeLinear" for n in part.subgraphs[0].model.graph.node)
        assert composition_error(qdq, part, _feeds(model)) == 0.0


def test_detector_mid_graph_and_record() -> None:
    model = models.tiny_detector()
    for dim, value in zip(model.graph.input[0].type.tensor_type.shape.dim, (1, 3, 320, 320)):
        dim.ClearField("dim_param")
        dim.dim_value = value
    part = partition(model, TDA4VM, Offload())
    # the backbone and neck on the NPU around SPPF's 5x5 pools (TIDL pools 3x3 at most); the decode's shape
    # arithmetic (Shape, Gather, Range, Cast, Expand) on the Arm, the NPU keeping the runs between them whose
    # two hand-overs (20 us each) cost less than their layers on the Arm
    assert [s.unit for s in part.subgraphs] == ["npu", "arm", "npu", "arm", "npu", "arm", "npu", "arm", "npu"]
    assert part.subgraphs[1].nodes == ["stage4.sppf.pool0", "stage4.sppf.pool1", "stage4.sppf.pool2"]
    assert part.subgraphs[2].outputs == ["head.p3", "head.p4", "head.p5"]
    record = part.record("det", files={0: "det_sg0.bin", 2: "det_sg2.bin"})
    assert list(record) == ["subgraphs", "npu_layers", "host_layers", "host_ops"]
    first = record["subgraphs"][0]
    assert list(first) == ["id", "unit", "model", "nodes", "inputs", "outputs", "file"]
    assert first["model"] == "det" and first["file"] == "det_sg0.bin" and record["subgraphs"][1]["file"] is None
    assert record["npu_layers"] + record["host_layers"] == len(part.units)
    assert record["host_ops"]["MaxPool"] == 3 and list(record["host_ops"]) == sorted(record["host_ops"])
    feeds = [{"images": np.random.default_rng(0).random((1, 3, 320, 320), dtype=np.float32)}]
    assert composition_error(model, part, feeds) == 0.0


def test_deterministic() -> None:
    model = _chain(["conv", "sin", "conv", "relu", "pool5", "conv"])
    first = partition(model, TDA4VM, Offload()).record("m")
    assert partition(model, TDA4VM, Offload()).record("m") == first


def test_offload_validation() -> None:
    with pytest.raises(ValueError, match="arm or dsp"):
        Offload(host="gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 1"):
        Offload(max_subgraphs=0)


def test_custom_op_or_denied_resize_mid_graph() -> None:
    assert _layout(["conv", "conv", "custom", "conv"]) == [
        ("npu", ["l0.conv", "l1.conv"]), ("arm", ["l2.custom"]), ("npu", ["l3.conv"])]
    model = _chain(["conv", "resize", "conv"])
    part = partition(model, TDA4VM, Offload(deny_ops=frozenset({"Resize"})))
    assert [(s.unit, s.nodes) for s in part.subgraphs] == [
        ("npu", ["l0.conv"]), ("arm", ["l1.resize"]), ("npu", ["l1.resize.down", "l2.conv"])]
    assert composition_error(model, part, _feeds(model, 1)) == 0.0
