"""Deterministic builders for tiny ONNX models used in tests and examples.

Each builder returns an in-memory :class:`onnx.ModelProto`. Weights come from
``np.random.default_rng(seed)``, so identical arguments always serialize to
identical bytes. Every node has an explicit name, and each node's output tensor
shares that name (e.g. node ``stem.conv`` produces tensor ``stem.conv``), which
keeps the graphs readable and gives stable crop/partition points.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 8
PRODUCER_NAME = "accelbuild-testing"
SMALL_MODEL_OPSET = 13
MIN_OPSET = 13
MAX_OPSET = 18  # newest opset that IR version 8 can carry

REG_MAX = 4
NUM_CLASSES = 3
HEAD_CHANNELS = 4 * REG_MAX + NUM_CLASSES  # 19
HEAD_STRIDES = {"p3": 8, "p4": 16, "p5": 32}

Dim = int | str


class _GraphBuilder:
    """Collects named nodes and initializers and assembles them into a model."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}

    def const(self, name: str, value: Any, dtype: type = np.float32) -> str:
        """Add (or reuse an identical) initializer and return its name."""
        tensor = numpy_helper.from_array(np.asarray(value, dtype=dtype), name)
        existing = self.initializers.get(name)
        if existing is not None and existing != tensor:
            raise ValueError(f"initializer {name!r} redefined with a different value")
        self.initializers[name] = tensor
        return name

    def i64(self, name: str, value: Any) -> str:
        """Add an int64 initializer (shapes, axes, indices)."""
        return self.const(name, value, np.int64)

    def normal(self, name: str, shape: Sequence[int], fan_in: int) -> str:
        """Add a He-initialised float32 weight."""
        std = math.sqrt(2.0 / fan_in)
        return self.const(name, self.rng.normal(0.0, std, size=tuple(shape)))

    def uniform(self, name: str, shape: Sequence[int], low: float, high: float) -> str:
        """Add a uniformly initialised float32 tensor."""
        return self.const(name, self.rng.uniform(low, high, size=tuple(shape)))

    def op(self, op_type: str, name: str, inputs: Sequence[str],
           output: str | None = None, **attrs: Any) -> str:
        """Add a single-output node; the output tensor defaults to the node name."""
        out = output or name
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=name, **attrs))
        return out

    def op_multi(self, op_type: str, name: str, inputs: Sequence[str],
                 outputs: Sequence[str], **attrs: Any) -> list[str]:
        """Add a multi-output node with explicit output names."""
        node = helper.make_node(op_type, list(inputs), list(outputs), name=name, **attrs)
        self.nodes.append(node)
        return list(outputs)

    def build(self, graph_name: str, inputs: Sequence[onnx.ValueInfoProto],
              outputs: Sequence[onnx.ValueInfoProto], opset: int) -> onnx.ModelProto:
        """Assemble the collected graph into a model with the project's metadata."""
        graph = helper.make_graph(
            self.nodes, graph_name, list(inputs), list(outputs),
            initializer=list(self.initializers.values()),
        )
        return helper.make_model(
            graph,
            producer_name=PRODUCER_NAME,
            ir_version=IR_VERSION,
            opset_imports=[helper.make_opsetid("", opset)],
        )


def _float_info(name: str, shape: Sequence[Dim]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _check_opset(opset: int) -> None:
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"opset must be in [{MIN_OPSET}, {MAX_OPSET}], got {opset}")


# --------------------------------------------------------------------------- layers


