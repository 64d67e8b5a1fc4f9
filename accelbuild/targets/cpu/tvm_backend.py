"""Family cpu, ``backend: tvm``: the whole model compiled by Apache TVM (Relax) for this CPU, run in TVM's VM.

``<model>/model.so`` is a Relax VM executable (``tvm.relax.build(...).export_library``) for LLVM's x86-64
target with this CPU's ``-mcpu`` (``tvm.json`` records it). To run it: ``tvm.runtime.load_module(path)``,
``tvm.relax.VirtualMachine(module, tvm.cpu())["main"](*inputs)`` with the model's inputs in the ONNX
graph's input order; it returns the outputs in the graph's output order (one tensor, or a tuple).

Needs the ``tvm`` extra (``pip install 'accelbuild[tvm]'``); ``available()`` says whether it is installed,
without importing it (the import takes most of a second).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from accelbuild.errors import StageError

EXTRA = "pip install 'accelbuild[tvm]'"


def available() -> bool:
    return importlib.util.find_spec("tvm") is not None


def version() -> str | None:
    """The installed apache-tvm's version (None without the extra): a stage parameter, so a new TVM rebuilds."""
    try:
        return importlib.metadata.version("apache-tvm")
    except importlib.metadata.PackageNotFoundError:
        return None


def host_target() -> dict[str, Any]:
    """LLVM's target for this machine's CPU, as ``tvm.target.Target`` takes it."""
    import tvm

    return {"kind": "llvm", "mcpu": str(tvm.target.codegen.llvm_get_system_cpu())}


def compile_model(model: onnx.ModelProto, target: dict[str, Any], out: Path) -> None:
    """Import ``model`` with TVM's ONNX frontend, build it for ``target`` and export the shared object to
    ``out``. Raises StageError when TVM cannot import or build it (with TVM's first line)."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    try:
        module = from_onnx(model, keep_params_in_input=False)
    except Exception as exc:  # TVM's own error types
        raise StageError(f"TVM's ONNX frontend cannot import the model ({_first_line(exc)})") from None
    try:
        executable = relax.build(module, target=tvm.target.Target(target))
        executable.export_library(str(out))
    except Exception as exc:
        raise StageError(f"TVM cannot build the model for {target} ({_first_line(exc)})") from None


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
        result = self._main(*(self._tensor(np.ascontiguousarray(feeds[i.name])) for i in self.inputs))
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
