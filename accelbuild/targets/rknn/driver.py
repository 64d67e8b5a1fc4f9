"""rknn-toolkit2's side of the build: runs in the rknn toolchain's interpreter (accelbuild/toolchains).

Standard library, numpy and rknn-toolkit2 only; accelbuild is not importable here. One action, ``build``:
load the float ONNX model, quantize it on the calibration frames (the toolkit's own PTQ), compile it for the
platform and export the ``.rknn``, then run every accuracy frame through the toolkit's simulator (the
simulator runs only in the session that built the model: a ``.rknn`` loaded from a file needs a board) and
its per-layer accuracy analysis on one frame. Everything the toolkit prints goes to the build log, which
holds its layer table (unit, cycles, memory) for accelbuild to read.
"""

import contextlib
import os
import re
import sys

import numpy as np
from toolchain_runtime import Refusal

ANSI = re.compile(r"\x1b\[[0-9;]*m")
EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): ")
ROW = re.compile(r"^\[(?P<op>[^\]]+)\]\s+(?P<name>\S+)\s+(?P<ecos>[-\d.]+) \|\s*(?P<eeuc>[-\d.e+]+)\s+"
                 r"(?P<scos>[-\d.]+) \|\s*(?P<seuc>[-\d.e+]+)")


@contextlib.contextmanager
def _captured(path):
    """Everything written to file descriptors 1 and 2 (Python and the toolkit's C++ library) goes to ``path``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            _flush_c_streams()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _flush_c_streams():
    """The toolkit's C++ library writes through C's buffered stdio: flush it before the descriptors go back."""
    import ctypes

    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def _errors(path):
    """The toolkit's own words from the log: its error lines (``E <where>: <message>``) and the exceptions it
    raised (``SomeError: message``), without its version banner, traceback frames and source lines."""
    with open(path, errors="replace") as handle:
        lines = [ANSI.sub("", line).rstrip() for line in handle]
    found = []
    for line in lines:
        text = line.strip()
        if "Traceback" in text or "version:" in text:
            continue
        said = line.startswith("E ") or EXCEPTION.match(text) or text.startswith("==> Context")
        if said and not text.startswith("E File ") and text not in found:
            found.append(text)
    return "\n".join(found[-8:]) or "\n".join(lines[-8:])


def _check(ret, what, log_path):
    if ret != 0:
        raise Refusal(f"{what} failed: {_errors(log_path)}")


def build(request):
    from rknn.api import RKNN

    log_path = request["build_log"]
    dataset = os.path.join(request["workdir"], "dataset.txt")
    with open(dataset, "w") as handle:
        handle.writelines(" ".join(frame) + "\n" for frame in request["calibration"])
    quantized = request["precision"] != "float"
    with _captured(log_path):
        rknn = RKNN(verbose=True)
        config = {"target_platform": request["platform"], "optimization_level": 3}
        if quantized:
            config.update(quantized_dtype=request["precision"], quantized_algorithm=request["algorithm"])
        try:
            _check(rknn.config(**config), "config", log_path)
            _check(rknn.load_onnx(model=request["model"]), "load_onnx", log_path)
            _check(rknn.build(do_quantization=quantized, dataset=dataset if quantized else None), "build", log_path)
            _check(rknn.export_rknn(request["rknn"]), "export_rknn", log_path)
            _check(rknn.init_runtime(), "init_runtime (simulator)", log_path)
        except Refusal:
            raise
        except Exception as error:  # the toolkit raises on some models instead of returning -1
            raise Refusal(_errors(log_path) or f"{type(error).__name__}: {error}") from None
        outputs = []
        try:
            for i, frame in enumerate(request["frames"]):
                # arrays in the ONNX model's layout: "nchw" leaves a 4-D input as it is (others are not touched)
                result = rknn.inference(inputs=[np.load(path) for path in frame], data_format="nchw")
                if result is None:
                    raise Refusal(f"inference on frame {i} failed: {_errors(log_path)}")
                path = os.path.join(request["outputs"], f"frame_{i:05d}.npz")
                np.savez(path, *[np.asarray(r, dtype=np.float32) for r in result])
                outputs.append(path)
            analysis_dir = os.path.join(request["workdir"], "analysis")
            ret = rknn.accuracy_analysis(inputs=request["analysis_frame"], output_dir=analysis_dir)
        except Refusal:
            raise
        except Exception as error:  # the simulator raises where the compiled program cannot run
            raise Refusal(f"the simulator failed: {_errors(log_path) or f'{type(error).__name__}: {error}'}") from None
        layers = _analysis(os.path.join(analysis_dir, "error_analysis.txt")) if ret == 0 else []
        rknn.release()
    return {"outputs": outputs, "layers": layers, "analysis_ok": ret == 0}


def _analysis(path):
    """accuracy_analysis's table: per layer its cosine against the float run, accumulated ("entire") and with
    exact inputs ("single")."""
    rows = []
    with open(path, errors="replace") as handle:
        for line in handle:
            match = ROW.match(ANSI.sub("", line).strip())
            if match:
                rows.append({"op": match["op"], "name": match["name"], "entire_cosine": float(match["ecos"]),
                             "entire_euclidean": float(match["eeuc"]), "single_cosine": float(match["scos"]),
                             "single_euclidean": float(match["seuc"])})
    return rows


ACTIONS = {"build": build}
