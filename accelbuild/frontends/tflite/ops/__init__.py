"""The TFLite operator tables: :data:`OPS` (builtin name -> converter and support checks) and
:data:`CUSTOM_OPS` (custom code of a ``CUSTOM`` operator -> converter); :func:`spec_for` picks an
operator's entry.

Importing the op modules registers their converters; see :mod:`.base` for the check protocol.
"""

from accelbuild.frontends.tflite.ops import (  # noqa: F401  (register)
    arithmetic,
    arrays,
    blocks,
    control,
    conv,
    conv3d,
    detection,
    elementwise,
    indexing,
    levels,
    recurrent,
    shape,
    slicing,
    spatial,
    spectral,
    stablehlo,
)
from accelbuild.frontends.tflite.ops.base import (
    CUSTOM_OPS,
    GENERIC_CHECKS,
    OPS,
    Check,
    OpSpec,
    spec_for,
)

__all__ = ["CUSTOM_OPS", "GENERIC_CHECKS", "OPS", "Check", "OpSpec", "spec_for"]
