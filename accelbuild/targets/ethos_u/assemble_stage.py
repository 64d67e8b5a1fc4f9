"""assemble: Vela compiles ``<model>/int8.tflite``: ``<model>/int8_vela.tflite``, Vela's own files under
``vela/<model>/`` and ``<model>/vela.json`` (its summary, per-layer figures and CPU operators, parsed)."""

from __future__ import annotations

import logging

from accelbuild.errors import StageError
from accelbuild.stages.context import StageContext
from accelbuild.targets.ethos_u import vela
from accelbuild.targets.ethos_u.spec import VelaParams
from accelbuild.util.files import write_bytes_atomic, write_json_atomic

log = logging.getLogger(__name__)


def run(ctx: StageContext) -> None:
    p: VelaParams = ctx.params
    installed = vela.require()
    if installed != p.vela_version:  # the build digested another Vela than the one that would run
        raise StageError(f"Vela {installed} is installed, but the build was planned with Vela {p.vela_version}")
    options = vela.VelaOptions(p.accelerator, p.system_config, p.memory_mode, p.optimise)
    result = vela.compile_tflite(ctx.inputs["int8.tflite"].read_bytes(), options)
    write_bytes_atomic(ctx.outputs["int8_vela.tflite"], result.model)
    write_bytes_atomic(ctx.outputs["vela/summary.csv"], result.summary_csv.encode())
    write_bytes_atomic(ctx.outputs["vela/per-layer.csv"], result.per_layer_csv.encode())
    write_bytes_atomic(ctx.outputs["vela/vela.log"], result.console.encode())
    write_json_atomic(ctx.outputs["vela.json"], {
        "vela_version": p.vela_version, "options": options.argv(), "summary": result.summary,
        "npu_ops": result.npu_ops, "cpu_ops": result.cpu_ops, "layers": result.layers,
    })
    s = result.summary
    log.info("%s: Vela %s for %s: %s NPU / %d CPU operators, %.1f inferences/s (estimated)", p.model,
             p.vela_version, s.get("accelerator_configuration"), result.npu_ops, len(result.cpu_ops),
             float(s.get("inferences_per_second") or 0.0))
