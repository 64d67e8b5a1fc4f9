"""The ONNX graph under construction, and the naming scheme that ties it to the TFLite file.

Naming scheme (so crop points and per-layer bit tables can use the names Netron shows for the
``.tflite`` file):

* Every TFLite tensor ``T`` keeps its name (empty names become ``tensor_<index>``, a repeated name gets
  ``_<index>`` appended). The ONNX tensor ``T`` holds the TFLite value, in the TFLite (NHWC) layout and
  shape.
* The ONNX node that computes a TFLite operator's function (the Conv of a CONV_2D, the Gemm of a
  FULLY_CONNECTED, the Add of an ADD...) is named after the operator's first output ``T``. So the
  layer ``T`` is the node ``T``, and the value ``T`` is the tensor ``T``.
* Helper nodes are named ``T/<role>`` and produce ``T/<role>``; the last node of an operator's chain
  produces ``T`` itself. Roles: ``T/nchw_in`` (input moved to channel-first), ``T/nchw`` (channel-first
  result), ``T/pre``, ``T/nchw_pre``, ``T/2d_pre`` (before a fused activation), ``T/act`` (the fused
  activation), ``T/nhwc`` (back to channel-last), ``T/flat``/``T/2d``/``T/reshape`` (FULLY_CONNECTED
  rank changes), ``T/slice`` (STRIDED_SLICE before its shrink reshape), ``T/beta`` (SOFTMAX scaling).
  Shape and axis constants are ``T/shape``, ``T/axes``, ``T/pads``...; shared scalars ``const/<type>/<v>``.
  A helper name that a TFLite tensor already uses gets ``_1``, ``_2``... appended.
* Quantized (int8/uint8/int16) graph inputs and outputs keep their integer type under the name ``T``;
  the float value is ``T/float``, made by node ``T/dequantize`` (inputs) or consumed by ``T/quantize``
  (outputs).
* A subgraph an operator calls (IF's branches, a composite's decomposition, WHILE's body) is converted with
  its tensors named ``T/<role>/<name>`` (``T``: the calling operator's first output; roles ``then``,
  ``else``, ``decomposition``, ``cond``, ``body``, ``next``; a CALL_ONCE's initializer ``init<k>/<name>``).
* Weights permuted for ONNX are initializers ``W/oihw`` (Conv, grouped Conv) or ``W/iohw``
  (ConvTranspose); constants used as they are keep the TFLite name ``W``.

When a channel-last copy ``T`` sits between two channel-first ops it is removed by
:func:`layout.collapse_transposes` (after :mod:`.transpose_sinking` moved Transposes below the ops that do
not care about layout); the value then lives on as ``T/nchw``, and a crop point ``T`` means it
(``stages/crop.py``), not the output of node ``T``, which comes before a fused activation.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from accelbuild.frontends.tflite import layout
from accelbuild.frontends.tflite.reader import Model, Operator, Tensor
from accelbuild.frontends.tflite.tensors import onnx_type

log = logging.getLogger(__name__)

ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
# The TFLite interpreter's kernels only clamp to an activation range, which is unbounded for these.
IGNORED_ACTIVATIONS = ("TANH", "SIGN_BIT")
_CLIP_BOUNDS = {"RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}


def unique_names(model: Model) -> list[str]:
    """TFLite tensor names made unique and non-empty (ONNX requires both)."""
    seen: set[str] = set()
    names = []
    for tensor in model.tensors:
        name = tensor.name or f"tensor_{tensor.index}"
        while name in seen:
            name = f"{name}_{tensor.index}"
        seen.add(name)
        names.append(name)
    return names


class Graph:
    """Nodes and initializers of the converted model, addressed by TFLite tensor index."""

    def __init__(self, model: Model, consts: dict[int, np.ndarray]) -> None:
        self.model = model
        self.consts = consts
        self.names = unique_names(model)
        self.values = list(self.names)  # ONNX tensor holding each TFLite tensor's float value
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}
        self._taken = set(self.names)  # TFLite names are reserved; helpers never shadow them
        self._cache: dict[tuple, str] = {}
        self.variables: dict[str, str] = {}  # resource variable -> ONNX tensor of its current value
        self.handles: dict[int, str] = {}  # VAR_HANDLE output tensor -> its resource variable
        self.root = model  # the file's main graph: subgraph indices refer to its list
        self.depth = 0  # how many subgraph calls deep this graph is

    def called(self, sub: Model, consts: dict[int, np.ndarray], prefix: str, inputs: Sequence[str],
               own_nodes: bool = False) -> Graph:
        """The graph of a called subgraph ``sub``, its tensors named ``<prefix>/<name>`` and its inputs bound
        to the ONNX tensors ``inputs``.

        Its nodes and initializers go into this graph (inlined), or with ``own_nodes`` into lists of its own
        (an ONNX subgraph such as a Loop body); names stay unique across both, and resource variables are
        shared.
        """
        child = Graph.__new__(Graph)
        child.model, child.consts = sub, consts
        child.names = [self.fresh(f"{prefix}/{name}") for name in unique_names(sub)]
        child.values = list(child.names)
        for index, name in zip(sub.inputs, inputs):
            child.values[index] = name
        child.nodes = [] if own_nodes else self.nodes
        child.initializers = {} if own_nodes else self.initializers
        child._taken, child._cache = self._taken, {}
        child.variables, child.handles = self.variables, {}
        child.root, child.depth = self.root, self.depth + 1
        return child

    # ------------------------------------------------------------------ TFLite side

    def tensor(self, index: int) -> Tensor:
        return self.model.tensors[index]

    def shape(self, index: int) -> tuple[int, ...]:
        return self.model.tensors[index].shape

    def const(self, index: int) -> np.ndarray | None:
        """Compute value of a constant (or folded) tensor, None for activations and omitted inputs."""
        return None if index < 0 else self.consts.get(index)

    def const_value(self, index: int) -> np.ndarray:
        """The value of an input the op's checks (``const_inputs``) require to be constant."""
        value = self.const(index)
        if value is None:
            what = self.names[index] if index >= 0 else "an omitted input"
            raise ValueError(f"tensor {what!r} is not a constant, but its operator converts only constants")
        return value

    def name(self, op: Operator, k: int = 0) -> str:
        """TFLite name of output ``k``: the name of the op's main node and helper prefix."""
        return self.names[op.outputs[k]]

    # ------------------------------------------------------------------ ONNX side

    def value(self, index: int) -> str:
        """ONNX tensor holding TFLite tensor ``index``; constants become initializers on first use."""
        name = self.values[index]
        if index in self.consts and name not in self.initializers:
            self.initializers[name] = numpy_helper.from_array(np.asarray(self.consts[index], order="C"), name)
        return name

    def out(self, op: Operator, k: int = 0) -> str:
        return self.values[op.outputs[k]]

    def fresh(self, name: str) -> str:
        """``name``, or ``name_<k>`` if a TFLite tensor or an earlier helper already uses it."""
        candidate, k = name, 0
        while candidate in self._taken:
            k += 1
            candidate = f"{name}_{k}"
        self._taken.add(candidate)
        return candidate

    def add_const(self, name: str, array: np.ndarray) -> str:
        """A helper initializer under a fresh name (returned)."""
        name = self.fresh(name)
        self.initializers[name] = numpy_helper.from_array(np.asarray(array, order="C"), name)
        return name

    def derived(self, index: int, tag: str, transform: Any) -> str:
        """Initializer ``W/<tag>`` holding ``transform(value of W)``, made once per (W, tag)."""
        key = ("derived", index, tag)
        if key not in self._cache:
            self._cache[key] = self.add_const(f"{self.names[index]}/{tag}", transform(self.consts[index]))
        return self._cache[key]

    def scalar(self, value: float | int, dtype: type = np.float32) -> str:
        """A shared scalar constant (Clip bounds, pad values...)."""
        key = ("scalar", np.dtype(dtype).name, value)
        if key not in self._cache:
            self._cache[key] = self.add_const(f"const/{np.dtype(dtype).name}/{value!r}", np.array(value, dtype))
        return self._cache[key]

    def ints(self, name: str, values: Sequence[int]) -> str:
        """An int64 vector constant (shapes, axes, pads) under a fresh name."""
        return self.add_const(name, np.asarray(list(values), dtype=np.int64))

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], name: str,
             **attrs: Any) -> None:
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=name, **attrs))

    def to_nchw(self, op: Operator, source: str, role: str = "nchw_in") -> str:
        """Transpose an NHWC value to NCHW as helper ``T/<role>``."""
        name = self.fresh(f"{self.name(op)}/{role}")
        self.nodes.append(layout.transpose_node(name, source, name, layout.TO_NCHW))
        return name

    def emit(self, op: Operator, op_type: str, inputs: Sequence[str], *, act: str = "NONE",
             tail: tuple[str, Any] | None = None, **attrs: Any) -> None:
        """The op's main node (named T), its fused activation, and a tail step back to TFLite form.

        ``tail`` is ``("nhwc", None)`` (Transpose back from NCHW, the value before it is ``T/nchw``) or
        ``("reshape", (shape, role))`` (Reshape to the TFLite shape, the value before it is ``T/<role>``).
        """
        base, final = self.name(op), self.out(op)
        if act in IGNORED_ACTIVATIONS:
            log.warning("%s: fused activation %s of %s (tensor %r) is ignored, as the TFLite interpreter "
                        "ignores it", self.model.path, act, op.name, base)
            act = "NONE"
        before_tail = final if tail is None else \
            self.fresh(f"{base}{layout.CHANNEL_FIRST_SUFFIX}" if tail[0] == "nhwc" else f"{base}/{tail[1][1]}")
        before_act = before_tail if act == "NONE" else self.fresh(f"{before_tail}_pre" if tail else f"{base}/pre")
        self.node(op_type, inputs, [before_act], base, **attrs)
        if act != "NONE":
            self.activation(self.fresh(f"{base}/act"), act, before_act, before_tail)
        if tail is not None and tail[0] == "nhwc":
            self.nodes.append(layout.transpose_node(self.fresh(f"{base}/nhwc"), before_tail, final, layout.TO_NHWC))
        elif tail is not None:
            shape = self.ints(f"{base}/shape", tail[1][0])
            self.node("Reshape", [before_tail, shape], [final], self.fresh(f"{base}/reshape"))

    def activation(self, name: str, act: str, source: str, output: str) -> None:
        """A fused RELU, RELU6 or RELU_N1_TO_1 as an ONNX node."""
        if act == "RELU":
            self.node("Relu", [source], [output], name)
        else:
            low, high = _CLIP_BOUNDS[act]
            self.node("Clip", [source, self.scalar(low), self.scalar(high)], [output], name)

    def value_info(self, index: int, name: str | None = None) -> onnx.ValueInfoProto:
        """Typed, shaped value info for a TFLite tensor (TFLite static shape)."""
        elem = onnx_type(self.tensor(index)) or onnx.TensorProto.FLOAT
        shape = list(self.shape(index))
        if self.tensor(index).dtype == "COMPLEX64":  # real and imaginary parts along a last axis
            shape.append(2)
        return helper.make_tensor_value_info(name or self.values[index], elem, shape)
