"""TensorFlow's own int8 converter on the face detector's float network, for ``bench/face_detector.py``.

The original .tflite is not a SavedModel, so the float network accelbuild imported (``ai.onnx``: Conv,
depthwise Conv, Relu, Add, Pad, MaxPool, Reshape, Concat, Transpose) is run as a ``tf.function`` (channel-last
inside each convolution and pooling) and converted with ``TFLiteConverter`` full-int8 on the same
calibration frames. Its float conversion must match the original model (checked by the caller). Any other
operator is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import onnx
from onnx import helper, numpy_helper


def _attribute(node: onnx.NodeProto, name: str, default: object = None) -> object:
    for attribute in node.attribute:
        if attribute.name == name:
            return helper.get_attribute_value(attribute)
    return default


def as_tf_function(model: onnx.ModelProto, shape: list[int]) -> Callable:
    """The float model as a ``tf.function`` of its one NHWC input, returning {output name: tensor}."""
    import tensorflow as tf

    consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}

    def nhwc(x):
        return tf.transpose(x, [0, 2, 3, 1])

    def nchw(x):
        return tf.transpose(x, [0, 3, 1, 2])

    def conv(node, x):
        weight = consts[node.input[1]]
        p = _attribute(node, "pads", [0, 0, 0, 0])
        s = _attribute(node, "strides", [1, 1])
        x = nhwc(x)
        if any(p):
            x = tf.pad(x, [[0, 0], [p[0], p[2]], [p[1], p[3]], [0, 0]])
        if _attribute(node, "group", 1) == 1:
            y = tf.nn.conv2d(x, weight.transpose(2, 3, 1, 0), [1, s[0], s[1], 1], "VALID")
        else:
            y = tf.nn.depthwise_conv2d(x, weight.transpose(2, 3, 0, 1), [1, s[0], s[1], 1], "VALID")
        return nchw(y + consts[node.input[2]] if len(node.input) > 2 else y)

    def pad(node, x):
        pads = consts[node.input[1]]
        rank = len(pads) // 2
        return tf.pad(x, [[int(pads[i]), int(pads[i + rank])] for i in range(rank)])

    def max_pool(node, x):
        kernel = _attribute(node, "kernel_shape")
        return nchw(tf.nn.max_pool2d(nhwc(x), kernel, _attribute(node, "strides", kernel), "VALID"))

    ops = {"Transpose": lambda n, a: tf.transpose(a[0], _attribute(n, "perm")),
           "Conv": lambda n, a: conv(n, a[0]), "Relu": lambda n, a: tf.nn.relu(a[0]),
           "Add": lambda n, a: a[0] + a[1], "Pad": lambda n, a: pad(n, a[0]),
           "MaxPool": lambda n, a: max_pool(n, a[0]),
           "Reshape": lambda n, a: tf.reshape(a[0], consts[n.input[1]]),
           "Concat": lambda n, a: tf.concat(a, _attribute(n, "axis"))}
    refused = sorted({n.op_type for n in model.graph.node} - set(ops))
    if refused:
        raise SystemExit(f"the TFLiteConverter route here does not read {', '.join(refused)}")

    @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32)])
    def network(x):
        values = {model.graph.input[0].name: x}
        for node in model.graph.node:
            args = [values[i] if i in values else tf.constant(consts[i]) for i in node.input]
            values[node.output[0]] = ops[node.op_type](node, args)
        return {o.name: values[o.name] for o in model.graph.output}

    return network


def convert(model: onnx.ModelProto, shape: list[int], calibration: Iterable[np.ndarray] | None) -> bytes:
    """TFLiteConverter's float model (``calibration`` None) or its full-int8 model calibrated on the frames."""
    import tensorflow as tf

    network = as_tf_function(model, shape)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([network.get_concrete_function()], network)
    if calibration is not None:
        frames = list(calibration)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([x] for x in frames)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
    return converter.convert()
