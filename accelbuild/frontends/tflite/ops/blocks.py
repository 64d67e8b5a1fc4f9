"""SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND as Pad / Reshape / Transpose / Reshape (/ Slice for the crops).

With ``M`` block dimensions ``b`` and input ``[N, s1..sM, rest]``, SPACE_TO_BATCH_ND pads, splits each
spatial axis into ``[s/b, b]`` and moves the block factors in front of the batch (TFLite's output batch is
``(b1 index * b2 + b2 index) * N + n``); BATCH_TO_SPACE_ND undoes it and crops.
"""

from __future__ import annotations

import math

import numpy as np

from accelbuild.frontends.tflite.graph import Graph
from accelbuild.frontends.tflite.ops.base import const_inputs, input_count, register
from accelbuild.frontends.tflite.ops.shape import _ints, _output_shape_is
from accelbuild.frontends.tflite.reader import Operator


def _geometry(g: Graph, op: Operator) -> tuple[tuple[int, ...], list[int], np.ndarray] | str:
    shape, block = g.shape(op.inputs[0]), _ints(g, op.inputs[1])
    pads = g.const_value(op.inputs[2]).astype(np.int64)
    m = len(block)
    if not 1 <= m < len(shape) or pads.shape != (m, 2) or min(block) < 1 or np.any(pads < 0):
        return f"block {block} and paddings/crops {pads.tolist()} for an input {list(shape)}"
    return shape, block, pads


def _s2b_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    geometry = _geometry(g, op)
    if isinstance(geometry, str):
        return geometry
    shape, block, pads = geometry
    padded = [s + int(p.sum()) for s, p in zip(shape[1:], pads)]
    if any(p % b for p, b in zip(padded, block)):
        return f"padded sizes {padded} are not multiples of the block {block}"
    return (shape[0] * math.prod(block), *(p // b for p, b in zip(padded, block)), *shape[1 + len(block):])


@register("SPACE_TO_BATCH_ND", "Pad, Reshape, Transpose, Reshape", input_count(3),
          const_inputs(1, 2, what="block_shape and paddings"),
          _output_shape_is(_s2b_shape, "padded spatial sizes are multiples of the block; output shape matches"))
def space_to_batch_nd(g: Graph, op: Operator) -> None:
    shape, block, pads = _geometry(g, op)
    m, name, rest = len(block), g.name(op), list(shape[1 + len(block):])
    padded = g.fresh(f"{name}/padded")
    before = [0, *pads[:, 0], *[0] * len(rest)]
    after = [0, *pads[:, 1], *[0] * len(rest)]
    g.node("Pad", [g.value(op.inputs[0]), g.ints(f"{name}/pads", [*before, *after])], [padded], padded)
    sizes = [s + int(p.sum()) for s, p in zip(shape[1:], pads)]
    split = [shape[0]] + [d for s, b in zip(sizes, block) for d in (s // b, b)] + rest
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(2 * m + 1, len(split)))
    _reshape_transpose(g, op, padded, split, perm, g.shape(op.outputs[0]))


def _b2s_shape(g: Graph, op: Operator) -> tuple[int, ...] | str:
    geometry = _geometry(g, op)
    if isinstance(geometry, str):
        return geometry
    shape, block, crops = geometry
    if shape[0] % math.prod(block):
        return f"batch {shape[0]} is not a multiple of the block {block}"
    spatial = [s * b - int(c.sum()) for s, b, c in zip(shape[1:], block, crops)]
    if min(spatial) < 1:
        return f"crops {crops.tolist()} leave nothing"
    return (shape[0] // math.prod(block), *spatial, *shape[1 + len(block):])


@register("BATCH_TO_SPACE_ND", "Reshape, Transpose, Reshape, Slice (the crops)", input_count(3),
          const_inputs(1, 2, what="block_shape and crops"),
          _output_shape_is(_b2s_shape, "batch is a multiple of the block; output shape matches"))
def batch_to_space_nd(g: Graph, op: Operator) -> None:
    shape, block, crops = _geometry(g, op)
    m, name, rest = len(block), g.name(op), list(shape[1 + len(block):])
    batch = shape[0] // math.prod(block)
    split = [*block, batch, *shape[1:1 + m], *rest]
    perm = [m] + [i for k in range(m) for i in (m + 1 + k, k)] + list(range(2 * m + 1, len(split)))
    spread = [batch, *(s * b for s, b in zip(shape[1:], block)), *rest]
    if not crops.any():
        _reshape_transpose(g, op, g.value(op.inputs[0]), split, perm, spread)
        return
    moved = _reshape_transpose(g, op, g.value(op.inputs[0]), split, perm, spread, final=False)
    axes = list(range(1, m + 1))
    g.emit(op, "Slice", [moved, g.ints(f"{name}/starts", crops[:, 0]),
                         g.ints(f"{name}/ends", [s - int(c[1]) for s, c in zip(spread[1:], crops)]),
                         g.ints(f"{name}/axes", axes)])


def _reshape_transpose(g: Graph, op: Operator, source: str, split: list[int], perm: list[int],
                       out: tuple[int, ...] | list[int], final: bool = True) -> str:
    """Reshape to ``split``, Transpose by ``perm``, Reshape to ``out``: as the op's result when ``final``."""
    name = g.name(op)
    blocks, moved = g.fresh(f"{name}/blocks"), g.fresh(f"{name}/moved")
    g.node("Reshape", [source, g.ints(f"{name}/split", split)], [blocks], blocks)
    g.node("Transpose", [blocks], [moved], moved, perm=perm)
    if final:
        g.emit(op, "Reshape", [moved, g.ints(f"{name}/shape", out)])
        return g.out(op)
    merged = g.fresh(f"{name}/merged")
    g.node("Reshape", [moved, g.ints(f"{name}/shape", out)], [merged], merged)
    return merged
