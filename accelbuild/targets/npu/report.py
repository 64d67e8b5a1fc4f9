"""report.html of family npu: a static performance report in the shared shell (``accelbuild.report.html``).

Tabs, as Horizon's hb_compile report has them: Summary (throughput, latency, batch, offload; per-model
accuracy), Temporal statistics (DDR bandwidth over one frame), Layer details (per NPU layer: unit,
start/end cycle, compute/load/store cycles, DDR bytes; sortable), Timeline (the profile's units over one
frame, host subgraphs and crossings included). Every accelerator figure is tagged simulated.

The input::

    {"pipeline", "platform", "clock_mhz", "benchmark": benchmark.json,
     "layers": [{"subgraph", "name", "unit", "start_cycle", "end_cycle", "compute_cycles", "load_cycles",
                 "store_cycles", "ddr_bytes"}],
     "timeline": {"units": [names], "frame_us", "intervals": [{"unit", "start_us", "end_us", "label"}]},
     "bandwidth": {"t_us": [...], "bytes_per_second": [...], "peak_bytes_per_second"}}
"""

from __future__ import annotations

from typing import Any

from accelbuild.quantize import frames
from accelbuild.report import html as h

TABS = (("summary", "Summary"), ("temporal", "Temporal statistics"), ("layers", "Layer details"),
        ("timeline", "Timeline"))
