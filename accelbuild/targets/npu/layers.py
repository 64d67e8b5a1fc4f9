"""The NPU's view of a model: layers with Q/DQ folded away, fused where the profile allows, with their work.

``layers_of(info, hw, names)`` turns the nodes named (default: every layer) into ``Layer`` records in
topological order: the unit that runs them, MACs or element work per frame, weight bytes, the bits they
compute with (from their weight and activation Q/DQ; ``default_bits`` in a float model), and where their
inputs come from and their output goes (other layers, or outside: DDR). Both the scheduler and the
partitioner's estimates start here, so they price the same layers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import onnx

from accelbuild.targets.npu.graph_info import MATRIX_OPS, QDQ_OPS, GraphInfo, attribute
from accelbuild.targets.npu.hardware import NpuHardware, Unit

# metadata only, or (Concat) no work of its own: its producers write into their slices of its buffer, as vendor
# compilers place them
FREE_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Concat"})
CHANNEL_MOVES = ((0, 2, 3, 1), (0, 3, 1, 2))  # NCHW -> NHWC and back: no data moves on a channels-last NPU
DEPTHWISE_WINDOW_TAPS = 9  # a 3x3 window: a larger depthwise kernel keeps Unit.large_depthwise_efficiency lanes
_TWO_OPS = frozenset({"Sigmoid", "Tanh", "Softplus", "HardSigmoid", "HardSwish", "Exp", "Div", "BatchNormalization",
                      "Sqrt", "Log", "Erf", "Gelu"})
SILU = "SiLU"  # a fusion-chain op: the Sigmoid + Mul pair of x * sigmoid(x)
# a fusion-chain op: x * 0.5 * (1 + erf(x / sqrt 2)) as exporters write GELU below opset 20: Div, Erf, Add,
# Mul(x, .), Mul(., 0.5)
GELU = "GELU"
MISH = "Mish"  # a fusion-chain op: x * tanh(softplus(x)) as exporters write Mish below opset 18
# each chain op's nodes from x on, one reading the next; the Mul that ends the activation (GELU: the first Mul,
# before the 0.5) reads x again
_CHAIN_OP_PATH = {SILU: ("Sigmoid", "Mul"), GELU: ("Div", "Erf", "Add", "Mul", "Mul"), MISH: ("Softplus", "Tanh", "Mul")}
CHAIN_OP_NODES = {op: len(path) for op, path in _CHAIN_OP_PATH.items()}  # nodes a chain op stands for
_REDUCE = frozenset({"GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum",
                     "ArgMax", "ArgMin"})


@dataclass(frozen=True)
class Layer:
    """One NPU layer (a fused group of nodes: head first)."""

    name: str                                   # the head node's name
    members: tuple[str, ...]
    ops: tuple[str, ...]
    unit: str
    order: int                                  # its last member's position in the model's order
    macs: int                                   # per frame (matrix layers)
    work: float                                 # per frame: element operations (other layers)
    util: float                                 # matrix: array share x kernel class's efficiency / unit's
    weight_bytes: int
    sources: tuple[tuple[str | None, int], ...]  # (producing layer or None = outside, bytes per frame)
    out_bytes: int                              # per frame
    readers: tuple[str, ...]                    # layers reading the output (in this set)
    is_output: bool                             # the output leaves the set (model output / other subgraph)
    bits: int                                   # 16 when any operand is 16-bit, else 8
    rows: int = 1                               # output rows (H of an NCHW output; 1 when not spatial)
    kernel_rows: int = 1                        # input rows one output row reads (the head's kernel height)
    relabel: bool = False                       # moves no data (a channel cut; a channel move, channels-last)

    @cached_property  # the scheduler asks for both for every layer of every plan it tries
    def in_bytes(self) -> int:
        return sum(nbytes for _, nbytes in self.sources)

    @cached_property
    def free(self) -> bool:
        return self.relabel or all(op in FREE_OPS for op in self.ops)


def compute_cycles(layer: Layer, unit: Unit, batch: int) -> int:
    """Cycles the layer's unit is busy for ``batch`` frames (no memory effects)."""
    if layer.free:
        return 0
    factor = unit.bits16_factor if layer.bits == 16 else 1.0
    if unit.kind == "matrix":
        return math.ceil(layer.macs * batch * factor / (unit.macs_per_cycle * unit.efficiency * layer.util))
    return math.ceil(layer.work * batch * factor / (unit.elements_per_cycle * unit.efficiency))


