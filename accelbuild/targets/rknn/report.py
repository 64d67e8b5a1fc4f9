"""report.html of family rknn, in the shared shell: the compiler's cycle estimate (labelled with the toolkit's
version and the clock it is converted at), where each layer runs, its cycles, and the simulator's accuracy."""

from __future__ import annotations

from typing import Any

from accelbuild.quantize import frames
from accelbuild.report import html


def render(pipeline: str, bench: dict[str, Any], placements: dict[str, dict[str, Any]]) -> str:
    label = f"estimated by {bench['estimated_by']}"
    facts = [html.esc(bench["platform"]), html.esc(label)]
    tabs = [("summary", "Summary"), ("layers", "Layers")]
    body = (html.section("summary", "Summary", _headline(bench, label) + _summary(bench, label))
            + html.section("layers", "Layers", _layers(placements)))
    return html.page(pipeline, facts, False, tabs, body)


def _headline(bench: dict[str, Any], label: str) -> str:
    tag = html.esc(label)
    worst = min(bench["models"], key=lambda m: m["accuracy"]["cosine"])
    if bench["fps"] is not None:
        speed = [html.figure("Throughput", html.num(bench["fps"]), "FPS", html.esc(bench["fps_is"]), tag),
                 html.figure("Latency", html.num(bench["latency_ms"], 3), "ms",
                             f"at {html.num(bench['clock_mhz'], 0)} MHz ({html.esc(bench['clock_source'])})", tag)]
    else:
        speed = [html.figure("Cycles", f"{sum(m['cycles'] for m in bench['models']):,}", "",
                             html.esc(bench["clock_source"]), tag)]
    offload = bench["offload"]
    cards = [*speed,
             html.figure("Placement", html.esc(offload["host_layers"]), "CPU layers",
                         f"{offload['npu_layers']} on the NPU (input and output operators not counted on the CPU)", ""),
             html.figure("Accuracy", f"{worst['accuracy']['cosine']:.4f}", "cosine",
                         f"{html.esc(worst['name'])}: {html.esc(frames.said(worst['accuracy']))}; "
                         "the toolkit's simulator against float", "")]
    return f'<div class="figures">{"".join(cards)}</div>'


def _summary(bench: dict[str, Any], label: str) -> str:
    rows = []
    for m in bench["models"]:
        acc = m["accuracy"]
        rows.append([html.esc(m["name"]), html.num(m["fps"], 1) if m["fps"] is not None else "—",
                     f"{m['latency_ms']:.3f}" if m["latency_ms"] is not None else "—", f"{m['cycles']:,}",
                     str(m["npu_layers"]), str(m["cpu_model_layers"]), html.si(m["weight_memory_bytes"], "B"),
                     html.si(m["internal_memory_bytes"], "B"), f"{acc['cosine']:.5f}", f"{acc['sqnr_db']:.1f}",
                     html.esc(frames.cell(acc))])
    head = ["model", "FPS", "latency ms", "cycles", "NPU layers", "CPU layers", "weights", "internal memory",
            "cosine vs float", "SQNR dB", "inputs"]
    note = (f"Speed is {html.esc(label)}: the compiler's cycles for the NPU layers, at the NPU clock "
            f"({html.esc(bench['clock_source'])}); CPU layers are not timed. Accuracy compares the toolkit's "
            "simulator with the float model in onnxruntime on the same inputs.")
    return html.card("Models", html.table(head, rows), note)


def _layers(placements: dict[str, dict[str, Any]]) -> str:
    cards = []
    for model, placement in placements.items():
        rows = [[str(layer["id"]), f'<span title="{html.esc(layer["name"])}">{html.esc(layer["name"])}</span>',
                 html.esc(layer["op"]), html.esc(layer["unit"]), f"{layer['cycles']:,}", f"{layer['ddr_cycles']:,}",
                 f"{layer['npu_cycles']:,}", html.num(layer["ddr_kb"], 0)] for layer in placement["layers"]]
        head = ["id", "layer", "operator", "unit", "cycles", "DDR cycles", "NPU cycles", "DDR KB"]
        cards.append(html.card(f"{html.esc(model)}: {placement['npu_layers']} NPU / {placement['cpu_layers']} CPU",
                               html.table(head, rows, "layers"),
                               "From the compiler's layer table (rknn_build.log); a layer's cycles are the larger "
                               "of its DDR and NPU cycles."))
    return "".join(cards)
