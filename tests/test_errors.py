"""The error hierarchy."""

from __future__ import annotations

import pickle

from accelbuild.errors import ConfigError, InputFileError, Where
from accelbuild.targets.npu.partition import TooManySubgraphsError


def test_errors_pickle_as_they_are() -> None:
    """Errors cross processes (Dask workers, process pools): each comes back whole, whatever its __init__."""
    for error in (TooManySubgraphsError(5, 3, [["l1.sin"]]), ConfigError(Where("p.yaml", 3, 4), "bad key", "x: 1"),
                  InputFileError("m.onnx", "not an ONNX model")):
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error) and str(back) == str(error) and back.__dict__ == error.__dict__
