"""The host subgraphs' time from compiled code (``offload.host_compiler: tvm``; docs/npu.md "Host code").

Each compiled host subgraph's build for this machine is timed in TVM's VM as the benchmark's accuracy run
passes through it (one call per sample, the first call left out as warm-up): the median is this machine's
figure, labelled with the machine. The board's figure is an estimate, scaled from it:

    scaled = measured x modelled(the profile's Arm core) / modelled(this machine's core)

where "modelled" is the profile's host model (``Processor.layer_seconds`` per layer: MACs at a MAC rate,
else elements at an element rate, plus a per-layer overhead), priced once with the profile's Arm core and
once with this machine's core. This core's three rates are measured here the way the profile's are meant:
optimised kernels on one core (onnxruntime, one thread) on reference operators (``reference_core``). The
ratio carries the two cores' difference on the subgraph's own mix of MAC and element work; the measured
time carries what the model leaves out (TVM's untuned code, memory layout, the VM's calls).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from accelbuild.targets import end_to_end
from accelbuild.targets.npu.graph_info import GraphInfo
from accelbuild.targets.npu.hardware import Processor
from accelbuild.targets.npu.schedule import host_seconds
from accelbuild.util.onnx_runtime import session

_MATMUL = (64, 256, 256)  # M, K, N: 4.2 M MACs
_ELEMENTS = 1 << 20  # one Add over 1 Mi floats
_REPEATS = 30


@functools.lru_cache(maxsize=1)
def reference_core() -> Processor:
    """This machine's core as the host model describes a core, measured in onnxruntime (one thread) on
    three operators: a 1-element Relu (the per-layer overhead), a MatMul (MAC rate) and an Add (element
    rate), each the median of ``_REPEATS`` calls."""
    m, k, n = _MATMUL
    tiny = _median(_one_op("Relu", [[1]], [1]))
    matmul = _median(_one_op("MatMul", [[m, k], [k, n]], [m, n]))
    add = _median(_one_op("Add", [[_ELEMENTS], [_ELEMENTS]], [_ELEMENTS]))
    return Processor(name="this machine", cores=1, gmacs_per_second=m * k * n / max(matmul - tiny, 1e-9) / 1e9,
                     gelements_per_second=_ELEMENTS / max(add - tiny, 1e-9) / 1e9, layer_overhead_us=tiny * 1e6)


def subgraph_record(model: onnx.ModelProto, measured: float | None, board: Processor, here: Processor) -> dict[str, Any]:
    """One compiled host subgraph's times in ms: measured here, the profile's model of the board, and the
    board estimate scaled from the measurement."""
    info = GraphInfo.of(model)
    layers = [n.name for n in info.layers()]
    on_board, on_here = host_seconds(info, layers, board), host_seconds(info, layers, here)
    record: dict[str, Any] = {"measured_ms": None if measured is None else round(measured * 1e3, 4),
                              "modelled_ms": round(on_board * 1e3, 4)}
    record["scaled_ms"] = None if measured is None or not on_here else round(measured * on_board / on_here * 1e3, 4)
    return record


def reference_record(here: Processor) -> dict[str, float]:
    return {"gmacs_per_second": round(here.gmacs_per_second, 3),
            "gelements_per_second": round(here.gelements_per_second, 3),
            "layer_overhead_us": round(here.layer_overhead_us, 3)}


def _one_op(op: str, inputs: list[list[int]], output: list[int]) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(len(inputs))]
    graph = helper.make_graph([helper.make_node(op, names, ["y"])], op,
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, inputs)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, output)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _median(model: onnx.ModelProto) -> float:
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input}
    sess = session(model)
    return end_to_end.median_seconds(lambda: sess.run(None, feeds), _REPEATS, warmup=1)
