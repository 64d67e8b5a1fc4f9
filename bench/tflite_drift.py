"""Where does ethos-u's int8.tflite drift from quantized.onnx end to end?

For a model built by family ethos-u (its ``quantized.onnx`` and ``int8.tflite``) and a folder of images,
every quantized tensor is compared two ways, frame by frame:

- **chain**: the whole int8.tflite in LiteRT (builtin kernels, every tensor kept) against the whole
  quantized.onnx in onnxruntime (no graph optimizations), both fed the same input codes. The difference
  compounds from the input to this tensor.
- **local**: the QDQ operator that makes the tensor fed LiteRT's own codes of its inputs (what the build's
  writer check does). The difference is this operator's own rounding only.

Per tensor it prints the share of codes that differ, the mean signed difference (a bias, TFLite minus
ONNX: a systematic rounding difference shows up here; unbiased ties average out) and the largest, then
per TFLite operator type the local figures pooled. The float model's cosine against both integer models
says whether the drift matters to accuracy.

    python bench/tflite_drift.py BUILD/MODEL --images DIR [--mean 127.5 --std 127.5 --color rgb] [--top 15]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from accelbuild.data import DataSpec, input_infos, load_inputs
from accelbuild.quantize.weights import cosine_similarity
from accelbuild.targets.ethos_u.tflite import verify
from accelbuild.targets.ethos_u.tflite.layout import TO_NCHW
from accelbuild.targets.ethos_u.tflite.qgraph import QGraph, read_qdq
from accelbuild.targets.ethos_u.tflite.writer import io_layout, tensor_layouts


class Stats:
    """Code differences of one tensor, pooled over frames."""

    def __init__(self) -> None:
        self.values = self.differ = 0
        self.signed = 0.0
        self.worst = 0

    def add(self, diff: np.ndarray) -> None:
        self.values += diff.size
        self.differ += int(np.count_nonzero(diff))
        self.signed += float(diff.sum())
        self.worst = max(self.worst, int(np.abs(diff).max(initial=0)))

    def row(self) -> str:
        return (f"{100 * self.differ / max(self.values, 1):7.2f} % {self.signed / max(self.values, 1):+8.4f} "
                f"{self.worst:5d}")


def _chain(qdq: onnx.ModelProto, qg: QGraph, in_tflite: set[str]) -> tuple[onnx.ModelProto, dict[str, str]]:
    """A copy of ``qdq`` that also outputs the codes of every quantized tensor the TFLite model has too
    (names in ``in_tflite``; ``output name -> key``)."""
    model = onnx.ModelProto()
    model.CopyFrom(qdq)
    graph = model.graph
    present = {o.name for o in graph.output}
    checked = {}
    for node in graph.node:
        if node.op_type != "QuantizeLinear" or node.output[0] not in qg.alias:
            continue
        key = qg.alias[node.output[0]]
        t = qg.tensors[key]
        if key in qg.inputs or t.name not in in_tflite:
            continue
        if node.output[0] not in present:
            elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype))
            graph.output.append(helper.make_tensor_value_info(node.output[0], elem, list(t.shape)))
        checked[node.output[0]] = key
    return model, checked


def analyse(folder: Path, images: Path, mean: float, std: float, color: str, top: int, kernels: str) -> None:
    qdq = onnx.load(str(folder / "quantized.onnx"))
    ai = onnx.load(str(folder / "ai.onnx"))
    data = (folder / "int8.tflite").read_bytes()
    qg = read_qdq(qdq)
    nhwc = tensor_layouts(qdq)
    spec = DataSpec(images, f"{images}/", color=color, mean=(mean,), std=(std,))
    feeds = load_inputs(spec, input_infos(ai))
    interp = verify._interpreter(data, preserve=True, optimized=kernels == "optimized")
    by_name = {d["name"]: d for d in interp.get_tensor_details()}  # type: ignore[attr-defined]
    op_of = _tflite_op_types(interp)
    layouts = io_layout(qdq)
    inputs = [v.name for v in qdq.graph.input if v.name in qg.alias]
    outputs = [v.name for v in qdq.graph.output]
    chain_model, chain_checked = _chain(qdq, qg, set(by_name))
    local_model, fed_from = verify._fed_from_tflite(qdq, qg, by_name)  # what the build's check runs
    local_checked = {check: qg.alias[fed] for check, (fed, _) in fed_from.items()}
    chain_session, local_session = verify.reference_session(chain_model), verify.reference_session(local_model)
    float_session = verify.reference_session(ai)
    chain: dict[str, Stats] = defaultdict(Stats)
    local: dict[str, Stats] = defaultdict(Stats)
    cosines = []
    for feed in feeds:
        seen, lite_out = verify.run_tflite(interp, feed, layouts, inputs, outputs)
        codes = {}
        for key, t in qg.tensors.items():
            detail = by_name.get(t.name)
            if detail is None or key in qg.inputs:
                continue
            value = interp.get_tensor(detail["index"])  # type: ignore[attr-defined]
            codes[key] = value.transpose(TO_NCHW) if key in nhwc and value.ndim == 4 else value
        names = [o.name for o in chain_session.get_outputs()]  # type: ignore[attr-defined]
        ran = dict(zip(names, chain_session.run(names, seen)))  # type: ignore[attr-defined]
        for check, key in chain_checked.items():
            if key in codes:
                chain[key].add(codes[key].astype(np.int64) - ran[check].astype(np.int64))
        fed = dict(seen)
        fed.update({n: codes[qg.alias[n]] for n in (i.name for i in local_session.get_inputs())  # type: ignore
                    if n not in fed and qg.alias.get(n) in codes})
        names = [o.name for o in local_session.get_outputs()]  # type: ignore[attr-defined]
        ran_local = dict(zip(names, local_session.run(names, fed)))  # type: ignore[attr-defined]
        for check, key in local_checked.items():
            if key in codes:
                local[key].add(codes[key].astype(np.int64) - ran_local[check].astype(np.int64))
        reference = float_session.run(outputs, {k: feed[k] for k in (i.name for i in ai.graph.input) if k in feed})
        flat = np.concatenate([r.reshape(-1) for r in reference])
        lite_flat = np.concatenate([lite_out[o].reshape(-1) for o in outputs])
        qdq_flat = np.concatenate([ran[o].reshape(-1) for o in outputs])  # the chain model keeps the outputs
        cosines.append((cosine_similarity(flat, lite_flat), cosine_similarity(flat, qdq_flat)))
    order = [k for k in (qg.alias[n.output[0]] for n in qg.nodes if n.output and n.output[0] in qg.alias)
             if k in chain]
    order += [k for k in chain if k not in order]
    print(f"{len(feeds)} frames; float vs int8.tflite cosine per frame: "
          + ", ".join(f"{c[0]:.4f}" for c in cosines))
    if cosines:
        print("float vs quantized.onnx cosine per frame:   " + ", ".join(f"{c[1]:.4f}" for c in cosines))
    print(f"\n{'tensor':48} {'op':18} {'chain: differ':>14} {'bias':>8} {'max':>5}   {'local: differ':>14} "
          f"{'bias':>8} {'max':>5}")
    for key in order:
        name = qg.tensors[key].name
        print(f"{name[-48:]:48} {op_of.get(name, '?'):18} {chain[key].row()}   {local[key].row()}")
    print("\nlocal, pooled by TFLite operator:")
    pooled: dict[str, Stats] = defaultdict(Stats)
    for key, stats in local.items():
        op = op_of.get(qg.tensors[key].name, "?")
        p = pooled[op]
        p.values += stats.values
        p.differ += stats.differ
        p.signed += stats.signed
        p.worst = max(p.worst, stats.worst)
    for op, stats in sorted(pooled.items(), key=lambda kv: -kv[1].differ / max(kv[1].values, 1))[:top]:
        print(f"  {op:24} {stats.row()}")


def _tflite_op_types(interp: object) -> dict[str, str]:
    """Output tensor name -> the builtin operator that writes it."""
    result = {}
    details = {d["index"]: d["name"] for d in interp.get_tensor_details()}  # type: ignore[attr-defined]
    for op in interp._get_ops_details():  # type: ignore[attr-defined]
        for index in op["outputs"]:
            if index in details:
                result[details[index]] = op["op_name"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="a model's build folder (quantized.onnx, int8.tflite, ai.onnx)")
    parser.add_argument("--images", type=Path, required=True)
    parser.add_argument("--mean", type=float, default=127.5)
    parser.add_argument("--std", type=float, default=127.5)
    parser.add_argument("--color", default="rgb")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--kernels", choices=("reference", "optimized"), default="reference",
                        help="LiteRT's reference kernels (what TFLite Micro ports) or its optimized builtin ones")
    args = parser.parse_args()
    analyse(args.folder, args.images, args.mean, args.std, args.color, args.top, args.kernels)


if __name__ == "__main__":
    main()
