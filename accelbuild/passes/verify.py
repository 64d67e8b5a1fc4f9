"""Check that graph passes kept the model's function: run before and after in onnxruntime.

Passes are meant to be lossless, but they lean on onnx's shape inference and reference evaluator,
which real exporters sometimes trip up (a scalar losing its rank, a shape inferred differently from
what onnxruntime computes). One seeded sample through both models catches that.
"""

from __future__ import annotations

import numpy as np
import onnx

TOLERANCE = 1e-3  # relative to the output's largest magnitude: folding and BN reorder float rounding


class Reference:
    """The input model's outputs on one seeded sample, to compare processed models against."""

    def __init__(self, model: onnx.ModelProto, seed: int = 0) -> None:
        from accelbuild import accuracy

        self.feeds = accuracy.random_inputs(model, 1, seed)
        self.outputs = _run(model, self.feeds)

    @property
    def usable(self) -> bool:
        return self.outputs is not None

    def max_relative_error(self, candidate: onnx.ModelProto) -> float | None:
        """Largest relative output difference; None if the candidate fails to run or changes shapes."""
        got = _run(candidate, self.feeds)
        if got is None or self.outputs is None:
            return None
        worst = 0.0
        for a, b in zip(self.outputs, got):
            if a.shape != b.shape:
                return None
            if a.size == 0 or not np.issubdtype(a.dtype, np.number):
                continue
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            scale = float(np.max(np.abs(a64))) or 1.0
            worst = max(worst, float(np.max(np.abs(a64 - b64))) / scale)
        return worst


def _run(model: onnx.ModelProto, feeds: list) -> list[np.ndarray] | None:
    from accelbuild.quantize import measure

    try:
        return measure.run_all(measure.session(model), feeds)[0]
    except Exception:  # onnxruntime reports graph errors as many exception types
        return None