def _conv(g: _GraphBuilder, name: str, x: str, cin: int, cout: int, k: int,
          stride: int = 1, group: int = 1, bias: bool = True) -> str:
    """Conv with 'same' padding; weights ``<name>.weight`` / ``<name>.bias``."""
    fan_in = cin // group * k * k
    inputs = [x, g.normal(f"{name}.weight", (cout, cin // group, k, k), fan_in)]
    if bias:
        inputs.append(g.uniform(f"{name}.bias", (cout,), -0.1, 0.1))
    return g.op("Conv", name, inputs, kernel_shape=[k, k], pads=[k // 2] * 4,
                strides=[stride, stride], group=group)


def _batch_norm(g: _GraphBuilder, name: str, x: str, channels: int) -> str:
    """Inference-mode BatchNormalization with random but well-conditioned statistics."""
    params = [
        g.uniform(f"{name}.scale", (channels,), 0.5, 1.5),
        g.uniform(f"{name}.bias", (channels,), -0.1, 0.1),
        g.uniform(f"{name}.mean", (channels,), -0.1, 0.1),
        g.uniform(f"{name}.var", (channels,), 0.5, 1.5),
    ]
    return g.op("BatchNormalization", name, [x, *params], epsilon=1e-3, momentum=0.97)


def _silu(g: _GraphBuilder, name: str, x: str) -> str:
    """SiLU written as ``x * Sigmoid(x)`` (how exporters emit it)."""
    gate = g.op("Sigmoid", f"{name}.sigmoid", [x])
    return g.op("Mul", f"{name}.mul", [x, gate])


def _conv_bn_silu(g: _GraphBuilder, name: str, x: str, cin: int, cout: int, k: int,
                  stride: int = 1, group: int = 1) -> str:
    """Unfused ``<name>.conv`` -> ``<name>.bn`` -> ``<name>.act.{sigmoid,mul}`` block."""
    y = _conv(g, f"{name}.conv", x, cin, cout, k, stride, group, bias=False)
    y = _batch_norm(g, f"{name}.bn", y, cout)
    return _silu(g, f"{name}.act", y)


def _gemm(g: _GraphBuilder, name: str, x: str, cin: int, cout: int,
          output: str | None = None) -> str:
    """Fully connected layer ``x @ W.T + b`` as a single Gemm."""
    weight = g.normal(f"{name}.weight", (cout, cin), cin)
    bias = g.uniform(f"{name}.bias", (cout,), -0.1, 0.1)
    return g.op("Gemm", name, [x, weight, bias], output=output, transB=1)


def _upsample2x(g: _GraphBuilder, name: str, x: str) -> str:
    """Nearest-neighbour 2x Resize given by scales (roi left empty)."""
    scales = g.const("const.resize.scales_2x", [1.0, 1.0, 2.0, 2.0])
    return g.op("Resize", name, [x, "", scales], mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")


# ------------------------------------------------------------------------ detector


def _c2f(g: _GraphBuilder, name: str, x: str, c: int) -> str:
    """C2f-like block: 1x1, Split in halves, residual bottleneck, Concat, 1x1."""
    half = c // 2
    y = _conv_bn_silu(g, f"{name}.cv1", x, c, c, 1)
    a, b = g.op_multi("Split", f"{name}.split", [y, g.i64(f"{name}.split.sizes", [half, half])],
                      [f"{name}.split.0", f"{name}.split.1"], axis=1)
    m = _conv_bn_silu(g, f"{name}.m0.cv1", b, half, half, 3)
    m = _conv_bn_silu(g, f"{name}.m0.cv2", m, half, half, 3)
    m = g.op("Add", f"{name}.m0.add", [b, m])
    y = g.op("Concat", f"{name}.concat", [a, b, m], axis=1)
    return _conv_bn_silu(g, f"{name}.cv2", y, 3 * half, c, 1)


def _sppf(g: _GraphBuilder, name: str, x: str, c: int) -> str:
    """SPPF-like block: 1x1, three chained MaxPool(5, stride 1, pad 2), Concat, 1x1."""
    hidden = c // 2
    y = _conv_bn_silu(g, f"{name}.cv1", x, c, hidden, 1)
    pooled = [y]
    for i in range(3):
        pooled.append(g.op("MaxPool", f"{name}.pool{i}", [pooled[-1]],
                           kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]))
    y = g.op("Concat", f"{name}.concat", pooled, axis=1)
    return _conv_bn_silu(g, f"{name}.cv2", y, 4 * hidden, c, 1)


def _backbone(g: _GraphBuilder, x: str, w: int) -> tuple[str, str, str]:
    """Stride-8/16/32 features with 2w, 4w and 4w channels."""
    y = _conv_bn_silu(g, "stem", x, 3, w, 3, stride=2)                    # /2
    y = _conv_bn_silu(g, "stage1.down", y, w, 2 * w, 3, stride=2)         # /4
    y = _c2f(g, "stage1.c2f", y, 2 * w)
    y = _conv_bn_silu(g, "stage2.down", y, 2 * w, 2 * w, 3, stride=2)     # /8
    p3 = _conv_bn_silu(g, "stage2.dwconv", y, 2 * w, 2 * w, 3, group=2 * w)
    y = _conv_bn_silu(g, "stage3.down", p3, 2 * w, 4 * w, 3, stride=2)    # /16
    p4 = _conv_bn_silu(g, "stage3.gconv", y, 4 * w, 4 * w, 3, group=2)
    y = _conv_bn_silu(g, "stage4.down", p4, 4 * w, 4 * w, 3, stride=2)    # /32
    p5 = _sppf(g, "stage4.sppf", y, 4 * w)
    return p3, p4, p5


def _neck(g: _GraphBuilder, p3: str, p4: str, p5: str, w: int) -> tuple[str, str, str]:
    """Top-down FPN: lateral 1x1, Resize 2x, Concat, 1x1 fuse; 2w channels out."""
    c = 2 * w
    n5 = _conv_bn_silu(g, "neck.p5.lateral", p5, 4 * w, c, 1)
    y = g.op("Concat", "neck.p4.concat", [_upsample2x(g, "neck.p5.up", n5), p4], axis=1)
    n4 = _conv_bn_silu(g, "neck.p4.fuse", y, c + 4 * w, c, 1)
    y = g.op("Concat", "neck.p3.concat", [_upsample2x(g, "neck.p4.up", n4), p3], axis=1)
    n3 = _conv_bn_silu(g, "neck.p3.fuse", y, c + 2 * w, c, 1)
    return n3, n4, n5


def _detect_head(g: _GraphBuilder, level: str, x: str, cin: int, hidden: int) -> str:
    """Box (4*reg_max) and class branches concatenated into ``head.<level>``."""
    name = f"head.{level}"
    box = _conv_bn_silu(g, f"{name}.box.stem", x, cin, hidden, 3)
    box = _conv(g, f"{name}.box", box, hidden, 4 * REG_MAX, 1)
    cls = _conv_bn_silu(g, f"{name}.cls.stem", x, cin, hidden, 3)
    cls = _conv(g, f"{name}.cls", cls, hidden, NUM_CLASSES, 1)
    return g.op("Concat", name, [box, cls], axis=1)


def _batch_shape(g: _GraphBuilder, name: str, x: str, tail: Sequence[int]) -> str:
    """Shape tensor ``[x.shape[0], *tail]`` built with Shape/Gather/Unsqueeze/Concat."""
    shape = g.op("Shape", f"{name}.shape", [x])
    batch = g.op("Gather", f"{name}.batch", [shape, g.i64("const.i64.0", 0)], axis=0)
    batch = g.op("Unsqueeze", f"{name}.batch_1d", [batch, g.i64("const.axes.0", [0])])
    return g.op("Concat", f"{name}.target", [batch, g.i64(f"{name}.tail", tail)], axis=0)


def _flatten_head(g: _GraphBuilder, level: str, head: str) -> str:
    """Reshape ``[batch, 19, h, w]`` to ``[batch, 19, h*w]``."""
    name = f"decode.{level}.flatten"
    shape = _batch_shape(g, name, head, [HEAD_CHANNELS, -1])
    return g.op("Reshape", name, [head, shape])


def _cell_centres(g: _GraphBuilder, name: str, size: str) -> str:
    """``arange(size) + 0.5`` as float32 from a scalar int64 size."""
    start, step = g.i64("const.i64.0", 0), g.i64("const.i64.1", 1)
    idx = g.op("Range", f"{name}.range", [start, size, step])
    idx = g.op("Cast", f"{name}.cast", [idx], to=TensorProto.FLOAT)
    return g.op("Add", f"{name}.centre", [idx, g.const("const.f32.0_5", 0.5)])


def _anchors(g: _GraphBuilder, level: str, head: str, stride: int) -> tuple[str, str]:
    """Anchor points ``[2, h*w]`` (x, y in grid units) and strides ``[1, h*w]``."""
    name = f"decode.{level}.anchors"
    shape = g.op("Shape", f"{name}.shape", [head])
    hw = g.op("Gather", f"{name}.hw", [shape, g.i64("const.idx.hw", [2, 3])], axis=0)
    h = g.op("Gather", f"{name}.h", [shape, g.i64("const.i64.2", 2)], axis=0)
    w = g.op("Gather", f"{name}.w", [shape, g.i64("const.i64.3", 3)], axis=0)
    xs = g.op("Unsqueeze", f"{name}.x.row", [_cell_centres(g, f"{name}.x", w),
                                             g.i64("const.axes.0", [0])])
    ys = g.op("Unsqueeze", f"{name}.y.col", [_cell_centres(g, f"{name}.y", h),
                                             g.i64("const.axes.1", [1])])
    flat = g.i64("const.shape.1_n", [1, -1])
    xs = g.op("Reshape", f"{name}.x.flat", [g.op("Expand", f"{name}.x.grid", [xs, hw]), flat])
    ys = g.op("Reshape", f"{name}.y.flat", [g.op("Expand", f"{name}.y.grid", [ys, hw]), flat])
    points = g.op("Concat", f"{name}.points", [xs, ys], axis=0)
    one = g.i64("const.i64.1d_1", [1])
    stride_shape = g.op("Concat", f"{name}.stride.shape", [one, hw], axis=0)
    strides = g.op("Expand", f"{name}.stride.grid",
                   [g.const(f"{name}.stride.value", np.full((1, 1, 1), stride)), stride_shape])
    return points, g.op("Reshape", f"{name}.stride", [strides, flat])


def _dfl(g: _GraphBuilder, name: str, box: str) -> str:
    """Distribution focal loss decode: ``[batch, 4*reg_max, N]`` -> ``[batch, 4, N]``."""
    shape = _batch_shape(g, f"{name}.bins", box, [4, REG_MAX, -1])
    y = g.op("Reshape", f"{name}.reshape_in", [box, shape])
    y = g.op("Transpose", f"{name}.transpose", [y], perm=[0, 2, 1, 3])
    y = g.op("Softmax", f"{name}.softmax", [y], axis=1)
    weight = g.const(f"{name}.conv.weight", np.arange(REG_MAX).reshape(1, REG_MAX, 1, 1))
    y = g.op("Conv", f"{name}.conv", [y, weight], kernel_shape=[1, 1])
    shape = _batch_shape(g, f"{name}.coords", y, [4, -1])
    return g.op("Reshape", f"{name}.reshape_out", [y, shape])


def _dist2bbox(g: _GraphBuilder, name: str, dist: str, anchors: str) -> str:
    """ltrb distances ``[batch, 4, N]`` -> centre-xywh boxes (grid units)."""
    lt, rb = g.op_multi("Split", f"{name}.split", [dist, g.i64(f"{name}.split.sizes", [2, 2])],
                        [f"{name}.lt", f"{name}.rb"], axis=1)
    x1y1 = g.op("Sub", f"{name}.x1y1", [anchors, lt])
    x2y2 = g.op("Add", f"{name}.x2y2", [anchors, rb])
    total = g.op("Add", f"{name}.sum", [x1y1, x2y2])
    centre = g.op("Div", f"{name}.cxcy", [total, g.const("const.f32.2", 2.0)])
    wh = g.op("Sub", f"{name}.wh", [x2y2, x1y1])
    return g.op("Concat", f"{name}.xywh", [centre, wh], axis=1)


def _decode(g: _GraphBuilder, heads: Sequence[tuple[str, str]]) -> str:
    """Ultralytics-style in-graph decode of ``(level, head)`` pairs into ``output0``."""
    flat = [_flatten_head(g, level, head) for level, head in heads]
    anchor_parts = [_anchors(g, level, head, HEAD_STRIDES[level]) for level, head in heads]
    y = g.op("Concat", "decode.concat", flat, axis=2)
    sizes = g.i64("decode.split.sizes", [4 * REG_MAX, NUM_CLASSES])
    box, cls = g.op_multi("Split", "decode.split", [y, sizes],
                          ["decode.box", "decode.cls"], axis=1)
    points = g.op("Concat", "decode.anchors", [p for p, _ in anchor_parts], axis=1)
    strides = g.op("Concat", "decode.strides", [s for _, s in anchor_parts], axis=1)
    boxes = _dist2bbox(g, "decode.dist2bbox", _dfl(g, "decode.dfl", box), points)
    boxes = g.op("Mul", "decode.boxes", [boxes, strides])
    scores = g.op("Sigmoid", "decode.scores", [cls])
    return g.op("Concat", "decode.output", [boxes, scores], output="output0", axis=1)


def tiny_detector(opset: int = 17, seed: int = 0, width: int = 8) -> onnx.ModelProto:
    """YOLOv8-style detector with unfused BN, three heads and an in-graph decode.

    Input ``images`` is ``[batch, 3, height, width]`` (height/width divisible by 32);
    output ``output0`` is ``[batch, 4 + 3, N]`` (xywh in pixels, then class scores).
    The raw heads ``head.p3``, ``head.p4``, ``head.p5`` are ``[batch, 19, h, w]``.
    """
    _check_opset(opset)
    if width < 2 or width % 2:
        raise ValueError(f"width must be an even number >= 2, got {width}")
    g = _GraphBuilder(seed)
    p3, p4, p5 = _backbone(g, "images", width)
    necks = _neck(g, p3, p4, p5, width)
    heads = [(level, _detect_head(g, level, x, 2 * width, width))
             for level, x in zip(HEAD_STRIDES, necks)]
    output = _decode(g, heads)
    return g.build(
        "tinydet",
        [_float_info("images", ["batch", 3, "height", "width"])],
        [_float_info(output, ["batch", 4 + NUM_CLASSES, "anchors"])],
        opset,
    )


# ----------------------------------------------------------------- small models


def _hard_swish(g: _GraphBuilder, name: str, x: str, opset: int) -> str:
    """HardSwish op when available (opset >= 14), else ``x * HardSigmoid(x)``."""
    if opset >= 14:
        return g.op("HardSwish", name, [x])
    gate = g.op("HardSigmoid", f"{name}.hardsigmoid", [x], alpha=1.0 / 6.0, beta=0.5)
    return g.op("Mul", f"{name}.mul", [x, gate])


def tiny_classifier(opset: int = 13, seed: int = 0) -> onnx.ModelProto:
    """MobileNet-flavoured classifier: ``input`` [1, 3, 32, 32] -> ``probs`` [1, 10]."""
    _check_opset(opset)
    g = _GraphBuilder(seed)
    y = _conv(g, "stem.conv", "input", 3, 16, 3, stride=2, bias=False)
    y = g.op("Relu", "stem.relu", [_batch_norm(g, "stem.bn", y, 16)])
    y = _conv(g, "dw.conv", y, 16, 16, 3, group=16)
    y = g.op("Clip", "dw.relu6", [y, g.const("dw.relu6.min", 0.0), g.const("dw.relu6.max", 6.0)])
    y = _conv(g, "pw.conv", y, 16, 32, 1)
    y = g.op("PRelu", "pw.prelu", [y, g.uniform("pw.prelu.slope", (32, 1, 1), 0.05, 0.25)])
    y = _hard_swish(g, "pw.hardswish", y, opset)
    y = g.op("GlobalAveragePool", "pool", [y])
    y = g.op("Flatten", "flatten", [y], axis=1)
    logits = _gemm(g, "fc", y, 32, 10, output="logits")
    probs = g.op("Softmax", "softmax", [logits], output="probs", axis=1)
    return g.build("tinycls", [_float_info("input", [1, 3, 32, 32])],
                   [_float_info(probs, [1, 10])], opset)


def nhwc_input_model(seed: int = 0) -> onnx.ModelProto:
    """TF-export style: NHWC ``input_1`` -> Transpose -> Conv -> Relu -> Transpose -> ``out``."""
    g = _GraphBuilder(seed)
    y = g.op("Transpose", "to_nchw", ["input_1"], perm=[0, 3, 1, 2])
    y = g.op("Relu", "relu", [_conv(g, "conv", y, 3, 8, 3)])
    out = g.op("Transpose", "to_nhwc", [y], output="out", perm=[0, 2, 3, 1])
    return g.build("nhwc", [_float_info("input_1", ["N", "H", "W", 3])],
                   [_float_info(out, ["N", "H", "W", 8])], SMALL_MODEL_OPSET)


def multi_input_model(seed: int = 0) -> onnx.ModelProto:
    """Two inputs: ``image`` [batch, 3, 16, 16] and ``meta`` [batch, 4] -> ``y`` [batch, 2]."""
    g = _GraphBuilder(seed)
    y = _conv(g, "image.conv", "image", 3, 8, 3)
    y = g.op("GlobalAveragePool", "image.pool", [y])
    y = g.op("Flatten", "image.flatten", [y], axis=1)
    y = g.op("Concat", "fuse.concat", [y, "meta"], axis=1)
    out = _gemm(g, "fc", y, 8 + 4, 2, output="y")
    return g.build(
        "multi_input",
        [_float_info("image", ["batch", 3, 16, 16]), _float_info("meta", ["batch", 4])],
        [_float_info(out, ["batch", 2])],
        SMALL_MODEL_OPSET,
    )


def static_mlp(seed: int = 0) -> onnx.ModelProto:
    """``x`` [1, 16] -> Gemm+Relu -> MatMul+Add -> Sigmoid -> ``y`` [1, 8]."""
    g = _GraphBuilder(seed)
    y = g.op("Relu", "fc1.relu", [_gemm(g, "fc1", "x", 16, 32)])
    y = g.op("MatMul", "fc2.matmul", [y, g.normal("fc2.weight", (32, 8), 32)])
    y = g.op("Add", "fc2.add", [y, g.uniform("fc2.bias", (8,), -0.1, 0.1)])
    out = g.op("Sigmoid", "sigmoid", [y], output="y")
    return g.build("mlp", [_float_info("x", [1, 16])], [_float_info(out, [1, 8])],
                   SMALL_MODEL_OPSET)


BUILDERS: dict[str, Callable[[], onnx.ModelProto]] = {
    "tinydet": tiny_detector,
    "tinycls": tiny_classifier,
    "nhwc": nhwc_input_model,
    "multi_input": multi_input_model,
    "mlp": static_mlp,
}


def resnet50(seed: int = 0, size: int = 224) -> onnx.ModelProto:
    """ResNet-50 v1.5 with random weights (BatchNorm already folded into conv biases): 4.09 GMAC and
    25.5 M parameters at 224x224, the network of the MX3 calibration figure."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def conv(name: str, x: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> str:
        w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"{name}.weight"))
        inits.append(numpy_helper.from_array(np.zeros(cout, np.float32), f"{name}.bias"))
        nodes.append(helper.make_node("Conv", [x, f"{name}.weight", f"{name}.bias"], [name], name=name,
                                      kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4))
        if not relu:
            return name
        nodes.append(helper.make_node("Relu", [name], [f"{name}.relu"], name=f"{name}.relu"))
        return f"{name}.relu"

    x = conv("stem", "input", 3, 64, 7, 2)
    nodes.append(helper.make_node("MaxPool", [x], ["stem.pool"], name="stem.pool", kernel_shape=[3, 3],
                                  strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = "stem.pool", 64
    for stage, (blocks, width) in enumerate(((3, 64), (4, 128), (6, 256), (3, 512))):
        for block in range(blocks):
            name, stride = f"layer{stage + 1}.{block}", (2 if block == 0 and stage > 0 else 1)
            y = conv(f"{name}.conv1", x, cin, width, 1)
            y = conv(f"{name}.conv2", y, width, width, 3, stride)
            y = conv(f"{name}.conv3", y, width, width * 4, 1, relu=False)
            shortcut = conv(f"{name}.down", x, cin, width * 4, 1, stride, relu=False) if block == 0 else x
            nodes.append(helper.make_node("Add", [y, shortcut], [f"{name}.add"], name=f"{name}.add"))
            nodes.append(helper.make_node("Relu", [f"{name}.add"], [f"{name}.out"], name=f"{name}.out"))
            x, cin = f"{name}.out", width * 4
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"], name="pool"))
    nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flat"))
    w = (rng.standard_normal((1000, 2048)) * 0.01).astype(np.float32)
    inits += [numpy_helper.from_array(w, "fc.weight"), numpy_helper.from_array(np.zeros(1000, np.float32), "fc.bias")]
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(nodes, "resnet50", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                              [1, 3, size, size])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                             producer_name="accelbuild-testing")


class _Net:
    """Random-weight conv nets with BatchNorm folded (conv bias), as ``resnet50`` builds them."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def conv(self, name: str, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1,
             act: str | None = "Relu") -> str:
        fan_in = cin // group * k * k
        w = (self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        self.inits.append(numpy_helper.from_array(w, f"{name}.weight"))
        self.inits.append(numpy_helper.from_array(np.zeros(cout, np.float32), f"{name}.bias"))
        self.nodes.append(helper.make_node("Conv", [x, f"{name}.weight", f"{name}.bias"], [name], name=name,
                                           kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4,
                                           group=group))
        if act is None:
            return name
        out = f"{name}.{act.lower()}"
        if act == "Clip":  # ReLU6
            self.const("const.relu6.min", 0.0)
            self.const("const.relu6.max", 6.0)
            self.nodes.append(helper.make_node("Clip", [name, "const.relu6.min", "const.relu6.max"], [out], name=out))
        else:
            self.nodes.append(helper.make_node(act, [name], [out], name=out))
        return out

    def const(self, name: str, value: float) -> None:
        if all(t.name != name for t in self.inits):
            self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))

    def op(self, op_type: str, name: str, inputs: list[str], **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name

    def classifier(self, x: str, cin: int, classes: int = 1000) -> str:
        self.op("GlobalAveragePool", "pool", [x])
        self.op("Flatten", "flat", ["pool"])
        w = (self.rng.standard_normal((classes, cin)) * 0.01).astype(np.float32)
        self.inits += [numpy_helper.from_array(w, "fc.weight"),
                       numpy_helper.from_array(np.zeros(classes, np.float32), "fc.bias")]
        self.nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1))
        return "logits"

    def model(self, name: str, size: int, classes: int = 1000) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                                  [1, 3, size, size])],
                                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])],
                                  self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                                 producer_name=PRODUCER_NAME)


