"""The fewest chips a pipeline's weights need, known at load time from the model files alone.

The map stage finds a too-small ``num_chips`` only after import and quantize. Weight memory is known
before: each MAC layer's weight tensor (the initializer it reads as input 1, as the mapper counts it) at the
fewest bits the configuration allows, packed into one chip's MAC cores. Every figure here is a lower bound of
what the mapper will need, so a pipeline refused here would fail at map too:

- only ONNX files, only initializers (a weight made by a Constant node or a dequantized one is not counted),
  only nodes that feed a graph output (import drops the rest);
- a model whose crop may cut layers off (``crop.inputs`` / ``outputs`` / ``auto`` / a crop file) counts 0;
- the bits are the smallest of ``weight_bits`` and every ``bits`` entry, or the profile's smallest width when
  ``bits_file`` or ``auto_precision`` may choose others;
- a layer holds its weights in whole MAC cores (``cost.min_cores``), and a chip has so many cores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a model's weights are counted: a pipeline without such a model needs neither
    from accelbuild.config.spec import ModelSpec, PipelineSpec
    from accelbuild.targets.mx3.hardware import HardwareProfile
    from accelbuild.util import onnx_wire


@dataclass(frozen=True)
class ModelWeights:
    name: str
    bits: int
    weight_bytes: int
    mac_cores: int  # the fewest MAC cores that hold them, layer by layer


@dataclass(frozen=True)
class Floor:
    chips: int
    models: tuple[ModelWeights, ...]
    weight_bytes: int
    mac_cores: int


def chips_floor(spec: PipelineSpec, hw: HardwareProfile) -> Floor:
    """The fewest chips the models' weights fit on (1 when nothing is known)."""
    found = tuple(w for m in spec.models if (w := model_weights(m, hw)) is not None)
    total = sum(w.weight_bytes for w in found)
    cores = sum(w.mac_cores for w in found)
    chips = max(1, math.ceil(cores / hw.chip.mac_cores.count))  # what the mapper enforces: whole cores per chip
    return Floor(chips, found, total, cores)


def model_weights(model: ModelSpec, hw: HardwareProfile) -> ModelWeights | None:
    """A model's weight bytes and MAC cores at its fewest bits; None when they are not known cheaply."""
    if not countable(model):
        return None
    sizes = mac_weight_sizes(model.path, hw)
    if not sizes:
        return None
    bits = fewest_bits(model, hw)
    per_layer = [(n * bits + 7) // 8 for n in sizes]
    core = hw.chip.mac_cores.weight_memory_bytes
    return ModelWeights(model.name, bits, sum(per_layer), sum(max(1, math.ceil(b / core)) for b in per_layer))


def countable(model: ModelSpec) -> bool:
    """Whether the model file's weights are counted: an ONNX file that no crop point may cut layers off."""
    crop = model.crop
    return model.format == "onnx" and not (crop.inputs or crop.outputs or crop.auto or crop.in_out_file is not None)


def fewest_bits(model: ModelSpec, hw: HardwareProfile) -> int:
    q = model.quantize
    if q.bits_file is not None or q.auto_precision is not None:
        return min(hw.chip.weight_bits)
    return min([q.weight_bits, *(b for b in q.bits.values() if isinstance(b, int))])


def mac_weight_sizes(path: Path, hw: HardwareProfile) -> list[int]:
    """Element counts of the initializer weights of the model's MAC layers that feed an output; [] for a
    file that does not parse (the import stage reports it)."""
    try:
        stat = Path(path).stat()
    except OSError:
        return []
    return [n for op, n in _weighted_nodes(str(path), stat.st_mtime_ns, stat.st_size) if hw.ops.kind(op) == "mac"]


@lru_cache(maxsize=32)
def _weighted_nodes(path: str, mtime_ns: int, size: int) -> tuple[tuple[str, int], ...]:
    """(op type, elements of its input-1 initializer) of every live node that has one; parsed once per file
    version (the variants of a matrix load one model many times), from the wire format (``onnx_wire``: loading
    a pipeline does not import onnx)."""
    from accelbuild.util import onnx_wire

    try:
        graph = onnx_wire.read_graph(Path(path).read_bytes())
    except (OSError, ValueError):  # the import stage reports an unreadable model
        return ()
    dims = graph.initializer_dims
    return tuple((node.op_type, math.prod(dims[node.input[1]])) for node in _live_nodes(graph)
                 if len(node.input) > 1 and node.input[1] in dims)


def _live_nodes(graph: onnx_wire.Graph) -> list[onnx_wire.Node]:
    """The nodes a graph output depends on."""
    producer = {out: node for node in graph.node for out in node.output if out}
    wanted = list(graph.output)
    seen: set[int] = set()
    live = []
    while wanted:
        node = producer.get(wanted.pop())
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        live.append(node)
        wanted.extend(t for t in node.input if t)
    return live


def problem(floor: Floor, hw: HardwareProfile, num_chips: int | str) -> str | None:
    """What is wrong with ``num_chips`` for these weights, or None."""
    parts = ", ".join(f"{w.name} {w.weight_bytes:,} bytes at {w.bits}-bit" for w in floor.models)
    need = (f"the models' weights need at least {floor.chips} {hw.name} chips: {parts} ({floor.mac_cores:,} MAC "
            f"cores of {hw.chip.mac_cores.weight_memory_bytes:,} bytes; one chip has {hw.chip.mac_cores.count})")
    if num_chips == "min":
        if floor.chips <= hw.system.max_chips:
            return None
        return f"{need}, and at most {hw.system.max_chips} act as one device. Quantize weights to fewer bits"
    if floor.chips <= int(num_chips):
        return None
    return f"num_chips is {num_chips}, but {need}. Raise num_chips (or num_chips: min) or quantize weights to fewer bits"