def layers_of(info: GraphInfo, hw: NpuHardware, names: Iterable[str] | None = None, *, fuse: bool = True,
              default_bits: int = 8) -> list[Layer]:
    """The NPU layers of ``names`` (default: every layer of ``info``), in order, fused where allowed."""
    chosen = info.layers() if names is None else _chosen(info, names)
    inside = {n.name for n in chosen}
    groups = _fuse(info, hw, chosen, inside) if fuse else [[n] for n in chosen]
    group_of = {node.name: group[0].name for group in groups for node in group}
    owned_outputs = info.output_layers()
    edges = info.layer_edges(inside)
    result = []
    groups.sort(key=lambda group: info.order(group[-1].name))  # a group runs when its last member can
    for group in groups:
        head, tail = group[0], group[-1]
        unit = hw.unit_for(head.op_type)
        if unit is None:
            raise ValueError(f"layer {head.name}: the {hw.name} NPU does not run {head.op_type}")
        members = {n.name for n in group}
        sources: dict[str, int] = {}   # producing layer -> bytes per frame
        outside: dict[str, int] = {}   # tensor from outside the set (DDR) -> bytes per frame
        for node in group:
            for tensor in info.data_inputs(node):
                src = _source_layer(info, tensor)
                if src in members:
                    continue
                key = group_of.get(src) if src is not None else None
                nbytes = info.elements(tensor) * _tensor_bits(info, src, default_bits) // 8
                if key is None:
                    outside[tensor] = nbytes
                else:
                    sources[key] = max(sources.get(key, 0), nbytes)
        readers = sorted({group_of[r] for m in members for r in edges.get(m, []) if r in group_of} - {head.name},
                         key=info.order)
        leaves = _leaves(info, members, inside)
        weight_bits = info.weight_bits(head) or default_bits
        act_bits = info.activation_bits(tail) or default_bits
        result.append(Layer(
            name=head.name, members=tuple(n.name for n in group), ops=tuple(n.op_type for n in group),
            unit=unit.name, order=info.order(tail.name), macs=info.macs(head), work=element_work(info, head),
            util=array_util(info, head, unit), weight_bytes=info.weight_elements(head) * weight_bits // 8,
            sources=tuple([*sources.items(), *((None, nbytes) for nbytes in outside.values())]),
            out_bytes=sum(info.elements(out) for out in tail.output if out) * act_bits // 8,
            readers=tuple(readers), is_output=leaves or bool(members & owned_outputs),
            bits=16 if 16 in (weight_bits, act_bits) else 8, rows=_rows(info, tail), kernel_rows=_kernel_rows(info, head),
            relabel=_moves_no_data(info, group, hw)))
    return result


def _moves_no_data(info: GraphInfo, group: list[onnx.NodeProto], hw: NpuHardware) -> bool:
    """A lone Split or Slice that only cuts a 4-D tensor's channels: each reader reads its channels in place,
    as a Concat's producers write theirs (YOLOv8's C2f, FasterNet's partial convolution). A lone Transpose
    that moves a 4-D tensor's channel axis last or back, on an NPU that stores feature maps channel-last: the
    bytes are already in the order the next layer reads (``NpuHardware.channels_last``)."""
    if len(group) == 1 and group[0].op_type in ("Split", "Slice"):
        return _cuts_only_channels(info, group[0])
    if not hw.channels_last or len(group) != 1 or group[0].op_type != "Transpose":
        return False
    shape = info.shape(group[0].input[0])
    perm = tuple(attribute(group[0], "perm", ()))
    return shape is not None and len(shape) == 4 and perm in CHANNEL_MOVES


def _cuts_only_channels(info: GraphInfo, node: onnx.NodeProto) -> bool:
    source = info.shape(node.input[0])
    if source is None or len(source) != 4:
        return False
    kept = (source[0], *source[2:])
    outputs = [info.shape(name) for name in node.output if name]
    return bool(outputs) and all(o is not None and len(o) == 4 and (o[0], *o[2:]) == kept for o in outputs)


def _rows(info: GraphInfo, node: onnx.NodeProto) -> int:
    shape = info.shape(node.output[0]) if node.output else None
    return int(shape[2]) if shape is not None and len(shape) == 4 and shape[2] > 0 else 1


def _kernel_rows(info: GraphInfo, node: onnx.NodeProto) -> int:
    """Input rows one output row reads: the kernel height of a convolution or pooling, else 1."""
    kernel = attribute(node, "kernel_shape", None)
    if kernel is None and node.op_type in ("Conv", "ConvTranspose") and len(node.input) > 1:
        weight = info.shape(node.input[1])
        kernel = weight[2:] if weight is not None and len(weight) == 4 else None
    return int(list(kernel)[0]) if kernel else 1


def _chosen(info: GraphInfo, names: Iterable[str]) -> list[onnx.NodeProto]:
    return [info.node(name) for name in sorted(set(names), key=info.order)]


