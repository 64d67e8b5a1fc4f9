"""Apache TVM (Relax) as a compiler of ONNX models: for this CPU (family cpu, ``backend: tvm``; the npu host
subgraphs measured here) and for an AArch64 board's CPU (the npu host subgraphs a board runs).

Every program is a Relax VM executable (``tvm.relax.build(...).export_library``). To run one:
``tvm.runtime.load_module(path)``, ``tvm.relax.VirtualMachine(module, tvm.cpu())["main"](*inputs)`` with the
model's inputs in the ONNX graph's input order; it returns the outputs in the graph's output order (one
tensor, or a tuple). An AArch64 program is a shared object when a cross linker is installed
(``aarch64-linux-gnu-gcc``, Debian's ``gcc-aarch64-linux-gnu``), else a tar of its object files, which
``load_module`` links with the board's own compiler.

Needs the ``tvm`` extra (``pip install 'accelbuild[tvm]'``); ``available()`` says whether it is installed,
without importing it (the import takes most of a second).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import re
import shutil
import subprocess
import tarfile
import tempfile
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbuild.errors import StageError

if TYPE_CHECKING:  # numpy and onnx where a model is compiled or run: a cpu pipeline's no-op run needs neither
    import numpy as np
    import onnx

EXTRA = "pip install 'accelbuild[tvm]'"
CROSS_LINKER = "aarch64-linux-gnu-gcc"


def available() -> bool:
    return importlib.util.find_spec("tvm") is not None


def version() -> str | None:
    """The installed apache-tvm's version (None without the extra): a stage parameter, so a new TVM rebuilds."""
    try:
        return importlib.metadata.version("apache-tvm")
    except importlib.metadata.PackageNotFoundError:
        return None


def require_version(planned: str) -> None:
    """StageError unless the installed apache-tvm is the one the build was planned with (a stage parameter:
    a worker with another TVM, or none, must not build)."""
    installed = version()
    if installed != planned:
        raise StageError(f"apache-tvm {installed or '(not installed)'} is here, but the build was planned with "
                         f"{planned} ({EXTRA})")


def host_target() -> dict[str, Any]:
    """LLVM's target for this machine's CPU, as ``tvm.target.Target`` takes it."""
    import tvm

    return {"kind": "llvm", "mcpu": str(tvm.target.codegen.llvm_get_system_cpu())}


