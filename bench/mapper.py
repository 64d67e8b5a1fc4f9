"""Mapper quality and speed.

1. For real and generated models, the FPS each effort predicts as a fraction of the roofline bound
   (the smaller of the compute bound — every MAC core of every chip busy every cycle — and the host-link
   bound), and the time each effort takes.
2. Mapping time against graph size, on generated chains with residual connections up to 2,000 layers
   (goal: ``normal`` under 10 s and growing about linearly), as a ratio to the 250-layer time.

Models: the YOLOv8n of the `nudenet` wheel when installed, a random-weight ResNet-50 (the calibration
network), the repository's tiny detector, and a TFLite MobileNet-like model converted by accelbuild.

    python bench/mapper.py [--chips N] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import time
from pathlib import Path

import onnx

from accelbuild.frontends.input_shapes import ResolvedInput, apply_input_shapes
from accelbuild.frontends.tflite import load_tflite
from accelbuild.passes import run_passes
from accelbuild.targets.mx3.hardware import load_hardware
from accelbuild.targets.mx3.mapper import cost, search
from accelbuild.targets.mx3.mapper.layers import Layer, extract_layers
from accelbuild.targets.profile_files import builtin_profiles
from accelbuild.testing import models, tflite_models

HW = load_hardware(builtin_profiles()["mx3"])


def real_models() -> dict[str, onnx.ModelProto]:
    found = {"resnet50": models.resnet50()}
    spec = importlib.util.find_spec("nudenet")
    if spec is not None and spec.submodule_search_locations:
        yolo = onnx.load(str(Path(list(spec.submodule_search_locations)[0]) / "320n.onnx"))
        apply_input_shapes(yolo, [ResolvedInput("images", (1, 3, 320, 320), "NCHW")])
        found["yolov8n"] = yolo
    det = models.tiny_detector()
    apply_input_shapes(det, [ResolvedInput("images", (1, 3, 320, 320), "NCHW")])
    found["tinydet"] = det
    found["mobilenet_tflite"] = load_tflite_bytes(tflite_models.mobilenet_like())
    for model in found.values():
        model.CopyFrom(onnx.shape_inference.infer_shapes(model, data_prop=True))
        run_passes(model)
    return found


def load_tflite_bytes(data: bytes) -> onnx.ModelProto:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".tflite") as handle:
        handle.write(data)
        handle.flush()
        return load_tflite(Path(handle.name))


def roofline(layers: list[Layer], traffic: cost.Traffic, chips: int) -> float:
    macs = sum(layer.work for layer in layers if layer.kind == "mac")
    compute = chips * HW.peak_macs_per_cycle * HW.chip.clock_hz / macs if macs else float("inf")
    per_frame = sum(traffic.input_bytes.values()) + sum(traffic.output_bytes.values())
    host = HW.host_link.total_bytes_per_second / per_frame if per_frame else float("inf")
    return min(compute, host)


def traffic_for(name: str, model: onnx.ModelProto) -> cost.Traffic:
    def nbytes(values) -> int:
        total = 0
        for v in values:
            count = 1
            for d in v.type.tensor_type.shape.dim:
                count *= max(1, d.dim_value)
            total += 2 * count
        return total

    inputs = [v for v in model.graph.input if v.name not in {t.name for t in model.graph.initializer}]
    return cost.Traffic({name: nbytes(inputs)}, {name: nbytes(model.graph.output)})


def effort_rows(chips: int) -> list[dict]:
    rows = []
    for name, model in real_models().items():
        layers = extract_layers(name, model, {}, HW)
        traffic = traffic_for(name, model)
        n = max(chips, search.chips_needed(layers, HW))
        bound = roofline(layers, traffic, n)
        for effort in ("lazy", "normal", "hard"):
            started = time.perf_counter()
            best = search.map_layers(layers, HW, search.Request(n, effort, None, traffic))[0]
            rows.append({"model": name, "layers": len(layers), "chips": n, "effort": effort,
                         "fps": round(best.estimate.fps, 1), "roofline_fps": round(bound, 1),
                         "fraction": round(best.estimate.fps / bound, 3),
                         "seconds": round(time.perf_counter() - started, 3)})
    return rows


def chain(count: int, seed: int = 0) -> list[Layer]:
    """A generated network: convs and elementwise layers in a chain, residual adds every few layers."""
    rng = random.Random(seed)
    layers: list[Layer] = []
    for i in range(count):
        inputs = [f"l{i - 1}"] if i else []
        if i % 5 == 4 and i >= 5:
            inputs.append(f"l{i - 4}")
            layer = Layer("g", f"l{i}", "Add", "alu", work=32 * 32 * 64, out_bytes=2 * 32 * 32 * 64)
        else:
            channels = rng.choice((32, 64, 128))
            layer = Layer("g", f"l{i}", "Conv", "mac", work=32 * 32 * channels * 64 * 9,
                          weights=channels * 64 * 9, weight_bytes=channels * 64 * 9, bits=8,
                          out_bytes=2 * 32 * 32 * 64, buffer_bytes=2 * 32 * 64 * 4, rows=32, kernel_rows=3)
        layer.inputs = inputs
        layers.append(layer)
    return layers


def scaling_rows(chips: int) -> list[dict]:
    rows = []
    for count in (250, 500, 1000, 2000):
        layers = chain(count)
        traffic = cost.Traffic({"g": 32 * 32 * 3 * 2}, {"g": 32 * 32 * 64 * 2})
        n = max(chips, search.chips_needed(layers, HW))
        started = time.perf_counter()
        search.map_layers(layers, HW, search.Request(n, "normal", None, traffic))
        rows.append({"layers": count, "chips": n, "seconds": round(time.perf_counter() - started, 3)})
    base = rows[0]["seconds"] or 1e-9
    for row in rows:
        row["time_ratio_to_250"] = round(row["seconds"] / base, 2)
        row["size_ratio_to_250"] = row["layers"] / 250
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chips", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    efforts, scaling = effort_rows(args.chips), scaling_rows(args.chips)
    if args.json:
        print(json.dumps({"efforts": efforts, "scaling": scaling}, indent=2))
        return 0
    print("predicted FPS as a fraction of the roofline bound (min of compute and host link), mx3 at 600 MHz")
    print(f"{'model':<18}{'layers':>7}{'chips':>6}{'effort':>8}{'fps':>10}{'roofline':>10}{'fraction':>9}{'time s':>8}")
    for r in efforts:
        print(f"{r['model']:<18}{r['layers']:>7}{r['chips']:>6}{r['effort']:>8}{r['fps']:>10.1f}"
              f"{r['roofline_fps']:>10.1f}{r['fraction']:>9.3f}{r['seconds']:>8.3f}")
    print("\nnormal effort mapping time against graph size (generated chains with residual adds)")
    for r in scaling:
        print(f"  {r['layers']:>5} layers on {r['chips']:>2} chips: {r['seconds']:.3f} s "
              f"(x{r['time_ratio_to_250']} of 250 layers for x{r['size_ratio_to_250']:.0f} the layers)")
    worst = max(r["seconds"] for r in scaling)
    print(f"goal normal < 10 s at 2,000 layers: {'met' if worst < 10 else 'NOT met'} ({worst:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
