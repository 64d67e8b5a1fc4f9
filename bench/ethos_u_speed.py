"""How fast LiteRT runs a large int8 network, per kernel set, and how far each is from the reference kernels.

A generated U-Net (an encoder of 3x3 convolutions and max pooling, a decoder of 2x2 transposed convolutions,
skip concatenations; ``--width`` sets its channels, ``--size`` its input) is quantized by accelbuild's QDQ
quantizer (TFLite conventions, 4 calibration frames) and written by the ethos-u int8 TFLite writer. Then, in
one run, each of LiteRT's kernel sets runs ``--frames`` frames single-threaded:

- reference (``BUILTIN_REF``): the integer arithmetic TFLite Micro ports, what the device computes;
- optimised (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``): the builtin optimised kernels, what family ethos-u runs
  above ``kernels.REFERENCE_MACS`` (``accelbuild/targets/ethos_u/tflite/kernels.py``);
- XNNPACK (``BUILTIN``, its default delegate): printed for comparison, not used.

It prints seconds per frame, the ratio to the reference kernels, and each set's output codes against the
reference's (largest difference in steps, share of codes that differ). ``--build`` also builds the network
through the CLI (family ethos-u, ``benchmark.accuracy: {samples: --samples}``) and prints the map and benchmark
stages' times.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from accelbuild.quantize.qdq import QdqConfig, quantize_qdq  # noqa: E402
from accelbuild.targets.ethos_u.tflite import kernels  # noqa: E402
from accelbuild.targets.ethos_u.tflite.writer import write_int8_tflite  # noqa: E402


class _Net:
    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def weight(self, name: str, shape: tuple[int, ...], fan_in: int) -> str:
        self.inits.append(numpy_helper.from_array(self.rng.normal(0, (2 / fan_in) ** 0.5, shape).astype(np.float32),
                                                  name))
        return name

    def conv(self, x: str, cin: int, cout: int, name: str) -> str:
        w = self.weight(f"{name}.w", (cout, cin, 3, 3), 9 * cin)
        b = self.weight(f"{name}.b", (cout,), 100)
        self.nodes.append(helper.make_node("Conv", [x, w, b], [f"{name}.c"], name=name, kernel_shape=[3, 3],
                                           pads=[1, 1, 1, 1]))
        self.nodes.append(helper.make_node("Relu", [f"{name}.c"], [name + ".r"], name=name + ".relu"))
        return name + ".r"

    def op(self, op: str, inputs: list[str], name: str, **attrs: object) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name


def unet(width: int, size: int, depth: int = 4) -> onnx.ModelProto:
    n = _Net()
    x, cin, skips = "x", 3, []
    for level in range(depth):
        cout = width << level
        x = n.conv(n.conv(x, cin, cout, f"enc{level}a"), cout, cout, f"enc{level}b")
        skips.append((x, cout))
        x, cin = n.op("MaxPool", [x], f"pool{level}", kernel_shape=[2, 2], strides=[2, 2]), cout
    cout = width << depth
    x = n.conv(n.conv(x, cin, cout, "mid_a"), cout, cout, "mid_b")
    cin = cout
    for level in reversed(range(depth)):
        skip, channels = skips[level]
        w = n.weight(f"up{level}.w", (cin, channels, 2, 2), 4 * cin)
        x = n.op("ConvTranspose", [x, w], f"up{level}", kernel_shape=[2, 2], strides=[2, 2])
        x = n.op("Concat", [x, skip], f"cat{level}", axis=1)
        x = n.conv(n.conv(x, 2 * channels, channels, f"dec{level}a"), channels, channels, f"dec{level}b")
        cin = channels
    head = n.weight("head.w", (2, cin, 1, 1), cin)
    y = n.op("Conv", [x, head], "head", kernel_shape=[1, 1])
    graph = helper.make_graph(n.nodes, "unet", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             [1, 3, size, size])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 2, size, size])], n.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _time(data: bytes, resolver: str, frames: list[np.ndarray]) -> tuple[float, np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interp = Interpreter(model_content=data, num_threads=1,
                         experimental_op_resolver_type=getattr(OpResolverType, resolver))
    interp.allocate_tensors()
    detail, out = interp.get_input_details()[0], interp.get_output_details()[0]
    scale, zero = detail["quantization"]
    codes = [np.clip(np.rint(f.transpose(0, 2, 3, 1) / scale) + zero, -128, 127).astype(np.int8) for f in frames]
    results, start = [], time.perf_counter()
    for c in codes:
        interp.set_tensor(detail["index"], c)
        interp.invoke()
        results.append(interp.get_tensor(out["index"]).copy())
    return (time.perf_counter() - start) / len(codes), np.stack(results).astype(np.int64)


def _build(model: onnx.ModelProto, samples: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        onnx.save(model, work / "unet.onnx")
        (work / "unet.yaml").write_text(
            "accelbuild: 2\nname: unet\ntarget: {family: ethos-u, accelerator: ethos-u55-256}\nmodels:\n"
            "  - name: unet\n    path: unet.onnx\n    quantize: {calibration_frames: 4}\n"
            f"benchmark:\n  accuracy: {{samples: {samples}, seed: 0}}\n")
        (work / ".git").mkdir()
        env = {"PYTHONPATH": str(REPO), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", "unet.yaml", "--json"], cwd=work,
                              env=env, capture_output=True, text=True, check=False)
        total = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"build failed:\n{done.stderr[-3000:]}")
        stages = _stage_times(done.stdout)
        record = json.loads((work / "build/unet/unet/int8.json").read_text())
        print("int8.json check:", json.dumps(record["check"].get("kernels", record["check"]["runtime"])))
        return {"total": total, **stages}


def _stage_times(stdout: str) -> dict[str, float]:
    """Per stage, the seconds the build reports (the task records of ``--json``'s document)."""
    document, _ = json.JSONDecoder().raw_decode(stdout)
    times: dict[str, float] = {}
    for task in document.get("tasks", []):
        times[task["stage"]] = times.get(task["stage"], 0.0) + float(task.get("seconds") or 0.0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--frames", type=int, default=2)
    parser.add_argument("--build", action="store_true")
    parser.add_argument("--samples", type=int, default=8)
    args = parser.parse_args()
    model = unet(args.width, args.size)
    rng = np.random.default_rng(1)
    frames = [rng.normal(0, 1, (1, 3, args.size, args.size)).astype(np.float32) for _ in range(max(args.frames, 4))]
    quantized = quantize_qdq(model, [{"x": f} for f in frames[:4]], QdqConfig(conventions="tflite", share_concat_scales=True)).model
    data = write_int8_tflite(quantized)
    macs = kernels.model_macs(quantized)
    print(f"U-Net width {args.width}, input {args.size}x{args.size}: {macs / 1e9:.2f} GMAC, int8.tflite "
          f"{len(data) / 1e6:.1f} MB; {args.frames} frame(s), one thread")
    timed = {name: _time(data, resolver, frames[:args.frames]) for name, resolver in
             (("reference", "BUILTIN_REF"), ("optimised", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"), ("XNNPACK", "BUILTIN"))}
    base_time, base = timed["reference"]
    print(f"{'kernels':10} {'s/frame':>8} {'GMAC/s':>7} {'vs ref':>7} {'max steps':>9} {'differing':>9}")
    for name, (seconds, out) in timed.items():
        diff = np.abs(out - base)
        print(f"{name:10} {seconds:8.3f} {macs / 1e9 / seconds:7.1f} {base_time / seconds:6.1f}x "
              f"{int(diff.max()):9d} {100 * np.count_nonzero(diff) / diff.size:8.2f}%")
    if args.build:
        print("build:", json.dumps({k: round(v, 1) for k, v in _build(model, args.samples).items()}))


if __name__ == "__main__":
    main()
