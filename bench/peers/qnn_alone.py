"""onnxruntime-qnn alone on one model and one set of frames, as its documentation drives it: onnxruntime's own
QDQ quantization for QNN (get_qnn_qdq_config), then the HTP context binary, then the HTP emulated on every frame.
The reference bench/qnn.py times accelbuild's qnn build against, the other route to a QDQ model, and the check of
accelbuild's context binary from outside accelbuild.

Run by a Python with onnxruntime-qnn and onnx (never accelbuild):

    python qnn_alone.py MODEL.onnx SOC_MODEL FRAMES_DIR CALIBRATION_COUNT OUT.json [--context accelbuild_ctx.onnx]

FRAMES_DIR holds one NCHW float32 .npy per frame, sorted by name; the first CALIBRATION_COUNT calibrate. It writes
the wall time of the work (quantize, compile, emulate every frame) and the held-out frames' cosines against the
float model, of its own route and, with --context, of accelbuild's context binary.
"""

import json
import os
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
import onnxruntime_qnn
from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize
from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

EP = "QNNExecutionProvider"


class Frames(CalibrationDataReader):
    def __init__(self, name, files):
        self.items = iter([{name: np.load(f)} for f in files])

    def get_next(self):
        return next(self.items, None)


def cosine(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def options(soc, extra=None):
    devices = [d for d in ort.get_ep_devices() if d.ep_name == EP]
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.add_provider_for_devices(devices, {"backend_path": onnxruntime_qnn.get_qnn_htp_path(), "soc_model": soc,
                                            **(extra or {})})
    return opts


def emulated(context, soc, name, files):
    session = ort.InferenceSession(context, options(soc))
    return [session.run(None, {name: np.load(f)}) for f in files]


def main(argv):
    model, soc, frames_dir, calibration, out = argv[1:6]
    theirs = argv[argv.index("--context") + 1] if "--context" in argv else None
    calibration = int(calibration)
    ort.register_execution_provider_library(EP, onnxruntime_qnn.get_library_path())
    files = sorted(os.path.join(frames_dir, f) for f in os.listdir(frames_dir) if f.endswith(".npy"))
    float_session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = float_session.get_inputs()[0].name
    work = tempfile.mkdtemp(prefix="qnn-alone-")
    start = time.perf_counter()
    fixed = os.path.join(work, "fixed.onnx")  # the frames' shape stated, as the QNN docs ask for a static model
    m = onnx.load(model)
    shape = np.load(files[0]).shape
    for dim, size in zip(m.graph.input[0].type.tensor_type.shape.dim, shape):
        dim.ClearField("dim_param")
        dim.dim_value = size
    onnx.save(m, fixed)
    qdq = os.path.join(work, "qdq.onnx")
    config = get_qnn_qdq_config(fixed, Frames(name, files[:calibration]), activation_type=QuantType.QUInt8,
                                weight_type=QuantType.QUInt8)
    quantize(fixed, qdq, config)
    opts = options(soc)
    opts.add_session_config_entry("ep.context_enable", "1")
    opts.add_session_config_entry("ep.context_file_path", os.path.join(work, "alone_ctx.onnx"))
    opts.add_session_config_entry("ep.context_embed_mode", "0")
    ort.InferenceSession(qdq, opts)
    ours = emulated(os.path.join(work, "alone_ctx.onnx"), soc, name, files)
    seconds = time.perf_counter() - start
    held = files[calibration:]
    reference = [float_session.run(None, {name: np.load(f)}) for f in held]
    result = {"seconds": seconds,
              "held_out_cosines": [min(cosine(r, o) for r, o in zip(ref, got))
                                   for ref, got in zip(reference, ours[calibration:])]}
    if theirs:
        got = emulated(theirs, soc, name, held)
        result["accelbuild_context_cosines"] = [min(cosine(r, o) for r, o in zip(ref, g))
                                                for ref, g in zip(reference, got)]
    with open(out, "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main(sys.argv)
