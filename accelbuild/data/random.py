"""Seeded random inputs for a model: what accuracy and verification use when no representative data is given."""

from __future__ import annotations

import numpy as np
import onnx

from accelbuild.util import onnx_graph as g

Feeds = dict[str, np.ndarray]


def input_specs(model: onnx.ModelProto) -> list[tuple[str, list[int], np.dtype]]:
    specs = []
    for value in g.real_inputs(model.graph):
        tensor = value.type.tensor_type
        shape = [d.dim_value for d in tensor.shape.dim]
        specs.append((value.name, shape, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))))
    return specs


def random_inputs(model: onnx.ModelProto, samples: int, seed: int) -> list[Feeds]:
    """Seeded inputs: floats uniform in [0, 1) (an image-like range), small integers, False booleans."""
    rng = np.random.default_rng(seed)
    result = []
    for _ in range(samples):
        feeds = {}
        for name, shape, dtype in input_specs(model):
            if np.issubdtype(dtype, np.floating):
                feeds[name] = rng.random(shape, dtype=np.float32).astype(dtype)
            elif dtype == np.bool_:
                feeds[name] = np.zeros(shape, dtype=dtype)
            else:
                feeds[name] = rng.integers(0, 4, shape).astype(dtype)
        result.append(feeds)
    return result
