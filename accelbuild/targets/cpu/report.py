"""report.html of family cpu, in the shared shell: measured speed and accuracy per model (labelled with the
machine), the session options of each model, and its operators after onnxruntime's optimizations."""

from __future__ import annotations

from typing import Any

from accelbuild.quantize import frames
from accelbuild.report import html

TABS = (("summary", "Summary"), ("session", "Session"), ("operators", "Operators"))


def render(pipeline: str, bench: dict[str, Any], configs: dict[str, dict[str, Any]],
           ort_records: dict[str, dict[str, Any]]) -> str:
    where = bench["measured_on"]
    label = f"measured on device {where['device']} ({where['machine']})" if isinstance(where, dict) else \
        f"measured on {where}"
    runtime = [f"TVM {html.esc(bench['tvm'])} ({html.esc(bench['tvm_target'].get('mcpu', ''))})"] \
        if bench.get("backend") == "tvm" else [f"onnxruntime {html.esc(bench['onnxruntime'])}",
                                               f"graph optimization {html.esc(bench['graph_optimization'])}"]
    facts = [*runtime, html.esc(bench["precision"]), html.esc(label)]
    body = (html.section("summary", "Summary", _summary(bench, label))
            + html.section("session", "Session", _session(configs))
            + html.section("operators", "Operators", _operators(ort_records)))
    return html.page(pipeline, facts, False, TABS, body)


def _summary(bench: dict[str, Any], label: str) -> str:
    rows = []
    for m in bench["models"]:
        acc, e2e = m["accuracy"], m["end_to_end"]
        rows.append([html.name(m["name"]), html.num(m["fps"], 1), f"{m['latency_ms']:.3f}", f"{m['latency_p90_ms']:.3f}",
                     _ms(m.get("latency_mean_ms")), html.num(e2e["fps"], 1), f"{e2e['latency_ms']:.3f}",
                     html.prose(e2e["sections"]), f"{acc['cosine']:.5f}", f"{acc['sqnr_db']:.1f}",
                     html.prose(frames.cell(acc))])
    head = ["model", "FPS (1000 / median)", "latency ms (median)", "p90 ms", "mean ms", "end-to-end FPS", "end-to-end ms", "sections",
            "cosine vs float", "SQNR dB", "inputs"]
    note = (f"Every figure is {html.esc(label)}: wall-clock time of one frame at a time over "
            f"{bench['models'][0]['frames']} frames after {bench['models'][0]['warmup_frames']} warm-up frames; FPS is "
            "1000 / the median latency of those frames (frames another process delayed move the mean and p90). "
            f"Accuracy compares {'model.so' if bench.get('backend') == 'tvm' else 'model.ort'} with the float "
            "model on the same inputs.")
    machine = bench["machine"]
    facts = [["CPU", html.esc(machine["cpu"])], ["logical cores", str(machine["logical_cores"])],
             ["instruction sets", html.esc(", ".join(machine["isa"]) or "—")],
             ["int8 dot product", html.esc(machine["int8_dot_product"])]]
    models = bench["models"]
    tag = html.kind(label)
    cards = html.speed_figures(models, tag, "median")
    if len(models) == 1:
        e2e = models[0]["end_to_end"]
        cards.append(html.figure("End-to-end", html.num(e2e["fps"], 1), "FPS",
                                 f"{html.num(e2e['latency_ms'], 3)} ms · {html.esc(e2e['sections'])}", tag))
    program = "model.so" if bench.get("backend") == "tvm" else "model.ort"
    cards.append(html.accuracy_figure(models, f"{program} on this machine", tag))
    return (html.figures(cards) + html.card(f"Models {tag}", html.table(head, rows), note)
            + html.card("Machine", html.table(["", ""], facts)))


def _session(configs: dict[str, dict[str, Any]]) -> str:
    keys = ("precision", "graph_optimization_level", "execution_mode", "intra_op_num_threads", "inter_op_num_threads")
    rows = [[html.name(name), *(html.esc(c[k]) for k in keys), html.prose("; ".join(c["notes"]))]
            for name, c in configs.items()]
    return html.card("Session options (session.json)", html.table(["model", *keys, "why"], rows))


def _operators(records: dict[str, dict[str, Any]]) -> str:
    cards = []
    for name, r in records.items():
        rows = [[html.name(op), str(n)] for op, n in r["operators"].items()]
        check = r["check"]
        program = r.get("program", "model.ort")
        note = (f"{program}: {r['bytes']:,} bytes, {r['integer_operators']} integer operators; against "
                f"quantized.onnx: cosine {check['cosine']:.6f}, max abs err {check['max_abs_err']:.3g}.")
        if program == "model.so":
            note += f" Compiled by TVM {html.esc(r['tvm'])} for {html.esc(r['target'])}; ABI: {html.esc(r['abi'])}."
        if r.get("hardware_specific"):
            note += (f" Holds {r['hardware_specific']['nchwc_operators']} NCHWc operators laid out for "
                     f"{html.esc(r['hardware_specific']['vector_isa'])}: it suits CPUs of that vector width.")
        title = "operators compiled by TVM" if r.get("program") == "model.so" else "operators after optimization"
        cards.append(html.card(f"{html.esc(name)}: {title}", html.table(["operator", "count"], rows), note))
    return "".join(cards)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