def _leaves(info: GraphInfo, members: set[str], inside: set[str]) -> bool:
    """Whether a layer outside the set reads what the group produces (through Q/DQ nodes)."""
    edges = info.layer_edges()
    return any(reader not in inside for name in members for reader in edges.get(name, ()))


def _source_layer(info: GraphInfo, tensor: str) -> str | None:
    node = info.producer.get(tensor)
    return None if node is None else info.owner.get(node.name)


def _tensor_bits(info: GraphInfo, layer: str | None, default_bits: int) -> int:
    if layer is None:
        return default_bits
    return info.activation_bits(info.node(layer)) or default_bits


def _fuse(info: GraphInfo, hw: NpuHardware, chosen: list[onnx.NodeProto], inside: set[str]) -> list[list[onnx.NodeProto]]:
    """Greedy, in order: a head starts the longest profile chain whose ops follow it one by one (``SiLU``
    in a chain is the pair Sigmoid(x), Mul(x, Sigmoid(x)) reading the previous member, ``GELU`` the five
    nodes of the erf form, ``Mish`` Softplus(x), Tanh, Mul(x, .)). A chain op no head took is one activation
    layer of its own; a layer's output multiplied or divided by one constant is its requantization scale."""
    heads = hw.fusion_heads()
    nodes_in = {chain: sum(CHAIN_OP_NODES.get(op, 1) for op in chain) for chains in heads.values() for chain in chains}
    edges = info.layer_edges(inside)
    taken: set[str] = set()
    groups = []
    for node in chosen:
        if node.name in taken:
            continue
        group = [node]
        read_by = {info.node(r).op_type for r in edges.get(node.name, ())}
        for chain in heads.get(node.op_type, ()):
            if _CHAIN_OP_PATH.get(chain[1], (chain[1],))[0] not in read_by:  # no reader starts its next op
                continue
            candidate = [node]
            for op in chain[1:]:
                follower = _follower(info, edges, candidate[-1], op, inside, taken)
                if follower is None:
                    break
                candidate.extend(follower)
            if len(candidate) == nodes_in[chain]:
                group = candidate
                break
        if len(group) == 1:
            group = _standalone_chain_op(info, edges, node, inside, taken) or group
        while (rescale := _rescale(info, edges, group[-1], inside, taken)) is not None:
            group.append(rescale)
        taken.update(n.name for n in group)
        groups.append(group)
    return groups


def _follower(info: GraphInfo, edges: dict[str, list[str]], last: onnx.NodeProto, op: str, inside: set[str],
              taken: set[str]) -> list[onnx.NodeProto] | None:
    """The node(s) that take ``last``'s output as chain op ``op`` and nothing else reads, or None."""
    readers = edges.get(last.name, [])
    if any(r in taken or r not in inside for r in readers) or _leaves(info, {last.name}, inside):
        return None
    if op not in CHAIN_OP_NODES:
        return [info.node(readers[0])] if len(readers) == 1 and info.node(readers[0]).op_type == op else None
    if len(readers) != 2:
        return None
    first = next((info.node(r) for r in readers if info.node(r).op_type == _CHAIN_OP_PATH[op][0]), None)
    path = None if first is None else _chain_op_path(info, edges, first, op, inside)
    return path if path is not None and {n.name for n in path} >= set(readers) else None


def _chain_op_path(info: GraphInfo, edges: dict[str, list[str]], first: onnx.NodeProto, op: str,
                   inside: set[str]) -> list[onnx.NodeProto] | None:
    """Chain op ``op`` from its first node on, or None: each node the only reader of the one before, none of
    them read outside the set, and the Mul that ends the activation (GELU: the one before the 0.5) reading
    ``first``'s input x as well."""
    path = [first]
    for step in _CHAIN_OP_PATH[op][1:]:
        after = edges.get(path[-1].name, [])
        if len(after) != 1 or info.node(after[0]).op_type != step or _leaves(info, {path[-1].name}, inside):
            return None
        path.append(info.node(after[0]))
    product = path[3] if op == GELU else path[-1]
    return path if any(_same_tensor(info, first.input[0], t) for t in product.input) else None