PALETTE = ("#4e79a7", "#f28e2b", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#e15759", "#9c755f", "#bab0ac")
MAX_TIMELINE_INTERVALS = 4000


def render_npu_report(data: dict[str, Any]) -> str:
    bench = data["benchmark"]
    facts = [h.esc(data["platform"]), f"{h.num(data['clock_mhz'], 0)} MHz",
             f"batch {h.esc(bench.get('batch_size', '?'))}"]
    tabs = (_summary(data), _temporal(data), _layers(data), _timeline(data))
    body = "".join(h.section(tab_id, title, content) for (tab_id, title), content in zip(TABS, tabs))
    return h.page(data["pipeline"], facts, True, TABS, body)


def _summary(data: dict[str, Any]) -> str:
    bench = data["benchmark"]
    offload = bench.get("offload", {})
    sim = h.tag(True)
    cards = [
        h.figure("Throughput", h.num(bench.get("fps")), "FPS",
                 f"steady state, {h.esc(bench.get('frames_in_flight', '?'))} frames in flight", sim),
        h.figure("Latency", h.num(bench.get("latency_ms"), 3), "ms", "one frame, batch of one", sim),
        h.figure("Batch", h.esc(bench.get("batch_size", "?")), "",
                 f"desired {h.esc(bench.get('desired_batch_size', '?'))}, limited by on-chip memory", ""),
        h.figure("Offload", h.esc(offload.get("host_layers", 0)), "host layers",
                 f"{h.esc(offload.get('npu_layers', 0))} on the NPU, {h.esc(offload.get('subgraphs', 0))} subgraphs",
                 ""),
        h.accuracy_figure(bench.get("models", []), "subgraphs in sequence in onnxruntime"),
    ]
    rows = []
    for m in bench.get("models", []):
        acc = m.get("accuracy", {})
        rows.append([h.name(m.get("name")), h.num(m.get("fps")), h.num(m.get("latency_ms"), 3),
                     h.num(acc.get("cosine"), 5), h.num(acc.get("sqnr_db"), 2), h.prose(frames.cell(acc))])
    models = h.card(f"Models {sim}", h.table(["model", "FPS", "latency ms", "cosine", "SQNR dB", "inputs"], rows),
                    "Accuracy: the package's subgraphs run in sequence (NPU programs as their integer QDQ "
                    "arithmetic in onnxruntime, host subgraphs as compiled, below) against the float model on the "
                    "same inputs.")
    agreement = bench.get("agreement", {})
    note = h.card("Cost model and simulator",
                  h.table(["figure", "cost model", "simulated", "ratio"],
                          [["FPS", h.num(agreement.get("predicted_fps")), h.num(agreement.get("simulated_fps")),
                            h.num(agreement.get("ratio"), 3)]]),
                  h.esc(agreement.get("explanation", "")))
    trust = bench.get("credibility") or {}
    band = h.card("How far to trust these figures", f"<p>{h.esc(trust.get('text', 'not recorded'))}</p>")
    return f'<div class="figures">{"".join(cards)}</div>' + band + models + _host_code(offload) + note


def _host_code(offload: dict[str, Any]) -> str:
    """What compiled the host subgraphs, each one's check against onnxruntime and its time."""
    code = offload.get("host_code") or {}
    if code.get("compiler", "none") == "none":
        return h.card("Host code", f"<p>The host subgraphs ship as float ONNX models, not compiled: "
                                   f"{h.esc(code.get('reason', 'not recorded'))}.</p>")
    rows = []
    for s in code.get("subgraphs", []):
        check = s.get("check", {})
        rows.append([h.esc(s["name"]), h.esc(s["file"]),
                     h.esc("compiled" if s["compiled"] else f"float ONNX: {s.get('reason', '')}"),
                     h.num(check.get("cosine"), 6), h.esc(check.get("max_abs_err", "")),
                     h.num(s.get("measured_ms"), 3), h.num(s.get("modelled_ms"), 3), h.num(s.get("scaled_ms"), 3)])
    head = ["subgraph", "file", "", "cosine vs onnxruntime", "max abs err", "measured here, ms",
            f"modelled, {code.get('board_cpu', 'board')}, ms", f"scaled estimate, {code.get('board_cpu', 'board')}, ms"]
    return h.card(f"Host code: {h.esc(code.get('compiler'))}, {h.esc(code.get('format', ''))}", h.table(head, rows),
                  f"Measured on {h.esc(code.get('measured_on', '?'))} in TVM's VM. The scaled estimate multiplies "
                  "that time by the profile's host model of the board's core over the same model of this core "
                  "(its rates measured here): an estimate, not a measurement on the board.")


def _temporal(data: dict[str, Any]) -> str:
    bw = data.get("bandwidth") or {}
    times, values = bw.get("t_us", []), bw.get("bytes_per_second", [])
    if not times:
        return h.card("DDR bandwidth over one frame", "<p>No NPU subgraph: nothing reads DDR.</p>")
    width, height, left, bottom = 1100.0, 300.0, 70.0, 40.0
    top_value = max(max(values, default=0.0), bw.get("peak_bytes_per_second") or 0.0) / 1e9
    ticks = h.ticks(top_value)
    end = max(times[-1], 1e-9)
    plot_w, plot_h = width - left - 20, height - bottom - 20
    sx = plot_w / end
    sy = plot_h / (ticks[-1] or 1.0)
    body = [h.line(left, 20 + plot_h - t * sy, left + plot_w, 20 + plot_h - t * sy, "grid") for t in ticks]
    body += [h.text(left - 6, 24 + plot_h - t * sy, f"{t:g}", "small", "end") for t in ticks]
    points = " ".join(f"{left + t * sx:.1f},{20 + plot_h - v / 1e9 * sy:.1f}" for t, v in zip(times, values))
    body.append(f'<polyline points="{points}" fill="none" stroke="#4e79a7" stroke-width="1.5"/>')
    peak = bw.get("peak_bytes_per_second")
    if peak:
        y = 20 + plot_h - peak / 1e9 * sy
        body.append(h.line(left, y, left + plot_w, y, "frame"))
        body.append(h.text(left + plot_w, y - 4, "DDR peak x efficiency", "small", "end"))
    body.append(h.text(left + plot_w / 2, height - 6, f"time in one frame, µs (frame {end:,.1f} µs)", "", "middle"))
    body.append(h.text(14, 20 + plot_h / 2, "GB/s", "", "middle"))
    chart = h.svg(width, height, "".join(body), "DDR bandwidth over one frame")
    return h.card(f"DDR bandwidth over one frame {h.tag(True)}", chart,
                  "Bytes the NPU's load and store units move per second while one frame runs (weights, feature "
                  "maps that do not fit SRAM, inputs and outputs), from the unit-timeline simulation.")


def _layers(data: dict[str, Any]) -> str:
    rows = []
    for layer in data.get("layers", []):
        cycles = layer["end_cycle"] - layer["start_cycle"]
        rows.append([h.esc(layer["subgraph"]), h.name(layer["name"]), h.esc(layer["unit"]),
                     f'<span data-v="{layer["start_cycle"]}">{layer["start_cycle"]:,}</span>',
                     f"{cycles:,}", f"{layer.get('compute_cycles', 0):,}", f"{layer.get('load_cycles', 0):,}",
                     f"{layer.get('store_cycles', 0):,}", h.si(layer.get("ddr_bytes"), "B")])
    head = ["subgraph", "layer", "unit", "start cycle", "cycles", "compute", "load", "store", "DDR"]
    table = h.table([f'<span>{x}</span>' for x in head], rows, "layers sortable")
    return h.card(f"Layer details {h.tag(True)}", f'<div class="scroll">{table}</div>',
                  "Static schedule of the cost model (stalls not included); cycles at the NPU clock. A layer "
                  "takes the larger of its compute and its DDR traffic time, plus the per-layer overhead.")


def _timeline(data: dict[str, Any]) -> str:
    tl = data.get("timeline") or {}
    units = tl.get("units", [])
    intervals = tl.get("intervals", [])[:MAX_TIMELINE_INTERVALS]
    frame = max(tl.get("frame_us") or 0.0, max((i["end_us"] for i in intervals), default=0.0), 1e-9)
    width, row, left = 1100.0, 26.0, 110.0
    height = row * len(units) + 40
    sx = (width - left - 20) / frame
    colour = {unit: PALETTE[i % len(PALETTE)] for i, unit in enumerate(units)}
    index = {unit: i for i, unit in enumerate(units)}
    body = [h.text(left - 8, 10 + index[u] * row + row * 0.65, h.esc(u), "group", "end") for u in units]
    for i in intervals:
        if i["unit"] not in index:
            continue
        body.append(h.rect(left + i["start_us"] * sx, 10 + index[i["unit"]] * row + 3,
                           max((i["end_us"] - i["start_us"]) * sx, 0.5), row - 6, colour[i["unit"]],
                           h.esc(f"{i.get('label', '')}: {i['start_us']:.2f}-{i['end_us']:.2f} µs")))
    body.append(h.text(left + (width - left) / 2, height - 6, f"µs, one frame ({frame:,.1f} µs)", "", "middle"))
    chart = h.svg(width, height, "".join(body), "unit timeline")
    return h.card(f"Timeline {h.tag(True)}", chart,
                  "Busy intervals of each unit of the platform's NPU, of the host processor and of the "
                  "NPU/host crossings, over one frame.")
