"""The TFLite operator table :data:`OPS`: builtin name -> converter and support checks.

Importing the op modules registers their converters; see :mod:`.base` for the check protocol.
"""

from accelbuild.frontends.tflite.ops import conv, elementwise, shape, slicing, spatial  # noqa: F401  (register)
from accelbuild.frontends.tflite.ops.base import GENERIC_CHECKS, OPS, Check, OpSpec

__all__ = ["GENERIC_CHECKS", "OPS", "Check", "OpSpec"]
