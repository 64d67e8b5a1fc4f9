"""The route Ethos-U users take without accelbuild: onnx2tf, TensorFlow's TFLiteConverter (full integer), Vela.

Runs in a venv of its own, never accelbuild's (these tools are no accelbuild dependency). Python 3.11:

    python3 -m venv /work/venv-onnx2tf
    /work/venv-onnx2tf/bin/pip install onnx2tf==1.29.24 sng4onnx==1.0.5 sne4onnx==1.0.15 ethos-u-vela==5.2.0 Pillow

onnx2tf 1.29.24 pins the rest of its README's list: tensorflow 2.19.0 (CPU only here), tf-keras 2.19.0,
onnx 1.19.1, onnxruntime 1.23.0, onnx-graphsurgeon 0.5.8, onnxsim 0.4.36, ai-edge-litert 2.1.0,
psutil 5.9.5, numpy 1.26.4.

Run it with this venv's python; it puts the venv's bin folder on PATH (onnx2tf runs ``onnxsim`` as a
command, and without it silently skips simplification and ``-ois``). Steps, as the tools document them:

1. ``onnx2tf.convert`` (defaults; dynamic input dimensions set to the frames' shape with batch 1, ``-ois``):
   a TensorFlow SavedModel with channel-last tensors;
2. ``tf.lite.TFLiteConverter.from_saved_model`` with ``optimizations=[tf.lite.Optimize.DEFAULT]``, a
   ``representative_dataset`` of the calibration frames (``--calibration``),
   ``supported_ops=[TFLITE_BUILTINS_INT8]`` and int8 input and output: ``int8.tflite``; the same converter
   without optimizations gives ``float.tflite``, the float graph the int8 model was quantized from;
3. Vela (``--accelerator-config``, default system config, ``--optimise Performance``) on int8.tflite.

Frames come in .npz files (one array ``[frames, ...]`` per ONNX input, in the ONNX model's layout, after
the preprocessing accelbuild applies). Both TFLite models run in LiteRT (builtin kernels, no XNNPACK, as
accelbuild measures its own int8.tflite) on the held-out frames (``--held-out``): inputs quantized with the
int8 input's scale, outputs dequantized, channel-last outputs transposed back to the ONNX layout. Which
signature output is which ONNX output, and its axis order, is chosen on the float model (of the outputs and
axis orders whose shape matches, the one that agrees best with the ONNX model in onnxruntime) and must
reach a cosine above 0.9999 on every frame, else the script stops: a misaligned comparison would blame the
quantizer.

    python bench/peers/tflite_route.py --model M.onnx --calibration calib.npz --held-out held.npz --out DIR
                                       [--accelerator ethos-u55-128]

Writes ``DIR/model.onnx`` (the copy onnx2tf converts), ``DIR/int8.tflite``, ``DIR/float.tflite``, ``DIR/vela/`` (Vela's files and ``vela.log``) and
``DIR/held_out.npz`` (``float/<output>`` and ``int8/<output>``: ``[frames, *ONNX shape]``), and prints a
JSON record on stdout: versions, layouts, the output mapping and its float check, the int8 model's accuracy
per held-out frame against the ONNX model, its operators and Vela's figures.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import itertools
import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

NHWC = (0, 2, 3, 1)
MIN_FLOAT_COSINE = 0.9999


def load_frames(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {k: data[k].astype(np.float32) for k in data.files}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    denominator = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / denominator) if denominator else float(np.array_equal(a, b))


def sqnr(reference: np.ndarray, got: np.ndarray) -> float:
    reference, got = reference.astype(np.float64).ravel(), got.astype(np.float64).ravel()
    noise = float(np.sum((reference - got) ** 2))
    return float("inf") if noise == 0 else 10.0 * np.log10(float(np.sum(reference ** 2)) / noise)


def to_saved_model(model: Path, calibration: dict[str, np.ndarray], out: Path) -> dict[str, Any]:
    """onnx2tf with its defaults and the frames' shape (batch 1) for dynamic input dimensions (``-ois``).
    onnx2tf rewrites the file it is given (onnxsim, op names), so it gets a copy in ``out``'s folder, with
    the repairs its errors ask for: tensor dimensions of -1 (PaddlePaddle's exporter writes them for open
    dimensions) made symbolic, and node names that are no TensorFlow scope name (``Softmax@0``) with the
    offending characters replaced by ``_``. Returns the overwrites and the repairs.

    For a model with a static batch, onnx2tf downloads 20 MS-COCO images from GitHub for a test inference
    that checks its conversion. Offline, the first calibration frames (channel-last) stand in for them: that
    test data steers onnx2tf's checks only, never quantization."""
    import onnx
    import onnx2tf

    proto = onnx.load(str(model))
    repaired = []
    for value in [*proto.graph.input, *proto.graph.output, *proto.graph.value_info]:
        for k, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value < 0:
                dim.dim_param = f"{value.name}_{k}"
                repaired.append(f"{value.name}[{k}]")
    renamed = 0
    for node in proto.graph.node:
        name = re.sub(r"[^A-Za-z0-9_./>-]", "_", node.name)
        renamed, node.name = renamed + (name != node.name), name
    model = out.parent / "model.onnx"
    onnx.save(proto, str(model))
    overwrite = []
    for value in proto.graph.input:
        if value.name not in calibration:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim]
        want = [1, *calibration[value.name].shape[1:]]
        if dims != want:
            overwrite.append(f"{value.name}:{','.join(map(str, want))}")
    first = next(iter(calibration.values()))[:20]
    sample = first.transpose(NHWC) if first.ndim == 4 else first
    sys.modules["onnx2tf.onnx2tf"].download_test_image_data = lambda: sample  # type: ignore[attr-defined]
    with contextlib.redirect_stdout(sys.stderr):  # onnx2tf prints its progress; stdout carries the JSON
        onnx2tf.convert(input_onnx_file_path=str(model), output_folder_path=str(out),
                        overwrite_input_shape=overwrite or None, non_verbose=True)
    return {"overwrite_input_shape": overwrite, "dims_made_symbolic": repaired, "nodes_renamed": renamed}


