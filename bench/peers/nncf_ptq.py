"""NNCF's post-training quantization of an ONNX model, run by ``bench/ptq.py`` in NNCF's own venv.

NNCF is never a dependency of accelbuild: this script runs in a separate interpreter and imports neither
accelbuild nor anything of the bench. It reads the float model and the calibration frames (an ``.npz``
keyed by input name, frames stacked on a new first axis), calls ``nncf.quantize`` (ONNX backend, no torch)
with 8-bit per-channel weights, 8-bit per-tensor activations, ``subset_size`` = number of frames and the
given preset, writes the QDQ model and prints one JSON line: the seconds of ``nncf.quantize`` and of
writing the model, NNCF's version and the QuantizeLinear/DequantizeLinear counts of the written model.

    /work/venv-nncf/bin/python bench/peers/nncf_ptq.py MODEL.onnx FRAMES.npz OUT.onnx [--preset mixed]

Telemetry is switched off (``NNCF_CI=1`` before nncf is imported; NNCF sends usage events otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("NNCF_CI", "1")

import nncf  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, QuantizationParameters  # noqa: E402


def load_frames(path: Path) -> list[dict[str, np.ndarray]]:
    """One feed dict per frame from an .npz of arrays stacked on axis 0."""
    with np.load(path) as data:
        stacked = {name: data[name] for name in data.files}
    count = {len(v) for v in stacked.values()}
    if len(count) != 1:
        raise SystemExit(f"{path}: inputs hold different numbers of frames {sorted(count)}")
    return [{name: v[i] for name, v in stacked.items()} for i in range(count.pop())]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("frames", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--preset", choices=["performance", "mixed"], default="performance",
                        help="performance (NNCF's default for CNNs): symmetric activations; mixed: asymmetric")
    args = parser.parse_args()
    model = onnx.load(str(args.model))
    frames = load_frames(args.frames)
    preset = {"performance": nncf.QuantizationPreset.PERFORMANCE, "mixed": nncf.QuantizationPreset.MIXED}
    advanced = AdvancedQuantizationParameters(
        weights_quantization_params=QuantizationParameters(num_bits=8, per_channel=True),
        activations_quantization_params=QuantizationParameters(num_bits=8, per_channel=False))
    started = time.perf_counter()
    quantized = nncf.quantize(model, nncf.Dataset(frames), preset=preset[args.preset], subset_size=len(frames),
                              advanced_parameters=advanced)
    quantize_s = time.perf_counter() - started
    started = time.perf_counter()
    onnx.save(quantized, str(args.output))
    save_s = time.perf_counter() - started
    ops = Counter(n.op_type for n in quantized.graph.node)
    print(json.dumps({"nncf": nncf.__version__, "preset": args.preset, "frames": len(frames),
                      "quantize_s": quantize_s, "save_s": save_s, "opset": quantized.opset_import[0].version,
                      "QuantizeLinear": ops["QuantizeLinear"], "DequantizeLinear": ops["DequantizeLinear"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
