"""Toolchain environments: a vendor SDK in a Python environment of its own, which accelbuild creates and drives.

Vendor compilers pin what they run on (rknn-toolkit2: numpy <= 1.26, onnx <= 1.18, Python <= 3.12), so they
cannot share accelbuild's interpreter. A family declares a ``Toolchain`` (``declaration.py``): a fully pinned
package list and a Python range. accelbuild creates it once under ``<cache dir>/toolchains/<name>-<digest>/``
(``environment.py``), runs the family's vendor-facing driver script there through a small versioned file
protocol (``protocol.py``; the script side is ``runtime.py``, standard library only), and keys every task that
runs in it on the package list (``Toolchain.identity``), which needs no installed environment: a task restored
from the cache runs nothing. docs/toolchains.md is the user's page; "Writing a family" in docs/architecture.md
says how a family declares one.
"""

from accelbuild.toolchains.declaration import Toolchain
from accelbuild.toolchains.environment import (
    Environment,
    ToolchainError,
    ToolchainRef,
    find,
    install,
    require,
    user_environment,
)
from accelbuild.toolchains.protocol import PROTOCOL, VendorRefusal, read_outputs, run_driver, workspace, write_frames

__all__ = ["PROTOCOL", "Environment", "Toolchain", "ToolchainError", "ToolchainRef", "VendorRefusal", "find",
           "install", "read_outputs", "require", "run_driver", "user_environment", "workspace", "write_frames"]
