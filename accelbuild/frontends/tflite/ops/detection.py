"""NON_MAX_SUPPRESSION_V4 / _V5 as ONNX NonMaxSuppression with TFLite's fixed-size outputs.

TFLite writes ``max_output_size`` selected indices (zeros after the valid ones) and the count of valid
ones (V5 also their scores, zeros after them): the ONNX graph selects with NonMaxSuppression (one batch, one
class), pads the selection with zeros and cuts it to ``max_output_size``. V5's soft-NMS (a non-zero
sigma) has no ONNX counterpart and is refused.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import OK, Check, Result, const_inputs, fail, input_count, register
from accelbuild.frontends.tflite.reader import Operator


def _nms_geometry(g: Graph, op: Operator) -> Result:
    boxes, scores = g.shape(op.inputs[0]), g.shape(op.inputs[1])
    if len(boxes) != 2 or boxes[1] != 4 or scores != boxes[:1]:
        return fail(f"boxes {list(boxes)} and scores {list(scores)}, expected [n, 4] and [n]")
    size = int(g.const_value(op.inputs[2]).reshape(-1)[0])
    v5 = op.name == "NON_MAX_SUPPRESSION_V5"
    if v5 and (g.const(op.inputs[5]) is None or float(g.const_value(op.inputs[5]).reshape(-1)[0]) != 0.0):
        return fail("soft-NMS (a non-zero or computed soft_nms_sigma), which ONNX's NonMaxSuppression lacks")
    want = [(size,), (size,), ()] if v5 else [(size,), ()]
    have = [g.shape(i) for i in op.outputs]
    if have != want or g.tensor(op.outputs[0]).dtype != "INT32" or g.tensor(op.outputs[-1]).dtype != "INT32":
        return fail(f"outputs {[list(h) for h in have]} should be {[list(w) for w in want]} (int32 indices and count)")
    return OK


def _padded(g: Graph, name: str, values: str, size: int, dtype: type, output: str) -> None:
    """``values`` (1-D, at most ``size`` long) followed by zeros, cut to ``size``, as ``output``."""
    joined = g.fresh(f"{name}/joined")
    g.node("Concat", [values, g.add_const(f"{name}/zeros", np.zeros(size, dtype))], [joined], joined, axis=0)
    g.node("Slice", [joined, g.ints(f"{name}/starts", [0]), g.ints(f"{name}/ends", [size])], [output],
           g.fresh(f"{name}/cut"))


def _nms(g: Graph, op: Operator) -> None:
    base = g.name(op)
    size = int(g.const_value(op.inputs[2]).reshape(-1)[0])
    names = {role: g.fresh(f"{base}/{role}") for role in
             ("boxes", "scores", "iou", "score_threshold", "selected", "indices", "indices32", "count")}
    g.node("Unsqueeze", [g.value(op.inputs[0]), g.ints(f"{base}/axes0", [0])], [names["boxes"]], names["boxes"])
    g.node("Reshape", [g.value(op.inputs[1]), g.ints(f"{base}/score_shape", [1, 1, -1])], [names["scores"]],
           names["scores"])
    for k, role in ((3, "iou"), (4, "score_threshold")):
        g.node("Reshape", [g.value(op.inputs[k]), g.ints(f"{base}/{role}_shape", [1])], [names[role]], names[role])
    g.node("NonMaxSuppression", [names["boxes"], names["scores"], g.ints(f"{base}/max_output", [size]),
                                 names["iou"], names["score_threshold"]], [names["selected"]], base)
    g.node("Gather", [names["selected"], g.scalar(2, np.int64)], [names["indices"]], names["indices"], axis=1)
    g.node("Cast", [names["indices"]], [names["indices32"]], names["indices32"], to=TensorProto.INT32)
    _padded(g, f"{base}/pad", names["indices32"], size, np.int32, g.out(op, 0))
    if op.name == "NON_MAX_SUPPRESSION_V5":
        picked = g.fresh(f"{base}/picked_scores")
        g.node("Gather", [g.value(op.inputs[1]), names["indices"]], [picked], picked, axis=0)
        _padded(g, f"{base}/pad_scores", picked, size, np.float32, g.out(op, 1))
    shape = g.fresh(f"{base}/selected_shape")
    g.node("Shape", [names["indices"]], [shape], shape)
    g.node("Reshape", [shape, g.ints(f"{base}/scalar", [])], [names["count"]], names["count"])
    g.node("Cast", [names["count"]], [g.out(op, len(op.outputs) - 1)], g.fresh(f"{base}/valid"), to=TensorProto.INT32)


_DOC = ("NonMaxSuppression (one batch, one class), selected indices padded with zeros to max_output_size, "
        "and their count")
_GEOMETRY = Check("[n, 4] boxes and [n] scores; constant max_output_size; outputs [max_output_size] int32 "
                  "indices (V5: and scores) and an int32 count; V5: soft_nms_sigma 0", _nms_geometry)
register("NON_MAX_SUPPRESSION_V4", _DOC, input_count(5), const_inputs(2, what="max_output_size"), _GEOMETRY)(_nms)
register("NON_MAX_SUPPRESSION_V5", _DOC + " (and their scores)", input_count(6),
         const_inputs(2, what="max_output_size"), _GEOMETRY)(_nms)
