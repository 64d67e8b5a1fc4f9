"""Einsum of one or two operands as float TFLite operators (ONNX exports of attention write Q.K^T as
``bhid,bhjd->bhij``): each letter is a batch axis (both operands and the output), a free axis of one operand,
or contracted (both operands, not the output). Each operand is transposed to (batch, free, contracted) or
(batch, contracted, free) order and reshaped to three axes, one BATCH_MATMUL multiplies them, and a reshape
and a transpose give the output's order. Ellipses, repeated letters (diagonals) and letters summed within one
operand have no such form and are refused.
"""

from __future__ import annotations

import math

import onnx

from accelbuild.targets.ethos_u.tflite.floats import float_in, float_out, text, transposed
from accelbuild.targets.ethos_u.tflite.writer import Unsupported, Writer
from accelbuild.util import onnx_graph as g


def einsum(w: Writer, node: onnx.NodeProto) -> None:
    equation = text(g.attribute(node, "equation", b"")).replace(" ", "")
    if "..." in equation or "->" not in equation:
        raise Unsupported(f"Einsum {equation!r}: an ellipsis or an implicit output (write the letters out)")
    inputs, out = equation.split("->")
    terms = inputs.split(",")
    if any(len(set(t)) != len(t) for t in (*terms, out)):
        raise Unsupported(f"Einsum {equation!r}: a repeated letter (a diagonal)")
    if len(terms) == 1:
        _permute(w, node, terms[0], out)
        return
    if len(terms) != 2:
        raise Unsupported(f"Einsum {equation!r} of {len(terms)} operands")
    a, b = terms
    batch = [c for c in out if c in a and c in b]
    left, right = [c for c in out if c in a and c not in b], [c for c in out if c in b and c not in a]
    contracted = [c for c in a if c in b and c not in out]
    if set(a) != {*batch, *left, *contracted} or set(b) != {*batch, *right, *contracted}:
        raise Unsupported(f"Einsum {equation!r}: a letter summed within one operand")
    sizes: dict[str, int] = {}
    for term, name in zip(terms, node.input):
        for letter, size in zip(term, w.qg.shape(name)):
            if sizes.setdefault(letter, size) != size:
                raise Unsupported(f"Einsum {equation!r}: letter {letter!r} of sizes {sizes[letter]} and {size}")
    x = _arranged(w, node, float_in(w, node.input[0]), a, [batch, left, contracted], sizes, "a")
    y = _arranged(w, node, float_in(w, node.input[1]), b, [batch, contracted, right], sizes, "b")
    product_shape = tuple(math.prod(sizes[c] for c in group) for group in (batch, left, right))
    product = w.b.add_tensor(f"{node.name}/product", product_shape, "float32")
    w.op("BATCH_MATMUL", [x, y], [product], {"adj_x": False, "adj_y": False})
    order = batch + left + right
    perm = [order.index(c) for c in out]
    shaped = product
    if perm != sorted(perm):
        shaped = _reshaped(w, node, product, [sizes[c] for c in order], "ordered")
        w.op("TRANSPOSE", [shaped, w.int32(f"{node.name}/out_perm", perm)], [float_out(w, node.output[0])])
        return
    w.op("RESHAPE", [shaped, w.int32(f"{node.name}/out_shape", list(w.qg.shape(node.output[0])))],
         [float_out(w, node.output[0])])


def _permute(w: Writer, node: onnx.NodeProto, term: str, out: str) -> None:
    if sorted(term) != sorted(out):
        raise Unsupported(f"Einsum {term}->{out}: a sum over one operand")
    w.op("TRANSPOSE", [float_in(w, node.input[0]), w.int32(f"{node.name}/perm", [term.index(c) for c in out])],
         [float_out(w, node.output[0])])


def _arranged(w: Writer, node: onnx.NodeProto, tensor: int, term: str, groups: list[list[str]],
              sizes: dict[str, int], which: str) -> int:
    """``tensor`` (letters ``term``) transposed to the groups' letter order and reshaped to one axis per group."""
    order = [c for group in groups for c in group]
    perm = [term.index(c) for c in order]
    if perm != sorted(perm):
        tensor = transposed(w, tensor, tuple(perm), f"{node.name}/{which}_ordered")
    return _reshaped(w, node, tensor, [math.prod(sizes[c] for c in group) for group in groups], which)


def _reshaped(w: Writer, node: onnx.NodeProto, tensor: int, shape: list[int], which: str) -> int:
    if list(w.b.shape(tensor)) == shape:
        return tensor
    out = w.b.add_tensor(f"{node.name}/{which}_shaped", tuple(shape), "float32")
    w.op("RESHAPE", [tensor, w.int32(f"{node.name}/{which}_shape", shape)], [out])
    return out