def _same_tensor(info: GraphInfo, a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are one tensor, or one layer's output through Q/DQ nodes of its own."""
    source = _source_layer(info, a)
    return a == b or (source is not None and source == _source_layer(info, b)
                      and info.producer[a].op_type in QDQ_OPS and info.producer[b].op_type in QDQ_OPS)


def _standalone_chain_op(info: GraphInfo, edges: dict[str, list[str]], node: onnx.NodeProto, inside: set[str],
                         taken: set[str]) -> list[onnx.NodeProto] | None:
    """The chain op ``node`` starts when no fusion head took it (GELU after a residual Add): one layer, as a
    vector unit evaluates the activation in one pass, or None."""
    for op, path in _CHAIN_OP_PATH.items():
        if node.op_type == path[0]:
            found = _chain_op_path(info, edges, node, op, inside)
            if found is not None and not any(n.name in taken for n in found):
                return found
    return None


def _rescale(info: GraphInfo, edges: dict[str, list[str]], last: onnx.NodeProto, inside: set[str],
             taken: set[str]) -> onnx.NodeProto | None:
    """The Mul or Div by one constant that alone reads ``last``'s output, or None. An integer NPU runs it in
    ``last``'s requantization (the output scale times the constant), as NFNet's gains and GELU's 0.5."""
    readers = edges.get(last.name, [])
    if len(readers) != 1 or readers[0] in taken or _leaves(info, {last.name}, inside):
        return None
    node = info.node(readers[0])
    if node.op_type not in ("Mul", "Div") or len(node.input) != 2:
        return None
    constant = node.input[1] if node.op_type == "Div" else next((t for t in node.input if info.is_constant(t)), "")
    return node if constant and info.is_constant(constant) and info.elements(constant) == 1 else None


def element_work(info: GraphInfo, node: onnx.NodeProto) -> float:
    """Element operations of one frame of a non-matrix layer (0 for matrix and metadata-only layers)."""
    op = node.op_type
    if op in MATRIX_OPS or op in FREE_OPS:
        return 0.0
    out = sum(info.elements(t) for t in node.output if t)
    if op in _REDUCE:
        return float(info.elements(node.input[0]))
    if op in ("MaxPool", "AveragePool"):
        kernel = list(attribute(node, "kernel_shape", [1]))
        return float(out * math.prod(kernel))
    if op == "Resize":
        mode = attribute(node, "mode", b"nearest")
        return float(out * (4 if mode in (b"linear", "linear") else 1))
    if op == "Softmax":
        return 4.0 * out
    if op in _TWO_OPS:
        return 2.0 * out
    return float(out)


def array_util(info: GraphInfo, node: onnx.NodeProto, unit: Unit) -> float:
    """Share of the MAC array a layer keeps busy: reduction and output dimensions rounded up to the array.
    The one field of a ``Layer`` that moves with a unit's efficiencies (depthwise lanes, a kernel's shape,
    attention's share)."""
    if unit.kind != "matrix":
        return 1.0
    a_in, a_out = unit.align
    weight = info.shape(node.input[1]) if len(node.input) > 1 else None
    if node.op_type in ("Conv", "ConvTranspose") and weight is not None and len(weight) >= 3:
        group = int(attribute(node, "group", 1))
        if node.op_type == "Conv" and group > 1 and weight[1] == 1:  # depthwise: the lanes it keeps busy
            large = unit.large_depthwise_efficiency if math.prod(weight[2:]) > DEPTHWISE_WINDOW_TAPS else None
            return (large if large is not None else unit.depthwise_efficiency) / a_in
        k = math.prod(weight[1:]) if node.op_type == "Conv" else weight[0] // group * math.prod(weight[2:])
        n = weight[0] // group if node.op_type == "Conv" else weight[1]
        return _fill(k, a_in) * _fill(n, a_out) * _kernel_share(node, weight, unit)
    inp, out = info.shape(node.input[0]), info.shape(node.output[0])
    if not inp or not out:
        return 1.0
    dynamic = node.op_type == "MatMul" and len(node.input) > 1 and not info.is_constant(node.input[1])
    share = unit.dynamic_matmul_efficiency if dynamic else _relative(unit.pointwise_efficiency, unit)
    return _fill(inp[-1], a_in) * _fill(out[-1], a_out) * share


def _kernel_share(node: onnx.NodeProto, weight: Sequence[int], unit: Unit) -> float:
    """A dense convolution's efficiency by its kernel, relative to the unit's ``efficiency`` (which prices a
    kernel larger than 1x1 at stride 1): a strided one's, else a 1x1 one's, where the profile gives them."""
    strides = list(attribute(node, "strides", [1])) if node.op_type == "Conv" else [1]
    if max(strides, default=1) > 1:
        return _relative(unit.strided_efficiency, unit)
    return _relative(unit.pointwise_efficiency, unit) if math.prod(weight[2:]) == 1 else 1.0


def _relative(efficiency: float | None, unit: Unit) -> float:
    return 1.0 if efficiency is None else efficiency / unit.efficiency


def _fill(size: int, align: int) -> float:
    return size / (math.ceil(size / align) * align) if size > 0 else 1.0
