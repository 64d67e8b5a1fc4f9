"""rknn-toolkit2 alone on one model and one set of frames, as a user would drive it: the reference bench/rknn.py
times accelbuild's rknn build against, and the check of accelbuild's figures from outside accelbuild.

Run by the rknn toolchain's interpreter (it imports rknn-toolkit2, numpy and onnxruntime, never accelbuild):

    python rknn_alone.py MODEL.onnx PLATFORM FRAMES_DIR CALIBRATION_COUNT OUT.json [--program accelbuild.rknn]

FRAMES_DIR holds one NCHW float32 .npy per frame, sorted by name; the first CALIBRATION_COUNT calibrate. It
writes the wall time of the toolkit's work (load, quantize and build, export, simulate every frame, accuracy
analysis), each held-out frame's cosine of the simulator against the float model in onnxruntime, and what
load_rknn / init_runtime say of accelbuild's program file.
"""

import json
import os
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
from rknn.api import RKNN


def cosine(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def main(argv):
    model, platform, frames_dir, calibration, out = argv[1:6]
    program = argv[argv.index("--program") + 1] if "--program" in argv else None
    calibration = int(calibration)
    files = sorted(os.path.join(frames_dir, f) for f in os.listdir(frames_dir) if f.endswith(".npy"))
    work = tempfile.mkdtemp(prefix="rknn-alone-")
    dataset = os.path.join(work, "dataset.txt")
    with open(dataset, "w") as handle:
        handle.writelines(f + "\n" for f in files[:calibration])
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    shape = list(np.load(files[0]).shape)  # the input size a user states for a model with a dynamic dimension
    start = time.perf_counter()
    rknn = RKNN(verbose=False)
    rknn.config(target_platform=platform, quantized_dtype="w8a8", quantized_algorithm="normal")
    assert rknn.load_onnx(model=model, inputs=[name], input_size_list=[shape]) == 0
    assert rknn.build(do_quantization=True, dataset=dataset) == 0
    assert rknn.export_rknn(os.path.join(work, "alone.rknn")) == 0
    assert rknn.init_runtime() == 0
    simulated = [rknn.inference(inputs=[np.load(f)], data_format="nchw") for f in files]
    rknn.accuracy_analysis(inputs=[files[calibration]], output_dir=os.path.join(work, "analysis"))
    seconds = time.perf_counter() - start
    rknn.release()
    held_out = []
    for f, sim in zip(files[calibration:], simulated[calibration:]):
        ref = session.run(None, {name: np.load(f)})
        held_out.append(min(cosine(r, s) for r, s in zip(ref, sim)))
    loads = None
    if program:
        other = RKNN(verbose=False)
        loads = {"load_rknn": other.load_rknn(program), "init_runtime (simulator)": other.init_runtime()}
        other.release()
    with open(out, "w") as handle:
        json.dump({"seconds": seconds, "held_out_cosines": held_out, "accelbuild_program": loads}, handle)


if __name__ == "__main__":
    main(sys.argv)
