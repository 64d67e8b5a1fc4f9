"""Load an npu package's host programs (compiled by TVM, docs/npu_package.md) in TVM's runtime and run them.

On the board (AArch64, with TVM's runtime installed), the package's own ``<model>_<id>.so`` members load:

    python npu_host_program.py yolo.tar.gz

On the build machine, the same modules built for it (``host_build.tar.gz``, beside the package) load instead:

    python examples/npu_host_program.py build/yolo/yolo.tar.gz --programs build/yolo/host_build.tar.gz

Each compiled host subgraph runs on seeded random inputs of the shapes its config gives (an application
feeds it what the NPU subgraph before it produced), and, where onnxruntime is installed, its source
``.onnx`` runs on the same inputs for comparison. Needs numpy and apache-tvm only.
"""

from __future__ import annotations

import argparse
import io
import json
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import tvm
from tvm import relax


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {i.name: tar.extractfile(i).read() for i in tar.getmembers() if i.isfile()}


def run_program(library: Path, config: dict, values: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The ABI: a Relax VM executable, entry ``main``, the config's inputs in order, its outputs in order."""
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(library)), tvm.cpu())
    tensor = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    result = vm["main"](*(tensor(values[name]) for name in config["inputs"]))
    return [o.numpy() for o in ([result] if hasattr(result, "numpy") else list(result))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", type=Path)
    parser.add_argument("--programs", type=Path, help="host_build.tar.gz: the same programs built for this machine")
    args = parser.parse_args()
    package = members(args.package)
    programs = members(args.programs) if args.programs else {}
    configs = [json.loads(data) for name, data in package.items() if name.endswith(".json") and name != "profile.json"]
    compiled = sorted((c for c in configs if "compiler" in c), key=lambda c: c["sequence"])
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for config in compiled:
            data = programs.get(f"{config['name']}.so") if programs else package[config["file"]]
            library = Path(tmp) / f"{config['name']}.so"
            library.write_bytes(data)
            values = {name: rng.standard_normal(config["shapes"][name]).astype(np.float32) for name in config["inputs"]}
            outputs = run_program(library, config, values)
            line = f"{config['name']}: {config['compiler']}, outputs " + ", ".join(
                f"{name} {list(o.shape)}" for name, o in zip(config["outputs"], outputs))
            try:
                import onnxruntime as ort

                session = ort.InferenceSession(io.BytesIO(package[config["source"]]).getvalue(),
                                               providers=["CPUExecutionProvider"])
                want = session.run(config["outputs"], values)
                line += f"; max abs difference from onnxruntime {max(float(np.abs(w - g).max()) for w, g in zip(want, outputs)):.3g}"
            except ImportError:
                pass
            print(line)
    print(f"{len(compiled)} host program(s) ran")
    return 0 if compiled else 1


if __name__ == "__main__":
    raise SystemExit(main())
