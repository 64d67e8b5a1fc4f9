"""report.html of family qnn, in the shared shell: where each layer runs on the SoC and the emulated accuracy;
no speed (it needs a device)."""

from __future__ import annotations

from typing import Any

from accelbuild.quantize import frames
from accelbuild.report import html


def render(pipeline: str, bench: dict[str, Any], placements: dict[str, dict[str, Any]]) -> str:
    facts = [html.esc(f"{bench['soc']} (soc_model {bench['soc_model']})"), html.esc(bench["emulated_by"])]
    tabs = [("summary", "Summary"), ("layers", "Layers")]
    body = (html.section("summary", "Summary", _headline(bench) + _summary(bench))
            + html.section("layers", "Layers", _layers(placements)))
    return html.page(pipeline, facts, False, tabs, body)


def _headline(bench: dict[str, Any]) -> str:
    worst = min(bench["models"], key=lambda m: m["accuracy"]["cosine"])
    offload = bench["offload"]
    cards = [html.figure("Speed", "—", "", html.esc(bench["timing"]), ""),
             html.figure("Placement", html.esc(offload["host_layers"]), "CPU layers",
                         f"{offload['npu_layers']} on the HTP (Quantize/DequantizeLinear not counted)", ""),
             html.figure("Accuracy", f"{worst['accuracy']['cosine']:.4f}", "cosine",
                         f"{html.esc(worst['name'])}: {html.esc(frames.said(worst['accuracy']))}; HTP emulated", "")]
    return f'<div class="figures">{"".join(cards)}</div>'


def _summary(bench: dict[str, Any]) -> str:
    rows = [[html.esc(m["name"]), str(m["htp_layers"]), str(m["cpu_layers"]),
             html.esc(", ".join(f"{op} x{n}" for op, n in m["host_ops"].items()) or "—"),
             f"{m['accuracy']['cosine']:.5f}", f"{m['accuracy']['sqnr_db']:.1f}", html.esc(frames.cell(m["accuracy"]))]
            for m in bench["models"]]
    head = ["model", "HTP layers", "CPU layers", "CPU operators", "cosine vs float", "SQNR dB", "inputs"]
    note = ("Accuracy compares the context binary, run by onnxruntime-qnn with the HTP emulated on x86, with the "
            "float model in onnxruntime on the same inputs. No speed figure: the emulator's cycle counts are not a "
            "device figure.")
    return html.card("Models", html.table(head, rows), note)


def _layers(placements: dict[str, dict[str, Any]]) -> str:
    cards = []
    for model, placement in placements.items():
        rows = [[f'<span title="{html.esc(n["name"])}">{html.esc(n["name"])}</span>', html.esc(n["op"]),
                 html.esc(n["unit"]), html.esc(n.get("reason", ""))] for n in placement["nodes"]]
        cards.append(html.card(f"{html.esc(model)}: {placement['htp_layers']} HTP / {placement['cpu_layers']} CPU",
                               html.table(["node", "operator", "unit", "why not on the HTP"], rows, "layers"),
                               f"From the QNN execution provider's op trace ({html.esc(placement['compiled_by'])}, "
                               f"QAIRT {html.esc(placement['qairt'])})."))
    return "".join(cards)