def resnet18(seed: int = 0, size: int = 224) -> onnx.ModelProto:
    """ResNet-18 with random weights (BatchNorm folded): 1.82 GMAC and 11.7 M parameters at 224x224, the
    network of the RDK X5 calibration figure."""
    net = _Net(seed)
    x = net.conv("stem", "input", 3, 64, 7, 2)
    x = net.op("MaxPool", "stem.pool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, width in enumerate((64, 128, 256, 512)):
        for block in range(2):
            name, stride = f"layer{stage + 1}.{block}", (2 if block == 0 and stage > 0 else 1)
            y = net.conv(f"{name}.conv1", x, cin, width, 3, stride)
            y = net.conv(f"{name}.conv2", y, width, width, 3, act=None)
            shortcut = net.conv(f"{name}.down", x, cin, width, 1, stride, act=None) if stride != 1 or cin != width \
                else x
            y = net.op("Add", f"{name}.add", [y, shortcut])
            x, cin = net.op("Relu", f"{name}.out", [y]), width
    net.classifier(x, 512)
    return net.model("resnet18", size)


def mobilenet_v1(seed: int = 0, size: int = 224, width: float = 1.0) -> onnx.ModelProto:
    """MobileNetV1 (ReLU6, the MLPerf variant's layers) with random weights (BatchNorm folded): 0.57 GMAC and
    4.2 M parameters at 224x224 and width 1.0, the network of the TDA4VM calibration figure."""
    net = _Net(seed)

    def channels(c: int) -> int:
        return max(8, int(c * width))

    x = net.conv("stem", "input", 3, channels(32), 3, 2, act="Clip")
    cin = channels(32)
    plan = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]
    for i, (cout, stride) in enumerate(plan):
        x = net.conv(f"block{i + 1}.dw", x, cin, cin, 3, stride, group=cin, act="Clip")
        x = net.conv(f"block{i + 1}.pw", x, cin, channels(cout), 1, act="Clip")
        cin = channels(cout)
    net.classifier(x, cin, 1001)
    return net.model("mobilenet_v1", size, 1001)