def input_layouts(signature: Any, onnx_inputs: dict[str, tuple[int, ...]]) -> dict[str, tuple[str, bool]]:
    """ONNX input -> (SavedModel signature input, whether it is channel-last where ONNX is channel-first)."""
    specs = signature.structured_input_signature[1]
    result = {}
    for k, (name, shape) in enumerate(onnx_inputs.items()):
        key = name if name in specs else _sanitized(name, specs) or list(specs)[k]
        got = list(specs[key].shape)[1:]
        nhwc = len(shape) == 4 and got == [shape[2], shape[3], shape[1]] and got != list(shape[1:])
        if not nhwc and got != list(shape[1:]):
            raise SystemExit(f"input {name}: ONNX {list(shape)}, SavedModel {list(specs[key].shape)}")
        result[name] = (key, nhwc)
    return result


def _sanitized(name: str, keys: Any) -> str | None:
    plain = re.sub(r"\W", "_", name)
    return next((k for k in keys if re.sub(r"\W", "_", k) == plain), None)


def convert(saved_model: Path, calibration: dict[str, np.ndarray], layouts: dict[str, tuple[str, bool]],
            quantize: bool) -> tuple[bytes, str]:
    """TFLiteConverter on the SavedModel: float, or full integer with the calibration frames; and how it was
    made. ``from_saved_model`` when the serving signature is static (as ``-ois`` leaves it), else its
    signature traced with batch 1 (``from_concrete_functions``): a dynamic batch would leave SHAPE,
    STRIDED_SLICE and CONCATENATION computing Reshape targets, which Vela runs on the CPU."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(saved_model))
    signature = loaded.signatures["serving_default"]
    specs = signature.structured_input_signature[1]
    keys = [key for key, _ in layouts.values()]
    if all(specs[k].shape.is_fully_defined() for k in keys):
        converter, how = tf.lite.TFLiteConverter.from_saved_model(str(saved_model)), "from_saved_model"
    else:
        @tf.function(input_signature=[tf.TensorSpec([1, *specs[k].shape[1:]], specs[k].dtype, name=k) for k in keys])
        def static(*args: Any) -> Any:
            return signature(**dict(zip(keys, args)))

        converter = tf.lite.TFLiteConverter.from_concrete_functions([static.get_concrete_function()], loaded)
        how = "from_concrete_functions (serving signature at batch 1)"
    if quantize:
        count = len(next(iter(calibration.values())))

        def representative_dataset():
            for i in range(count):
                frame = {key: _layout(calibration[name][i:i + 1], nhwc) for name, (key, nhwc) in layouts.items()}
                yield frame if how == "from_saved_model" else [frame[k] for k in keys]

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative_dataset
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    return converter.convert(), how


def _layout(value: np.ndarray, nhwc: bool) -> np.ndarray:
    return np.ascontiguousarray(value.transpose(NHWC)) if nhwc else value


class Runner:
    """A TFLite model in LiteRT through its signature: float feeds in, float outputs (dequantized) out."""

    def __init__(self, data: bytes) -> None:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        self.interp = Interpreter(model_content=data, num_threads=1,
                                  experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        self.runner = self.interp.get_signature_runner()
        self.inputs = self.runner.get_input_details()
        self.outputs = self.runner.get_output_details()

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        args = {}
        for key, value in feeds.items():
            detail = self.inputs[key]
            if detail["dtype"] == np.float32:
                args[key] = value.astype(np.float32)
                continue
            scale, zero = detail["quantization"]
            info = np.iinfo(detail["dtype"])
            args[key] = np.clip(np.rint(value / np.float32(scale)) + zero, info.min, info.max).astype(detail["dtype"])
        out = self.runner(**args)
        result = {}
        for key, value in out.items():
            scale, zero = self.outputs[key]["quantization"]
            result[key] = ((value.astype(np.int32) - zero) * np.float32(scale)).astype(np.float32) if scale else value
        return result


def align_outputs(onnx_names: list[str], reference: list[dict[str, np.ndarray]], lite: list[dict[str, np.ndarray]]
                  ) -> dict[str, dict[str, Any]]:
    """ONNX output -> {TFLite signature output, axis permutation to the ONNX layout, worst frame cosine in
    float}: for each ONNX output, the TFLite output and axis order (of those whose shape matches) that agree
    best with it; one to one, and above ``MIN_FLOAT_COSINE`` on every frame."""
    keys = list(lite[0])
    if len(keys) != len(onnx_names):
        raise SystemExit(f"{len(onnx_names)} ONNX outputs, {len(keys)} TFLite outputs: {keys}")
    mapping = {}
    for name in onnx_names:
        want = tuple(reference[0][name].shape)
        best: tuple[float, str, tuple[int, ...]] | None = None
        for key in keys:
            got = lite[0][key].shape
            for perm in itertools.permutations(range(len(got))):
                if tuple(got[p] for p in perm) != want:
                    continue
                worst = min(cosine(ref[name], out[key].transpose(perm)) for ref, out in zip(reference, lite))
                if best is None or worst > best[0]:
                    best = (worst, key, perm)
        if best is None or best[0] < MIN_FLOAT_COSINE:
            raise SystemExit(f"output {name} {list(want)}: no TFLite output agrees in float (best: {best}); "
                             f"TFLite outputs {[(k, list(lite[0][k].shape)) for k in keys]}")
        mapping[name] = {"tflite": best[1], "perm": list(best[2]), "float_worst_cosine": round(best[0], 7)}
    if len({m["tflite"] for m in mapping.values()}) != len(mapping):
        raise SystemExit(f"two ONNX outputs matched one TFLite output: {mapping}")
    return mapping


def operators(data: bytes) -> dict[str, int]:
    """Operator counts of a TFLite model."""
    from ai_edge_litert.interpreter import Interpreter

    counts: dict[str, int] = {}
    for op in Interpreter(model_content=data)._get_ops_details():  # noqa: SLF001  (no public listing)
        counts[op["op_name"]] = counts.get(op["op_name"], 0) + 1
    return dict(sorted(counts.items()))


def vela(model: Path, out: Path, accelerator: str) -> dict[str, Any]:
    """Vela on ``model`` (named int8.tflite); its summary row, NPU/CPU operator counts and CPU operators."""
    argv = [sys.executable, "-m", "ethosu.vela", str(model), "--output-dir", str(out), "--accelerator-config",
            accelerator, "--optimise", "Performance", "--verbose-performance", "--show-cpu-operations"]
    done = subprocess.run(argv, cwd=model.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "vela.log").write_text(done.stdout)
    if done.returncode != 0:
        raise SystemExit(f"vela failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
    summary = next(csv.DictReader(io.StringIO(next(out.glob("int8_summary_*.csv")).read_text())))
    npu = re.search(r"NPU operators\s*=\s*(\d+)", done.stdout)
    cpu = re.findall(r"^\s*CPU:\s*(\S+)\s*=\s*(.*?)\s*$", done.stdout, flags=re.MULTILINE)
    return {"argv": ["vela", model.name, *argv[4:]], "fps": round(float(summary["inferences_per_second"]), 2),
            "latency_ms": round(float(summary["inference_time"]) * 1000, 6), "cycles": int(float(summary["cycles_total"])),
            "npu_ops": int(npu.group(1)) if npu else 0, "cpu_ops": [{"op": op, "name": name} for op, name in cpu],
            "sram_bytes": int(round(float(summary["sram_memory_used"]) * 1024))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="float ONNX model")
    parser.add_argument("--calibration", type=Path, required=True, help=".npz of calibration frames")
    parser.add_argument("--held-out", type=Path, required=True, help=".npz of held-out frames")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--accelerator", default="ethos-u55-128")
    args = parser.parse_args()
    args.out = args.out.resolve()
    # onnx2tf runs onnxsim as a command: this venv's, also when the venv is not activated
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    import onnxruntime as ort

    args.out.mkdir(parents=True, exist_ok=True)
    calibration, held_out = load_frames(args.calibration), load_frames(args.held_out)
    session = ort.InferenceSession(str(args.model), providers=["CPUExecutionProvider"])
    onnx_inputs = {i.name: (1, *held_out[i.name].shape[1:]) for i in session.get_inputs()}
    onnx_outputs = [o.name for o in session.get_outputs()]
    saved = args.out / "saved_model"
    onnx2tf_args = to_saved_model(args.model, calibration, saved)
    import tensorflow as tf

    layouts = input_layouts(tf.saved_model.load(str(saved)).signatures["serving_default"], onnx_inputs)
    float_model, _ = convert(saved, calibration, layouts, quantize=False)
    int8_model, converter = convert(saved, calibration, layouts, quantize=True)
    (args.out / "float.tflite").write_bytes(float_model)
    (args.out / "int8.tflite").write_bytes(int8_model)

    frames = len(next(iter(held_out.values())))
    feeds = [{name: held_out[name][i:i + 1] for name in onnx_inputs} for i in range(frames)]
    reference = [dict(zip(onnx_outputs, session.run(onnx_outputs, feed))) for feed in feeds]
    runs = {}
    for label, data in (("float", float_model), ("int8", int8_model)):
        runner = Runner(data)
        runs[label] = [runner({key: _layout(feed[name], nhwc) for name, (key, nhwc) in layouts.items()})
                       for feed in feeds]
    mapping = align_outputs(onnx_outputs, reference, runs["float"])
    dump, accuracy = {}, []
    for label in ("float", "int8"):
        for name, m in mapping.items():
            dump[f"{label}/{name}"] = np.stack([run[m["tflite"]].transpose(m["perm"]) for run in runs[label]])
    for i in range(frames):
        want = np.concatenate([reference[i][name].ravel() for name in onnx_outputs])
        got = np.concatenate([dump[f"int8/{name}"][i].ravel() for name in onnx_outputs])
        accuracy.append({"frame": i, "cosine": round(cosine(want, got), 6), "sqnr_db": round(sqnr(want, got), 3)})
    np.savez(args.out / "held_out.npz", **dump)
    worst = min(accuracy, key=lambda r: r["cosine"])
    record = {
        "versions": {p: version(p) for p in ("onnx2tf", "tensorflow", "ethos-u-vela", "ai-edge-litert", "onnx",
                                              "onnxruntime")},
        **onnx2tf_args,
        "converter": converter,
        "inputs": {name: {"tflite": key, "nhwc": nhwc} for name, (key, nhwc) in layouts.items()},
        "outputs": mapping,
        "calibration_frames": len(next(iter(calibration.values()))),
        "accuracy": {"against": "the ONNX model in onnxruntime", "frames": accuracy, "worst_cosine": worst["cosine"],
                     "worst_sqnr_db": worst["sqnr_db"],
                     "mean_cosine": round(float(np.mean([r["cosine"] for r in accuracy])), 6)},
        "operators": operators(int8_model),
        "vela": vela(args.out / "int8.tflite", args.out / "vela", args.accelerator),
    }
    print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