def portable_target(arch: str, flags: Sequence[str]) -> dict[str, Any]:
    """LLVM's target for programs run on machines like this one (``arch`` and ISA ``flags`` as
    ``util.machine`` reads them), named by ISA level rather than by this exact CPU: the same build on another
    machine of the same level gives the same bytes, and runs there."""
    if arch in ("x86_64", "AMD64"):
        level = "x86-64-v3" if {"avx2", "fma"} <= set(flags) else "x86-64-v2"
        return {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": level}
    if arch in ("aarch64", "arm64"):
        return {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mattr": ["+neon"]}
    return {"kind": "llvm"}


def arm_target(core: str) -> dict[str, Any]:
    """LLVM's target for an AArch64 Linux board whose CPU is ``core`` (a profile's host name: for an Arm
    Cortex-A core, e.g. "Cortex-A72", LLVM's ``-mcpu`` is its lower-case form; other names get the generic
    AArch64 CPU)."""
    target: dict[str, Any] = {"kind": "llvm", "mtriple": "aarch64-linux-gnu"}
    if re.fullmatch(r"cortex-a\d+", core.strip().lower()):
        target["mcpu"] = core.strip().lower()
    return {**target, "mattr": ["+neon"]}


@lru_cache(maxsize=1)
def cross_linker() -> str | None:
    """``"aarch64-linux-gnu-gcc <version>"`` when the cross linker is on PATH, else None: a stage parameter,
    since it decides between a shared object and an object archive (and its version shapes the bytes)."""
    path = shutil.which(CROSS_LINKER)
    if path is None:
        return None
    try:
        found = subprocess.run([path, "-dumpfullversion"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{CROSS_LINKER} {found.stdout.strip()}"


def compile_model(model: onnx.ModelProto, target: dict[str, Any], out: Path, *, linker: str | None = None) -> None:
    """Import ``model`` with TVM's ONNX frontend, build it for ``target`` and export it to ``out``: a shared
    object (linked by ``linker``, a command, when given; else by the system's compiler), or, for ``out``
    ending in ``.tar``, a deterministic tar of its object files. Raises StageError when TVM cannot import or
    build it (with TVM's first line)."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    try:
        with warnings.catch_warnings():  # TVM renames inputs whose names are not identifiers (the VM takes
            warnings.simplefilter("ignore")  # inputs by position)
            module = from_onnx(model, keep_params_in_input=False)
    except Exception as exc:  # TVM's own error types
        raise StageError(f"TVM's ONNX frontend cannot import the model ({first_line(exc)})") from None
    try:
        executable = relax.build(module, target=tvm.target.Target(target))
    except Exception as exc:
        raise StageError(f"TVM cannot build the model for {target} ({first_line(exc)})") from None
    try:
        if out.suffix == ".tar":
            executable.export_library(str(out), fcompile=_object_archive)
        elif linker:
            executable.export_library(str(out), cc=linker)
        else:
            executable.export_library(str(out))
    except Exception as exc:
        raise StageError(f"TVM cannot link the model for {target} ({first_line(exc)})") from None


def _object_archive(output: str, objects: list[str], **_: Any) -> None:
    """``export_library``'s compile step for a ``.tar``: the object files under their own names, in sorted
    order, with no time, owner or mode of this machine (TVM's own tar step calls the system's ``tar``)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path in sorted(objects, key=lambda p: Path(p).name):
            data = Path(path).read_bytes()
            info = tarfile.TarInfo(Path(path).name)
            info.size, info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = \
                len(data), 0, 0o644, 0, 0, "", ""
            tar.addfile(info, io.BytesIO(data))
    Path(output).write_bytes(raw.getvalue())


@dataclass(frozen=True)
class _Value:
    name: str


class TvmSession:
    """A compiled model.so in TVM's VM, with the calls of an onnxruntime session that the checks and the
    benchmark use (``get_inputs``, ``get_outputs``, ``run``)."""

    def __init__(self, library: Path, model: onnx.ModelProto) -> None:
        import tvm
        from tvm import relax

        initializers = {t.name for t in model.graph.initializer}
        self.inputs = [_Value(i.name) for i in model.graph.input if i.name not in initializers]
        self.outputs = [_Value(o.name) for o in model.graph.output]
        self._tensor = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
        self._vm = relax.VirtualMachine(tvm.runtime.load_module(str(library)), tvm.cpu())
        self._main = self._vm["main"]

    def get_inputs(self) -> list[_Value]:
        return self.inputs

    def get_outputs(self) -> list[_Value]:
        return self.outputs

    def run(self, names: list[str] | None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        import numpy as np

        # np.ascontiguousarray makes a scalar (rank 0) an array of rank 1, which the VM refuses: keep its shape
        result = self._main(*(self._tensor(np.ascontiguousarray(feeds[i.name]).reshape(np.shape(feeds[i.name])))
                              for i in self.inputs))
        values = [result] if hasattr(result, "numpy") else list(result)
        outputs = dict(zip((o.name for o in self.outputs), (v.numpy() for v in values)))
        return [outputs[n] for n in (names or [o.name for o in self.outputs])]


def load(data: bytes, model: onnx.ModelProto) -> TvmSession:
    """A session of model.so's bytes (written to a private temp file, removed with the session: TVM loads
    shared objects by path)."""
    folder = Path(tempfile.mkdtemp(prefix="accelbuild-tvm-"))
    library = folder / "model.so"
    library.write_bytes(data)
    session = TvmSession(library, model)
    weakref.finalize(session, shutil.rmtree, folder, True)
    return session


def first_line(exc: BaseException) -> str:
    """TVM's message in one line: its first line, and the next one when the first only introduces it
    ("Compilation error:")."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    text = " ".join(lines[:2]) if lines[0].endswith(":") and len(lines) > 1 else lines[0]
    return text[:300]
