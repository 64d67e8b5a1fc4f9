"""Which LiteRT kernels run int8.tflite for the check and the accuracy records, and how far they are from the
device's arithmetic.

LiteRT's reference kernels are the integer arithmetic TFLite Micro ports (Vela's CPU operators run it and its
NPU operators are specified against it), but they are naive loops: 1 to 4 GMAC/s here, so a 22-GMAC network
takes 20-27 s per frame. The optimised builtin kernels (no XNNPACK delegate) run 15-20x faster and compute
the same int8 arithmetic except for rounding: their convolutions resolve the double-rounding band upwards only
and their MEAN does not round to nearest (docs/ethos_u.md, "Where the int8 model drifts"). XNNPACK is faster
still but requantizes in float: on a 7-GMAC int8 conv stack a quarter of the output codes differ, by up to
4 steps (bench/ethos_u_speed.py), so it is not used.

The choice is by work, so equal models and frames choose alike: up to ``REFERENCE_MACS`` multiply-accumulates
over a stage's frames the reference kernels run; above it the optimised ones do, and the first frame is run
on both so the record says how far the optimised kernels were from the reference (``difference``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from accelbuild.util import onnx_graph as g

REFERENCE = "reference"
OPTIMISED = "optimised"
REFERENCE_MACS = 60e9  # frames x MACs a stage runs on the reference kernels (15 to 60 s here)
WEIGHTED = {"Conv", "ConvTranspose", "Gemm", "MatMul"}


@dataclass(frozen=True)
class Kernels:
    name: str          # REFERENCE or OPTIMISED
    macs: int          # multiply-accumulates of one frame (weighted layers)
    frames: int

    @property
    def runtime(self) -> str:
        return f"LiteRT ({self.name} kernels)"

    def record(self) -> dict[str, Any]:
        return {"kernels": self.name, "macs_per_frame": self.macs,
                "why": (f"{self.frames} frame(s) x {self.macs / 1e9:.3g} GMAC "
                        + (f"<= {REFERENCE_MACS / 1e9:g} GMAC: the reference kernels (the device's arithmetic)"
                           if self.name == REFERENCE else
                           f"> {REFERENCE_MACS / 1e9:g} GMAC: the optimised kernels (15-20x faster here; they may "
                           "round a requantization one step the other way, measured on the first frame)"))}


def choose(qdq: onnx.ModelProto, frames: int) -> Kernels:
    """The kernels a stage runs ``frames`` frames of ``qdq``'s int8.tflite on."""
    macs = model_macs(qdq)
    name = REFERENCE if macs * max(frames, 1) <= REFERENCE_MACS else OPTIMISED
    return Kernels(name, macs, frames)


def model_macs(model: onnx.ModelProto) -> int:
    """Multiply-accumulates of the weighted layers of one inference (shape-inferred ``model``)."""
    from accelbuild.util.shape_inference import infer_shapes

    inferred = model if model.graph.value_info else infer_shapes(model)
    total = 0
    for node in inferred.graph.node:
        if node.op_type in WEIGHTED:
            total += _node_macs(inferred, node)
    return total


def _node_macs(model: onnx.ModelProto, node: onnx.NodeProto) -> int:
    shapes = [g.static_shape(model, name) if name else None for name in node.input[:2]]
    out = g.static_shape(model, node.output[0])
    weight = _weight_shape(model, node.input[1]) or shapes[1]
    if weight is None or out is None or shapes[0] is None:
        return 0
    if node.op_type == "Conv":
        return int(np.prod(weight)) * int(np.prod(out)) // max(int(weight[0]), 1)
    if node.op_type == "ConvTranspose":
        return int(np.prod(weight)) * int(np.prod(shapes[0][2:])) * int(shapes[0][0])
    reduced = weight[-2] if node.op_type == "MatMul" or not g.attribute(node, "transB", 0) else weight[-1]
    return int(np.prod(out)) * int(reduced)


def _weight_shape(model: onnx.ModelProto, name: str) -> list[int] | None:
    """The shape of a weight behind its DequantizeLinear, if it is one."""
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] == name:
            value = g.constant(model.graph, node.input[0])
            return list(value.shape) if value is not None else None
    value = g.constant(model.graph, name)
    return list(value.shape) if value is not None else None


def interpreter(data: bytes, kernels: str = REFERENCE, preserve: bool = False) -> Any:
    """A single-threaded LiteRT interpreter on ``kernels`` (never a delegate)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = OpResolverType.BUILTIN_REF if kernels == REFERENCE else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    interp = Interpreter(model_content=data, num_threads=1, experimental_preserve_all_tensors=preserve,
                         experimental_op_resolver_type=resolver)
    interp.allocate_tensors()
    return interp


def difference(data: bytes, codes: Mapping[int, np.ndarray]) -> dict[str, Any]:
    """The optimised kernels against the reference kernels on one frame: the input codes (tensor index ->
    codes) run on both, every tensor kept; the largest difference of any tensor in codes and the share of
    codes that differ."""
    runs = []
    for kernels in (REFERENCE, OPTIMISED):
        interp = interpreter(data, kernels, preserve=True)
        for index, value in codes.items():
            interp.set_tensor(index, value)
        interp.invoke()
        runs.append(interp)
    worst, values, differing = 0, 0, 0
    outputs = {d["index"] for d in runs[0].get_output_details()}
    out_worst = 0
    for detail in runs[0].get_tensor_details():
        if detail["index"] in codes or detail["dtype"] not in (np.int8, np.int16):
            continue
        try:
            a, b = (r.get_tensor(detail["index"]).astype(np.int64) for r in runs)
        except ValueError:  # a constant or a tensor the interpreter does not keep
            continue
        diff = np.abs(a - b)
        if not diff.size:
            continue
        worst, values, differing = max(worst, int(diff.max())), values + diff.size, differing + int(np.count_nonzero(diff))
        if detail["index"] in outputs:
            out_worst = max(out_worst, int(diff.max()))
    return {"frames": 1, "max_steps": worst, "output_max_steps": out_worst,
            "differing_share": round(differing / values, 6) if values else 0.0}
