"""The assembler: a mapping and the quantized models become one DFP program file.

Sections (docs/dfp.md):

- ``weights``: every quantized weight tensor packed at its precision, each followed by its float32
  per-channel scales.
- ``graphs``: per model, its quantized AI section as ONNX with the integer weights taken out (the
  program says where each one lives in ``weights``), so the simulator can rebuild and run it.
- ``program``: canonical JSON — per model its graph location, weight references and layers with their
  placement (chip, first core, cores, predicted cycles); the chip boundaries; the hardware facts the
  timing simulation needs (clock, core rates, link bandwidths and latencies, the host interface's
  transfers in flight) and the host packets (formats, shared input), so a DFP simulates on its own.
- ``cores``: canonical JSON — per chip, every used core with its kind, layer and predicted utilisation.
- ``simcfg`` (``sim_dfp: true``): the simulator's defaults (frames, seed, host jitter).

Deterministic: sorted keys, no timestamps, fixed packing, models in pipeline order.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from accelbuild import __version__
from accelbuild.errors import StageError
from accelbuild.frontends.onnx_model import serialize
from accelbuild.quantize.precision import bits_of_onnx_type
from accelbuild.targets.mx3.dfp import Dfp, Header, ModelEntry, Port
from accelbuild.targets.mx3.dfp.format import canonical_json
from accelbuild.targets.mx3.dfp.weights import WeightsSection
from accelbuild.targets.mx3.hardware import HardwareProfile
from accelbuild.util import onnx_graph as g

HOST_JITTER = 0.05  # relative spread of host transfer times per frame (simcfg default)


@dataclass(frozen=True)
class ModelSource:
    name: str
    quantized: Path


@dataclass(frozen=True)
class _Packed:
    """The models' weights and graphs sections, and per model its graph's place, weight records and graph."""

    weights: bytes
    graphs: bytes
    models: tuple[tuple[dict[str, int], dict[str, dict[str, Any]], onnx.ModelProto], ...]


@lru_cache(maxsize=4)
def _packed(models: tuple[tuple[str, str, int, int, int], ...],
            planned: tuple[tuple[tuple[str, int | None], ...], ...]) -> _Packed:
    """Pack the models' weights and graphs: the same for every split of a closed loop, so a worker process
    packs them once (keyed by each file's identity and the precision each layer was mapped with)."""
    weights = WeightsSection()
    graphs = bytearray()
    packed = []
    for (name, path, _, _, _), bits in zip(models, planned):
        model = onnx.load(path)
        refs = _take_weights(model, weights, dict(bits), name)
        blob = serialize(model)
        packed.append(({"offset": len(graphs), "length": len(blob)}, refs, model))
        graphs += blob
    return _Packed(weights.to_bytes(), bytes(graphs), tuple(packed))


def _identity(source: ModelSource) -> tuple[str, str, int, int, int]:
    st = Path(source.quantized).stat()
    return (source.name, str(source.quantized), st.st_size, st.st_mtime_ns, st.st_ino)


def build_dfp(models: list[ModelSource], mapping: dict[str, Any], hw: HardwareProfile, input_format: str,
              output_format: str, sim: dict[str, Any] | None, *, share_input: bool) -> Dfp:
    program_models, entries = [], []
    layers_by_model: dict[str, list[dict[str, Any]]] = {}
    for row in mapping["layers"]:
        layers_by_model.setdefault(row["model"], []).append(row)
    planned = tuple(tuple((row["name"], row.get("bits")) for row in layers_by_model.get(s.name, [])) for s in models)
    packed = _packed(tuple(_identity(s) for s in models), planned)
    for source, (graph_ref, refs, model) in zip(models, packed.models):
        program_models.append({"name": source.name, "graph": dict(graph_ref), "weights": refs,
                               "layers": layers_by_model.get(source.name, [])})
        entries.append(_ports(source.name, model, layers_by_model.get(source.name, []), input_format, output_format))
    program = {
        "format": 1,
        "models": program_models,
        "boundaries": mapping["boundaries"],
        "strategy": mapping["strategy"],
        "predicted": {"fps": mapping["fps"], "latency_ms": mapping["latency_ms"], "bottleneck": mapping["bottleneck"],
                      "models": [{key: m[key] for key in ("name", "fps", "latency_ms", "bottleneck")}
                                 for m in mapping["models"]]},
        "hardware": _hardware(hw),
        "packets": {"input_format": input_format, "output_format": output_format, "share_input": share_input},
    }
    sections = {
        "weights": packed.weights,
        "graphs": packed.graphs,
        "program": canonical_json(program),
        "cores": canonical_json(_cores(mapping)),
    }
    if sim is not None:
        sections["simcfg"] = canonical_json(sim)
    header = Header(
        compiler=f"accelbuild {__version__}",
        chip_gen=hw.name,
        num_chips=int(mapping["num_chips"]),
        models=tuple(entries),
        extra={"chips": [_chip_summary(chip) for chip in mapping["chips"] if chip["mac_cores"] or chip["alu_cores"]]},
    )
    return Dfp(header=header, sections=sections)


def simcfg(frames: int, seed: int) -> dict[str, Any]:
    return {"frames_default": frames, "seed": seed, "host_jitter": HOST_JITTER}


def _take_weights(model: onnx.ModelProto, weights: WeightsSection, planned: dict[str, int | None],
                  model_name: str) -> dict[str, dict[str, Any]]:
    """Move each DequantizeLinear's integer weights and scales into the weights section.

    ``planned`` is each layer's precision as quantize.json chose it (through mapping.json); packing
    other bits than the mapping sized the cores for is refused, not silently written.
    """
    inits = {t.name: t for t in model.graph.initializer}
    consumers = {i: n.name for n in model.graph.node for i in n.input}
    refs: dict[str, dict[str, Any]] = {}
    for node in model.graph.node:
        if node.op_type != "DequantizeLinear" or node.input[0] not in inits or node.input[1] not in inits:
            continue
        codes_tensor, scales_tensor = inits[node.input[0]], inits[node.input[1]]
        bits = bits_of_onnx_type(codes_tensor.data_type)
        if bits is None:
            continue
        layer = consumers.get(node.output[0])
        if layer is not None and planned.get(layer, bits) != bits:
            raise StageError(f"{model_name}: layer {layer!r} has {bits}-bit weights in quantized.onnx but "
                             f"{planned[layer]} bits in quantize.json/mapping.json; rebuild with --force")
        codes = numpy_helper.to_array(codes_tensor).astype(np.int16)
        ref = weights.add(codes, bits)
        scales = numpy_helper.to_array(scales_tensor).astype(np.float32)
        ref["scales_offset"] = weights.add_scales(scales.ravel())
        ref["scales"] = int(scales.size)
        ref["axis"] = int(next((a.i for a in node.attribute if a.name == "axis"), 1))
        refs[codes_tensor.name] = ref
    for name in refs:
        model.graph.initializer.remove(inits[name])
        model.graph.input.append(onnx.helper.make_tensor_value_info(name, inits[name].data_type, list(inits[name].dims)))
    return dict(sorted(refs.items()))


def _ports(name: str, model: onnx.ModelProto, layers: list[dict[str, Any]], input_format: str,
           output_format: str) -> ModelEntry:
    weight_inputs = {n.input[0] for n in model.graph.node if n.op_type == "DequantizeLinear"}
    consumers = {i: n.name for n in reversed(model.graph.node) for i in g.node_reads(n)}  # branches read too
    producers = {o: n.name for n in model.graph.node for o in n.output}

    def shape(value: onnx.ValueInfoProto) -> tuple[int, ...]:
        return tuple(d.dim_value for d in value.type.tensor_type.shape.dim)

    inputs = tuple(Port(v.name, shape(v), input_format, consumers.get(v.name, ""))
                   for v in model.graph.input if v.name not in weight_inputs)
    # an output that is also an input (a host post section reads the model's input beside the chip's outputs)
    # passes through: the layer that reads it is where the chip has it
    outputs = tuple(Port(v.name, shape(v), output_format, producers.get(v.name) or consumers.get(v.name, ""))
                    for v in model.graph.output)
    return ModelEntry(name, inputs, outputs)


def _hardware(hw: HardwareProfile) -> dict[str, Any]:
    return {
        "clock_mhz": hw.chip.clock_mhz,
        "mac_cores": hw.chip.mac_cores.count,
        "alu_cores": hw.chip.alu_cores.count,
        "macs_per_cycle": hw.chip.mac_cores.macs_per_cycle,
        "alu_ops_per_cycle": hw.chip.alu_cores.ops_per_cycle,
        "layer_overhead_cycles": hw.chip.layer_overhead_cycles,
        "weight_memory_bytes": hw.weight_memory_bytes,
        "host_link": {"bytes_per_second": hw.host_link.total_bytes_per_second, "latency_us": hw.host_link.latency_us,
                      "frames_in_flight": hw.host_link.frames_in_flight},
        "chip_link": {"bytes_per_second": hw.chip_to_chip_link.total_bytes_per_second,
                      "latency_us": hw.chip_to_chip_link.latency_us},
        "approximations": {a.op: {"method": a.method, "segments": a.segments, "range": list(a.range or ()),
                                  "max_abs_error": a.max_abs_error} for a in hw.ops.approximations},
    }


def _cores(mapping: dict[str, Any]) -> dict[str, Any]:
    chips: dict[int, list[dict[str, Any]]] = {}
    for row in mapping["layers"]:
        for offset in range(row["cores"]):
            chips.setdefault(row["chip"], []).append({
                "id": row["first_core"] + offset, "kind": row["kind"], "model": row["model"],
                "layer": row["name"], "utilization": row["utilization"],
            })
    return {"chips": [{"chip": chip, "cores": sorted(cores, key=lambda c: (c["kind"], c["id"]))}
                      for chip, cores in sorted(chips.items())]}


def _chip_summary(chip: dict[str, Any]) -> dict[str, Any]:
    return {key: chip[key] for key in ("chip", "mac_cores", "alu_cores", "weight_bytes", "feature_bytes",
                                       "mac_utilization", "alu_utilization")}
