"""report.html of family ethos-u, in the shared shell: Vela's estimates (labelled with its version), NPU vs
CPU operators, memory, cycles per layer, and the int8 model's accuracy against float (LiteRT)."""

from __future__ import annotations

from typing import Any

from accelbuild.quantize import frames
from accelbuild.report import html


def render(pipeline: str, bench: dict[str, Any], stats: dict[str, list[dict[str, Any]]]) -> str:
    label = f"estimated by {bench['estimated_by'].replace('vela', 'Vela')}"
    facts = [html.esc(bench["accelerator"]), html.esc(label)]
    tabs = [("summary", "Summary"), ("layers", "Layers"), ("cpu", "CPU operators")]
    body = (html.section("summary", "Summary", _summary(bench, label))
            + html.section("layers", "Layers", _layers(stats, label))
            + html.section("cpu", "CPU operators", _cpu(bench)))
    return html.page(pipeline, facts, False, tabs, body)


def _summary(bench: dict[str, Any], label: str) -> str:
    rows = []
    for m in bench["models"]:
        acc = m["accuracy"]
        rows.append([html.name(m["name"]), html.num(m["fps"], 1), f"{m['latency_ms']:.3f}", f"{m['cycles']:,}",
                     f"{m['npu_ops']}", f"{len(m['cpu_ops'])}", html.si(m["sram_bytes"], "B"),
                     html.si(m["flash_bytes"], "B"), f"{acc['cosine']:.5f}", f"{acc['sqnr_db']:.1f}",
                     html.prose(frames.cell(acc))])
    head = ["model", "FPS", "latency ms", "cycles", "NPU ops", "CPU ops", "SRAM", "flash", "cosine vs float",
            "SQNR dB", "inputs"]
    note = (f"Speed and memory are {label} for {html.esc(bench['accelerator'])} at the system config's clock; "
            "accuracy compares int8.tflite run in LiteRT with the float model on the same inputs.")
    tag = html.kind(label)
    models = bench["models"]
    cards = [*html.speed_figures(models, tag, "at the system config's clock"),
             html.accuracy_figure(models, "int8.tflite in LiteRT")]
    return html.figures(cards) + html.card(f"Models {tag}", html.table(head, rows), note)


def _layers(stats: dict[str, list[dict[str, Any]]], label: str) -> str:
    cards = []
    for model, layers in stats.items():
        top = max((layer["cycles"] or 0 for layer in layers), default=0) or 1
        rows = []
        for layer in layers:
            cycles = layer["cycles"] or 0
            bar = f'<div style="background:#4c78a8;height:10px;width:{100.0 * cycles / top:.1f}%"></div>'
            rows.append([html.name(layer["name"]), html.esc(layer["op"]), html.esc(layer["npu_op"]),
                         html.esc(layer["unit"]), f"{cycles:,}", bar, f"{layer['macs'] or 0:,}"])
        cards.append(html.card(f"{html.esc(model)}: cycles per layer ({html.esc(label)})",
                               html.table(["layer", "TFLite op", "NPU op", "unit", "cycles", "", "MACs"], rows,
                                          "layers")))
    return "".join(cards)


def _cpu(bench: dict[str, Any]) -> str:
    rows = [[html.name(m["name"]), html.esc(op["op"]), html.name(op["name"]), html.prose(op.get("reason", ""))]
            for m in bench["models"] for op in m["cpu_ops"]]
    content = html.table(["model", "operator", "output", "why Vela left it on the CPU"], rows) if rows else \
        "<p>Every operator runs on the NPU.</p>"
    return html.card("Operators left on the CPU", content)
