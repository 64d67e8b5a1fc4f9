"""report.html of family mx3: its tabs, drawn with the report shell (``accelbuild.report.html``).

``render_report(data)`` returns the whole document as a string. Everything is inline: CSS, a few lines
of JavaScript (tab switching, opening the tab named in the URL fragment such as ``#timeline``, sorting
the layer table), and every chart as SVG drawn here in Python. Nothing is fetched, so the page works
offline and from a CI artifact. The same data gives the same bytes (no timestamps, fixed number formats,
data order kept), and every string from the data is HTML-escaped.

Tabs: Summary, Temporal statistics (bandwidth over one frame period), Layer details, Timeline (a Gantt
chart of the first frames) and Utilisation (the per-chip core grid of ``accelbuild.targets.mx3.mapper.view``, in
colour: the same ten levels, rows of the same width). Figures from the modelled accelerator carry a
"simulated" tag, host figures a "measured on host" tag.

The input is the report data the benchmark stage assembles::

    {"pipeline", "chip_gen", "num_chips", "clock_mhz", "simulated",
     "benchmark": benchmark.json, "mapping": mapping.json,
     "timing": {"frame_period_us", "layers": [...], "timeline": [...], "bandwidth": {"t_us", "series"}}}

(``accelbuild.targets.mx3.report_sample.sample_data`` builds an example.)
"""

from __future__ import annotations

import re
from typing import Any

from accelbuild.quantize import frames
from accelbuild.report.html import (
    ALU,
    DASHES,
    DATA,
    HOST_IN,
    HOST_OUT,
    LINK,
    LINK_COLOURS,
    MAC,
    NEUTRAL,
    _accuracy_figure,
    _card,
    _figure,
    _legend,
    _line,
    _name,
    _num,
    _pct,
    _prose,
    _rect,
    _section,
    _si,
    _step,
    _svg,
    _table,
    _tag,
    _text,
    _tick_label,
    _ticks,
    esc,
    page,
)
from accelbuild.targets.mx3.mapper.view import ROW, SHADES, shade

TABS = (("summary", "Summary"), ("temporal", "Temporal statistics"), ("layers", "Layer details"),
        ("timeline", "Timeline"), ("utilisation", "Utilisation"))
MAX_TIMELINE_LAYER_TRACKS = 60
MAX_CHART_POINTS = 600
MAX_FRAME_LINES = 24
# Utilisation levels, index = position of mapper.view.shade(u) in SHADES: idle, then light to dark.
LEVELS = ("#eef0f3", "#f7fbcf", "#d9f0b3", "#addd8e", "#78c679", "#41b6a4", "#2c93b8", "#2166ac",
          "#253494", "#0b1d51")
STAGE_NAMES = {"host_pre": "host pre-processing", "accelerator": "accelerator",
               "host_post": "host post-processing"}


def render_report(data: dict[str, Any]) -> str:
    """The whole report.html for ``data`` (see the module docstring)."""
    sections = (_summary_tab(data), _temporal_tab(data), _layers_tab(data), _timeline_tab(data),
                _utilisation_tab(data))
    body = "".join(_section(tab_id, title, content) for (tab_id, title), content in zip(TABS, sections))
    return _document(data, body)


def _document(data: dict[str, Any], body: str) -> str:
    facts = [f"{esc(data.get('chip_gen', '?'))}", f"{esc(data.get('num_chips', '?'))} chip(s)",
             f"{_num(data.get('clock_mhz'), 0)} MHz"]
    if data.get("mapping", {}).get("effort"):
        facts.append(f"effort {esc(data['mapping']['effort'])}")
    return page(data.get("pipeline", ""), facts, bool(data.get("simulated")), TABS, body)


# ----------------------------------------------------------------------------------------- summary

def _summary_tab(data: dict[str, Any]) -> str:
    bench = data.get("benchmark", {})
    simulated = bool(data.get("simulated", bench.get("simulated")))
    trust = bench.get("credibility") or {}
    parts = [_figures(data, bench, simulated),
             _card("How far to trust these figures", f"<p>{esc(trust.get('text', 'not recorded'))}</p>"),
             _stages_card(bench, simulated), _cost_card(data, bench, simulated),
             _card(f"Models {_tag(simulated)}", _models_table(bench),
                   "Accuracy compares the accelerator's output with the float model on the same inputs."),
             _unsupported_card(bench)]
    return "".join(parts)


def _unsupported_card(bench: dict[str, Any]) -> str:
    """Operators the chip does not run (crop.json's record): where each went, or that it stayed."""
    rows = []
    for model in bench.get("models", []):
        record = model.get("unsupported") or {}
        for node in record.get("moved", []):
            rows.append([esc(model.get("name", "?")), esc(node["node"]), esc(node["op"]),
                         f"host {esc(node['to'])} section"])
        for node in record.get("kept", []):
            rows.append([esc(model.get("name", "?")), esc(node["node"]), esc(node["op"]),
                         "kept on the chip, modelled as ALU work"])
    if not rows:
        return ""
    note = ("Operators not in the profile's lists. Those at the start or end of the accelerated section run on "
            "the host (its pre and post sections, timed in end-to-end); one with chip work before and after it "
            "cannot move and is modelled as ALU work: crop the model around it to run it on the host.")
    return _card("Operators the chip does not run", _table(["model", "node", "operator", "runs on"], rows), note)


def _figures(data: dict[str, Any], bench: dict[str, Any], simulated: bool) -> str:
    """One model: its throughput, latency and end-to-end rate. Several: a card per model, then the one
    combined figure that means something (named by ``fps_is``), never a sum of different models' frames."""
    models = bench.get("models", [])
    reason = (data.get("mapping") or {}).get("num_chips_reason")  # fewer chips than num_chips asked for
    chips = _figure("Chips", esc(bench.get("num_chips", data.get("num_chips", "?"))), "",
                    f"{esc(data.get('chip_gen', '?'))} at {_num(data.get('clock_mhz'), 0)} MHz"
                    + (f" · {esc(reason)}" if reason else ""), "")
    accuracy = _accuracy_figure(models, "the accelerator's simulated output", _tag(simulated))
    if len(models) > 1:
        cards = [_model_figure(m, simulated) for m in models]
        cards.append(_figure(f"Together · {len(models)} models", _num(bench.get("fps")), "/s",
                             esc(bench.get("fps_is", "")), _tag(simulated)))
        return f'<div class="figures">{"".join(cards + [chips, accuracy])}</div>'
    e2e = bench.get("end_to_end_fps")
    cards = [_throughput_figure(bench, models, simulated), _latency_figure(bench, models, simulated), chips]
    if e2e is not None:
        bound = _bound_text(bench)
        tag = _tag(simulated) + (_tag(simulated, host=True) if bench.get("host") else "")
        cards.append(_figure("End-to-end", _num(e2e), "FPS", f"bounded by {bound}", tag))
    return f'<div class="figures">{"".join(cards + [accuracy])}</div>'


def _model_figure(model: dict[str, Any], simulated: bool) -> str:
    """One model of several: its own rate, latency and end-to-end figures."""
    whole = model.get("end_to_end") or {}
    detail = f"latency {_num(model.get('latency_ms'), 3)} ms"
    tag = _tag(simulated)
    if whole.get("host_measured_on"):
        detail += (f" · end to end {_num(whole.get('fps'))} FPS, {_num(whole.get('latency_ms'), 3)} ms "
                   f"({esc(whole.get('bound', ''))}-bound)")
        tag += _tag(simulated, host=True)
    return _figure(f"Throughput · {esc(model.get('name', '?'))}", _num(model.get("fps")), "FPS", detail, tag)


def _throughput_figure(bench: dict[str, Any], models: list[dict[str, Any]], simulated: bool) -> str:
    """The one model's frame rate."""
    name = esc(models[0].get("name", "?")) if models else "?"
    return _figure("Throughput", _num(bench.get("fps")), "FPS",
                   f"model {name}, {esc(bench.get('frames', '?'))} frames", _tag(simulated))


def _latency_figure(bench: dict[str, Any], models: list[dict[str, Any]], simulated: bool) -> str:
    """The longest steady-state latency, and whose it is."""
    named = bench.get("latency_model")
    model = next((m for m in models if m.get("name") == named), None) or \
        max(models, key=lambda m: m.get("latency_ms") or 0, default={})
    first = model.get("first_frame_latency_ms") or bench.get("first_frame_latency_ms") or 0
    whose = f"model {esc(model.get('name', '?'))}" if model else "steady state"
    if len(models) > 1:
        whose += f", the longest of {len(models)} models"
    detail = whose + (f" · first frame {_num(first, 2)} ms" if first else "")
    return _figure("Latency", _num(bench.get("latency_ms"), 2), "ms", detail, _tag(simulated))


def _bound_text(bench: dict[str, Any]) -> str:
    """What bounds the end-to-end rate: ``end_to_end_bound`` ("accelerator", "host pre", "host post") or a
    ``stage`` in the bottleneck record; when it is the accelerator, what binds it too: the simulator's
    binding resource, or the cost model's bottleneck where the data has no simulator figure."""
    bottleneck = bench.get("bottleneck") if isinstance(bench.get("bottleneck"), dict) else {}
    binding = bench.get("binding") if isinstance(bench.get("binding"), dict) else {}
    stage = bench.get("end_to_end_bound") or bottleneck.get("stage") or bottleneck.get("where")
    text = esc(_stage_name(stage)) if stage else ""
    resource = binding or bottleneck
    if resource.get("kind") and (not stage or _stage_key(stage) == "accelerator"):
        inner = _mapping_bottleneck(resource)
        text = f"{text} ({inner})" if text else inner
    return text or "—"


def _stage_key(stage: object) -> str:
    return str(stage).strip().lower().replace(" ", "_").replace("-", "_")


def _stage_name(stage: object) -> str:
    return STAGE_NAMES.get(_stage_key(stage), str(stage).replace("_", " "))


ARROWS = {"to_chip": "host → chip", "to_host": "chip → host"}


def _mapping_bottleneck(bottleneck: dict[str, Any]) -> str:
    """A bottleneck (the cost model's) or a binding resource (the simulator's, with how busy it is) in
    words, as ``accelbuild.targets.mx3.mapper.view.describe`` puts it."""
    kind = bottleneck.get("kind")
    busy = bottleneck.get("busy")
    busy_text = f"{busy * 100:.0f}% busy" if isinstance(busy, (int, float)) else ""
    if kind == "layer":
        extra = f", {busy_text}" if busy_text else ""
        return (f"layer <b>{esc(bottleneck.get('layer'))}</b> of {esc(bottleneck.get('model'))} on chip "
                f"{esc(bottleneck.get('chip'))} ({esc(bottleneck.get('cores'))} cores, "
                f"{_num(bottleneck.get('cycles'), 0)} cycles{extra})")
    suffix = f", {busy_text}" if busy_text else ""
    if kind == "chip_link":
        return f"chip link {esc(bottleneck.get('from_chip'))} → {esc(bottleneck.get('to_chip'))}{suffix}"
    if kind == "host_link":
        where = f", {ARROWS[bottleneck['direction']]}" if bottleneck.get("direction") in ARROWS else ""
        return f"the host link{where}{suffix}"
    if kind == "host_buffers":
        extra = f", {busy_text}" if busy_text else ""
        return (f"the host interface's buffers, {ARROWS.get(str(bottleneck.get('direction')), '?')} "
                f"({esc(bottleneck.get('frames_in_flight'))} transfers in flight{extra})")
    if kind == "stalls":
        return ("waits between layers: no resource saturated (busiest: "
                f"{_mapping_bottleneck(bottleneck.get('busiest') or {})})")
    return esc(str(kind).replace("_", " "))


def _stages_card(bench: dict[str, Any], simulated: bool) -> str:
    host = bench.get("host") or {}
    stages = [("accelerator", bench.get("fps"))]
    if host.get("pre_ms"):
        stages.insert(0, ("host_pre", 1000 / host["pre_ms"]))
    if host.get("post_ms"):
        stages.append(("host_post", 1000 / host["post_ms"]))
    stages = [(name, fps) for name, fps in stages if isinstance(fps, (int, float)) and fps > 0]
    if not stages:
        return _card("Throughput per stage", '<p class="note">No throughput figures.</p>')
    measured = [f"{label} {_num(host[key], 3)} ms" for key, label in (("pre_ms", "pre-processing"),
                                                                     ("post_ms", "post-processing"))
                if isinstance(host.get(key), (int, float))]
    note = ("End-to-end throughput is that of the slowest stage (the darker bar). "
            + (f"Host, per frame: {', '.join(measured)}." if measured else "Host stages were not measured."))
    tags = _tag(simulated) + (_tag(simulated, host=True) if len(stages) > 1 else "")
    return _card(f"Throughput per stage {tags}", _stage_bars(stages), note)


def _stage_colour(name: str, bound: bool) -> str:
    if name == "accelerator":
        return "#2c5d8f" if bound else MAC
    return "#2f7a45" if bound else HOST_IN


def _stage_bars(stages: list[tuple[str, float]]) -> str:
    width, left, row = 600, 150, 34
    top = max(fps for _, fps in stages) * 1.35
    slowest = min(fps for _, fps in stages)
    parts = []
    for i, (name, fps) in enumerate(stages):
        y = 6 + i * row
        length = (width - left - 10) * fps / top
        parts.append(_text(left - 10, y + 16, esc(STAGE_NAMES[name]), anchor="end"))
        parts.append(_rect(left, y + 3, length, 20, _stage_colour(name, fps == slowest), extra=' rx="3"'))
        label = f"{_num(fps)} FPS" + (" · bound" if fps == slowest else "")
        parts.append(_text(left + length + 6, y + 17, label, "value"))
    return _svg(width, 12 + len(stages) * row, "".join(parts), "throughput per stage")


def _cost_card(data: dict[str, Any], bench: dict[str, Any], simulated: bool) -> str:
    entries = [e for e in bench.get("agreement") or [] if isinstance(e, dict)]
    if entries:
        return _agreement_card(entries, bench, data.get("mapping", {}), simulated)
    mapping = data.get("mapping", {})
    cost = bench.get("cost_model") or {"fps": mapping.get("fps"), "latency_ms": mapping.get("latency_ms")}
    rows = [_comparison_row("Throughput (FPS)", cost.get("fps"), bench.get("fps"), 1),
            _comparison_row("Latency (ms)", cost.get("latency_ms"), bench.get("latency_ms"), 3)]
    table = _table(["", "cost model", f"simulation {_tag(simulated)}", "difference"], rows)
    bottleneck = mapping.get("bottleneck")
    where = (f'<p class="bottleneck">Cost-model bottleneck: {_mapping_bottleneck(bottleneck)}</p>'
             if bottleneck else "")
    return _card("Cost model vs simulation", where + table,
                 "The mapper chose this mapping by its cost model; the simulator adds pipeline fill, "
                 "link contention and per-frame jitter of host transfers.")


def _agreement_card(entries: list[dict[str, Any]], bench: dict[str, Any], mapping: dict[str, Any],
                    simulated: bool) -> str:
    """Per model: both figures, both binding resources and, where they part, the effect that separates them."""
    rows = []
    for entry in entries:
        cost, sim = entry.get("cost_model") or {}, entry.get("simulated") or {}
        fps = _comparison_row("", cost.get("fps"), sim.get("fps"), 1)[1:]
        latency = _comparison_row("", cost.get("latency_ms"), sim.get("latency_ms"), 3)[1:]
        rows.append([f"<b>{_name(entry.get('model', '?'))}</b>", *fps, *latency])
    head = ["Model", "FPS, cost model", f"FPS, simulation {_tag(simulated)}", "difference", "Latency (ms), cost model",
            f"Latency (ms), simulation {_tag(simulated)}", "difference"]
    lines = []
    for entry in entries:
        cost, sim = entry.get("cost_model") or {}, entry.get("simulated") or {}
        who = f"<b>{esc(entry.get('model', '?'))}</b>: " if len(entries) > 1 else ""
        lines.append(f'<p class="bottleneck">{who}Cost-model bottleneck: {_mapping_bottleneck(cost.get("bottleneck") or {})}'
                     f"<br>Simulator's binding resource: {_mapping_bottleneck(sim.get('binding') or {})}</p>")
    parted = [e for e in entries if not e.get("agree", True)]
    if parted:
        note = " ".join(f"<b>{esc(e.get('model', '?'))}</b> parts from the cost model: "
                        f"{esc('; '.join(e.get('effects') or []))}." for e in parted)
    else:
        note = ("The cost model and the simulation of this program agree for every model: FPS within 10%, latency "
                "within 20%. The simulator adds pipeline fill, back-pressure through row buffers, link contention "
                "and per-frame jitter of host transfers.")
    return _card("Cost model vs simulation", "".join(lines) + _table(head, rows), note)


def _comparison_row(label: str, predicted: float | None, simulated: float | None, digits: int) -> list[str]:
    diff = "—"
    if predicted and simulated is not None:
        diff = f"{(simulated - predicted) / predicted * 100:+.1f}%"
    return [label, _num(predicted, digits), _num(simulated, digits), diff]


def _models_table(bench: dict[str, Any]) -> str:
    rows = []
    for model in bench.get("models", []):
        accuracy = model.get("accuracy") or {}
        binding = model.get("binding")
        rows.append([f"<b>{_name(model.get('name', '?'))}</b>", _num(model.get("fps")),
                     _num(model.get("latency_ms"), 3), _num(model.get("first_frame_latency_ms"), 3),
                     f'<span class="bound">{_mapping_bottleneck(binding)}</span>' if isinstance(binding, dict) else "—",
                     _num(accuracy.get("cosine"), 6), _num(accuracy.get("sqnr_db"), 1),
                     _num(accuracy.get("max_abs_err"), 4), _prose(frames.cell(accuracy)) or "—"])
    head = ["Model", "FPS", "Latency (ms)", "First-frame latency (ms)", "Bound by (simulator)", "Cosine similarity",
            "SQNR (dB)", "Max abs error", "Inputs (real or random) and frames (the cosine is the worst with signal)"]
    return _table(head, rows)


# ------------------------------------------------------------------------------ temporal statistics

def _temporal_tab(data: dict[str, Any]) -> str:
    timing = data.get("timing") or {}
    bandwidth = timing.get("bandwidth") or {}
    t_us, series = list(bandwidth.get("t_us") or []), dict(bandwidth.get("series") or {})
    if not t_us or not series:
        return _card("Bandwidth over one frame", '<p class="note">No bandwidth data.</p>')
    styles = _series_styles(list(series))
    tag = _tag(bool(data.get("simulated")))
    chart = _line_legend(styles) + _line_chart(t_us, series, styles)
    window = bandwidth.get("window_us")
    note = (f"Link traffic in the steady state: the last {_num(window, 1)} µs before the run's last input (frame "
            f"period {_num(timing.get('frame_period_us'), 1)} µs), {_running_text(bandwidth.get('running'))}; each "
            "transfer at its own rate while it is on the link; bytes per second, decimal units." if window else
            f"Link traffic over one frame period ({_num(timing.get('frame_period_us'), 1)} µs); bytes per second.")
    return (_card(f"Bandwidth in the steady state {tag}", chart, note)
            + _card(f"Per link {tag}", _bandwidth_table(t_us, series, styles, bandwidth.get("bytes_per_frame"))))


def _running_text(running: dict[str, dict[str, Any]] | None) -> str:
    """Which models move data in the bandwidth window: a faster model's frames end before the slowest's."""
    if not running:
        return "every model's transfers shown"
    if all(r.get("from_us") is None and r.get("until_us") is None for r in running.values()):
        return "all models running" if len(running) > 1 else "the model running"
    parts = []
    for name, r in running.items():
        start, until = r.get("from_us"), r.get("until_us")
        if until is not None and until <= (start or 0.0):
            parts.append(f"{esc(name)} not running (its frames are done)")
            continue
        when = [f"from {_num(start, 1)} µs"] if start is not None else []
        when += [f"until {_num(until, 1)} µs (its frames are done)"] if until is not None else []
        parts.append(f"{esc(name)} {' '.join(when) or 'throughout'}")
    return "; ".join(parts)


def _series_styles(names: list[str]) -> dict[str, tuple[str, str]]:
    """(colour, dash pattern) per series: host input green, host output purple, links through the link
    palette; a kind's further series (one per model, more links than colours) dashed, then dotted."""
    styles: dict[str, tuple[str, str]] = {}
    seen = {"host_in": 0, "host_out": 0, "chip_link": 0}
    for name in names:
        kind = _series_kind(name)
        count = seen[kind]
        seen[kind] += 1
        colours = {"host_in": (HOST_IN,), "host_out": (HOST_OUT,)}.get(kind, LINK_COLOURS)
        styles[name] = (colours[count % len(colours)], DASHES[(count // len(colours)) % len(DASHES)])
    return styles


def _series_kind(name: str) -> str:
    """host_in ("host in", "host → chip 0"), host_out ("host out", "chip 3 → host") or chip_link."""
    lowered = name.lower().replace("->", "→")
    if "host in" in lowered or re.match(r"host\s*→", lowered):
        return "host_in"
    if "host out" in lowered or re.search(r"→\s*host", lowered):
        return "host_out"
    return "chip_link"


def _line_legend(styles: dict[str, tuple[str, str]]) -> str:
    items = "".join(f"<span>{_line_sample(*style)} {esc(name)}</span>" for name, style in styles.items())
    return f'<div class="legend">{items}</div>'


def _line_sample(colour: str, dash: str) -> str:
    return (f'<svg width="22" height="10" viewBox="0 0 22 10"><line x1="1" y1="5" x2="21" y2="5" '
            f'stroke="{colour}" stroke-width="2.5"{_dash(dash)}/></svg>')


def _dash(pattern: str) -> str:
    return f' stroke-dasharray="{pattern}"' if pattern else ""


def _rate_unit(peak: float) -> tuple[float, str]:
    for scale, unit in ((1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")):
        if peak >= scale:
            return scale, unit
    return 1.0, "B/s"


def _downsample(t_us: list[float], values: list[float], limit: int) -> tuple[list[float], list[float]]:
    """At most ``limit`` points, keeping each bucket's peak (so short bursts stay visible)."""
    if len(t_us) <= limit:
        return t_us, values
    step = len(t_us) / limit
    buckets = [range(int(i * step), max(int(i * step) + 1, int((i + 1) * step))) for i in range(limit)]
    return [t_us[b[0]] for b in buckets], [max(values[j] for j in b) for b in buckets]


def _line_chart(t_us: list[float], series: dict[str, list[float]],
                styles: dict[str, tuple[str, str]]) -> str:
    width, height, left, right, top, bottom = 1220, 360, 70, 24, 14, 46
    peak = max((max(values, default=0.0) for values in series.values()), default=0.0)
    scale, unit = _rate_unit(peak)
    y_ticks, x_ticks = _ticks(peak / scale), _ticks(max(t_us), 8)
    x_max = max(t_us) or 1.0
    x_ticks = [t for t in x_ticks if t <= x_max + 1e-9]
    plot = _Plot(left, top, width - left - right, height - top - bottom, x_max, y_ticks[-1])
    parts = _axes(plot, x_ticks, y_ticks)
    parts.append(_text(left + plot.w / 2, height - 6, "time within the frame (µs)", anchor="middle"))
    parts.append(f'<text transform="translate(16 {top + plot.h / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle">bandwidth ({unit})</text>')
    for name, values in series.items():
        ts, vs = _downsample(t_us, list(values), MAX_CHART_POINTS)
        points = " ".join(f"{plot.x(t):.1f},{plot.y(v / scale):.1f}" for t, v in zip(ts, vs))
        colour, dash = styles[name]
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.8" '
                     f'stroke-linejoin="round"{_dash(dash)}><title>{esc(name)}</title></polyline>')
    return _svg(width, height, "".join(parts), "bandwidth over one frame")


class _Plot:
    """A plot area in SVG pixels with data ranges [0, x_max] and [0, y_max]."""

    def __init__(self, left: float, top: float, w: float, h: float, x_max: float, y_max: float) -> None:
        self.left, self.top, self.w, self.h, self.x_max, self.y_max = left, top, w, h, x_max, y_max

    def x(self, value: float) -> float:
        return self.left + self.w * value / self.x_max

    def y(self, value: float) -> float:
        return self.top + self.h * (1 - value / self.y_max)


def _axes(plot: _Plot, x_ticks: list[float], y_ticks: list[float]) -> list[str]:
    parts = []
    for value in y_ticks:
        parts.append(_line(plot.left, plot.y(value), plot.left + plot.w, plot.y(value), "grid" if value else "axis"))
        parts.append(_text(plot.left - 8, plot.y(value) + 4, _tick_label(value, _step(y_ticks)), anchor="end"))
    bottom = plot.top + plot.h
    parts.append(_line(plot.left, plot.top, plot.left, bottom, "axis"))
    for value in x_ticks:
        parts.append(_line(plot.x(value), bottom, plot.x(value), bottom + 5, "axis"))
        parts.append(_text(plot.x(value), bottom + 18, _tick_label(value, _step(x_ticks)), anchor="middle"))
    return parts


def _bandwidth_table(t_us: list[float], series: dict[str, list[float]], styles: dict[str, tuple[str, str]],
                     per_frame: dict[str, float] | None = None) -> str:
    """Per link: bytes one frame puts on it (from the schedule, where recorded), the rate over the window
    shown (the series integrated over it), peak rate and time busy."""
    span = (t_us[-1] - t_us[0]) or 1.0
    rows = []
    for name, values in series.items():
        moved = sum((t_us[i + 1] - t_us[i]) * (values[i] + values[i + 1]) / 2 for i in range(len(t_us) - 1)) / 1e6
        mean, peak = moved / span * 1e6, max(values, default=0.0)
        busy = sum(1 for v in values if v > 0) / max(1, len(values))
        frame = (per_frame or {}).get(name)
        rows.append([f"{_line_sample(*styles[name])} {esc(name)}",
                     "—" if frame is None else (_si(frame, "B") if frame else "0 B"),
                     _si(mean, "B/s") if mean else "0 B/s", _si(peak, "B/s") if peak else "0 B/s", _pct(busy)])
    return _table(["Link", "Bytes per frame (schedule)", "Mean bandwidth", "Peak bandwidth", "Time busy"], rows)


# ---------------------------------------------------------------------------------- layer details

LAYER_COLUMNS = (("#", "num"), ("Layer", "text"), ("Model", "text"), ("Chip", "num"), ("Kind", "text"),
                 ("Cores", "num"), ("MACs", "num"), ("Compute (µs)", "num"), ("Data movement (µs)", "num"),
                 ("Active period (µs)", "num"), ("Busy", "num"))
_NAME_CLASS = ' class="name"'


def _layers_tab(data: dict[str, Any]) -> str:
    timing = data.get("timing") or {}
    layers = list(timing.get("layers") or [])
    if not layers:
        return _card("Layers", '<p class="note">No layer timing.</p>')
    tag = _tag(bool(data.get("simulated")))
    total_macs = sum(layer.get("macs") or 0 for layer in layers)
    head = "".join(f'<th data-type="{kind}"{_NAME_CLASS if kind == "text" else ""}>{title}</th>'
                   for title, kind in LAYER_COLUMNS)
    scales = _layer_scales(layers)
    rows = "".join(_layer_row(i, layer, scales) for i, layer in enumerate(layers, 1))
    table = (f'<div class="scroll"><table class="sortable layers"><thead><tr>{head}</tr></thead>'
             f"<tbody>{rows}</tbody></table></div>")
    note = (f"{len(layers)} layers, {_si(total_macs, 'MAC')} per frame. Times are for the first frame; "
            f"the active period is drawn against the first frame's span, busy is the share of the frame "
            f"period ({_num(timing.get('frame_period_us'), 1)} µs) the layer works. Click a column to sort.")
    legend = _legend([("MAC layer", MAC), ("ALU layer", ALU), ("data movement", DATA)])
    return _card(f"Layers {tag}", legend + table, note)


def _layer_scales(layers: list[dict[str, Any]]) -> dict[str, float]:
    return {
        "macs": max((layer.get("macs") or 0 for layer in layers), default=0) or 1,
        "compute": max((layer.get("compute_us") or 0 for layer in layers), default=0) or 1,
        "data": max((layer.get("data_us") or 0 for layer in layers), default=0) or 1,
        "end": max((layer.get("end_us") or 0 for layer in layers), default=0) or 1,
    }


def _layer_row(index: int, layer: dict[str, Any], scales: dict[str, float]) -> str:
    kind = str(layer.get("kind", ""))
    colour = MAC if kind == "mac" else ALU
    macs, compute, data = layer.get("macs") or 0, layer.get("compute_us") or 0.0, layer.get("data_us") or 0.0
    start, end = layer.get("start_us") or 0.0, layer.get("end_us") or 0.0
    busy = layer.get("active_fraction") or 0.0
    name = esc(layer.get("name", ""))
    cells = [
        _cell(str(index), index), f'<td class="name" title="{name}">{name}</td>',
        f'<td class="name" title="{esc(layer.get("model", ""))}">{esc(layer.get("model", ""))}</td>', _cell(esc(layer.get("chip", "")), layer.get("chip")),
        f'<td class="name">{esc(kind.upper())}</td>', _cell(esc(layer.get("cores", "")), layer.get("cores")),
        _bar_cell(_si(macs), macs, macs / scales["macs"], MAC),
        _bar_cell(_num(compute, 1), compute, compute / scales["compute"], colour),
        _bar_cell(_num(data, 1), data, data / scales["data"], DATA),
        _period_cell(start, end, scales["end"], colour),
        _bar_cell(_pct(busy), busy, busy, colour),
    ]
    return "<tr>" + "".join(cells) + "</tr>"


def _cell(text: str, sort_value: object) -> str:
    return f'<td data-v="{esc(sort_value)}">{text}</td>'


def _bar_cell(text: str, value: float, fraction: float, colour: str, width: int = 50) -> str:
    fill = _rect(0, 1, width * min(1.0, max(0.0, fraction)), 10, colour)
    track = _rect(0, 1, width, 10, "#f1f3f5")
    bar = f'<svg width="{width}" height="12" viewBox="0 0 {width} 12">{track}{fill}</svg>'
    return f'<td data-v="{esc(value)}"><div class="bar"><span>{text}</span>{bar}</div></td>'


def _period_cell(start: float, end: float, scale: float, colour: str, width: int = 90) -> str:
    x0, x1 = width * start / scale, width * end / scale
    bar = (f'<svg width="{width}" height="12" viewBox="0 0 {width} 12">{_rect(0, 1, width, 10, "#f1f3f5")}'
           f"{_rect(x0, 1, max(1.0, x1 - x0), 10, colour)}</svg>")
    text = f"{_num(start, 0)}–{_num(end, 0)}"
    return f'<td data-v="{esc(start)}"><div class="bar"><span>{text}</span>{bar}</div></td>'


# ---------------------------------------------------------------------------------------- timeline

TRACK_COLOURS = {"host_in": HOST_IN, "host_out": HOST_OUT, "chip_link": LINK}


def _timeline_tab(data: dict[str, Any]) -> str:
    timing = data.get("timing") or {}
    tracks = list(timing.get("timeline") or [])
    if not tracks:
        return _card("Timeline", '<p class="note">No timeline.</p>')
    shown, hidden = _select_tracks(tracks)
    legend = _legend([("MAC layer", MAC), ("ALU layer", ALU), ("host → chip", HOST_IN),
                      ("chip → host", HOST_OUT), ("chip-to-chip link", LINK)])
    note = ("The first frames through the pipeline, one row per core group and link; dashed lines mark "
            f"frame periods ({_num(timing.get('frame_period_us'), 1)} µs) when there are at most "
            f"{MAX_FRAME_LINES} of them.")
    if hidden:
        note += (f" Showing the {MAX_TIMELINE_LAYER_TRACKS} busiest of {MAX_TIMELINE_LAYER_TRACKS + hidden} "
                 f"layer tracks ({hidden} hidden) and every host and link track.")
    chart = _gantt(shown, float(timing.get("frame_period_us") or 0))
    return _card(f"Timeline {_tag(bool(data.get('simulated')))}", legend + chart, note)


def _busy_us(track: dict[str, Any]) -> float:
    return sum(end - start for start, end in track.get("spans") or [])


def _select_tracks(tracks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Every non-layer track and the busiest layer tracks, in their original order."""
    layer_rows = [i for i, track in enumerate(tracks) if track.get("kind") == "layer"]
    if len(layer_rows) <= MAX_TIMELINE_LAYER_TRACKS:
        return tracks, 0
    busiest = sorted(layer_rows, key=lambda i: (-_busy_us(tracks[i]), i))[:MAX_TIMELINE_LAYER_TRACKS]
    keep = set(busiest) | {i for i, track in enumerate(tracks) if track.get("kind") != "layer"}
    return [track for i, track in enumerate(tracks) if i in keep], len(layer_rows) - len(busiest)


def _grouped(tracks: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Layer tracks by their group (chip), chips in number order, then the host link, then chip links;
    in each group the tracks in the order they first start (the pipeline's order)."""
    groups: dict[str, list[tuple[float, int, dict[str, Any]]]] = {}
    for index, track in enumerate(tracks):
        spans = track.get("spans") or [[0.0, 0.0]]
        groups.setdefault(_group_of(track), []).append((min(start for start, _ in spans), index, track))
    order = sorted(groups, key=lambda name: _group_rank(name, list(groups).index(name)))
    return {name: [track for *_, track in sorted(groups[name], key=lambda item: item[:2])] for name in order}


def _group_of(track: dict[str, Any]) -> str:
    kind = track.get("kind")
    if kind in ("host_in", "host_out"):
        return "host link"
    if kind == "chip_link":
        return "chip links"
    return str(track.get("group", ""))


def _group_rank(name: str, seen: int) -> tuple[int, int, int]:
    chip = re.fullmatch(r"chip (\d+)", name)
    if chip:
        return 0, int(chip.group(1)), seen
    return (2 if name == "host link" else 3 if name == "chip links" else 1), 0, seen


def _track_colour(track: dict[str, Any]) -> str:
    kind = track.get("kind")
    if kind == "layer":
        name = str(track.get("track", ""))
        return ALU if re.search(r"\bALU\b", name) else MAC if re.search(r"\bMAC\b", name) else NEUTRAL
    return TRACK_COLOURS.get(str(kind), NEUTRAL)


def _track_label(track: dict[str, Any], group: str, limit: int = 44) -> str:
    label = str(track.get("track", ""))
    if group and label.startswith(group + " · "):
        label = label[len(group) + 3:]
    return label if len(label) <= limit else label[:limit - 1] + "…"


GANTT_WIDTH, GANTT_LABEL, GANTT_AXIS, GANTT_GROUP, GANTT_ROW = 1240, 300, 40, 24, 15


def _gantt(tracks: list[dict[str, Any]], period_us: float) -> str:
    groups = _grouped(tracks)
    height = GANTT_AXIS + len(groups) * GANTT_GROUP + len(tracks) * GANTT_ROW + 6
    t_max = max((end for track in tracks for _, end in track.get("spans") or []), default=1.0) or 1.0
    ticks = _ticks(t_max, 10)
    plot = _Plot(GANTT_LABEL + 10, GANTT_AXIS, GANTT_WIDTH - GANTT_LABEL - 30, height - GANTT_AXIS, ticks[-1], 1)
    rows, y = [], float(GANTT_AXIS)
    for group, members in groups.items():
        rows.append(_text(8, y + 17, esc(group), "group"))
        y += GANTT_GROUP
        for index, track in enumerate(members):
            rows.append(_gantt_row(track, group, plot, y, index % 2 == 1))
            y += GANTT_ROW
    grid = _gantt_grid(plot, ticks, period_us, height)
    return _svg(GANTT_WIDTH, height, "".join(grid + rows), "timeline")


def _gantt_grid(plot: _Plot, ticks: list[float], period_us: float, height: float) -> list[str]:
    parts = [_text(plot.left + plot.w, 12, "time (µs)", anchor="end")]
    for value in ticks:
        parts.append(_line(plot.x(value), GANTT_AXIS - 6, plot.x(value), height, "grid"))
        parts.append(_text(plot.x(value), GANTT_AXIS - 10, _tick_label(value, _step(ticks)), anchor="middle"))
    if period_us > 0 and ticks[-1] / period_us <= MAX_FRAME_LINES:
        for frame in range(1, int(ticks[-1] / period_us) + 1):
            parts.append(_line(plot.x(frame * period_us), GANTT_AXIS, plot.x(frame * period_us), height, "frame"))
    parts.append(_line(plot.left, GANTT_AXIS, plot.left + plot.w, GANTT_AXIS, "axis"))
    return parts


def _gantt_row(track: dict[str, Any], group: str, plot: _Plot, y: float, shaded: bool) -> str:
    name = esc(track.get("track", ""))
    colour = _track_colour(track)
    parts = [_rect(0, y, GANTT_WIDTH, GANTT_ROW, "#f7f8fa")] if shaded else []
    parts.append(f'<text x="{GANTT_LABEL:.1f}" y="{y + 11:.1f}" text-anchor="end">{esc(_track_label(track, group))}'
                 f"<title>{name}</title></text>")
    for start, end in track.get("spans") or []:
        title = f"{name}: {_num(start, 1)}–{_num(end, 1)} µs"
        parts.append(_rect(plot.x(start), y + 3, max(1.0, plot.x(end) - plot.x(start)), GANTT_ROW - 5, colour,
                           title, ' rx="2"'))
    return "".join(parts)


# ------------------------------------------------------------------------------------- utilisation

CELL, PITCH, GRID_LABEL = 12, 15, 56


def _utilisation_tab(data: dict[str, Any]) -> str:
    mapping = data.get("mapping") or {}
    chips = [chip for chip in mapping.get("chips") or [] if chip.get("mac_cores") or chip.get("alu_cores")]
    if not chips:
        return _card("Core utilisation", '<p class="note">No mapping.</p>')
    owners = _core_owners(mapping.get("layers") or [])
    blocks = "".join(_chip_block(chip, owners) for chip in chips)
    bottleneck = mapping.get("bottleneck")
    where = (f'<p class="bottleneck">Cost-model bottleneck: {_mapping_bottleneck(bottleneck)}</p>' if bottleneck else "")
    note = ("One square per core, coloured by the share of cycles it is busy; rows of "
            f"{ROW} cores, MAC cores then ALU cores, the same ten levels as the terminal view "
            f"(<code>accelbuild run --show-mapping</code>: <code>'{esc(SHADES)}'</code>). Hover a core for its layer.")
    tag = '<span class="tag" title="mapping.json: the mapper\'s cost model">cost model</span>'
    return _card(f"Core utilisation per chip {tag}", where + _levels_legend() + blocks, note)


def _level(utilization: float) -> int:
    return SHADES.index(shade(utilization))


def _levels_legend() -> str:
    steps = len(SHADES) - 2
    items = [("idle", LEVELS[0])]
    for level in range(1, len(SHADES)):
        low, high = max(0.0, (level - 1.5) / steps), (level - 0.5) / steps
        label = (f"&lt;{high:.0%}" if level == 1 else f"≥{low:.0%}" if level == len(SHADES) - 1
                 else f"{low:.0%}–{high:.0%}")
        items.append((label, LEVELS[level]))
    return _legend(items)


def _core_owners(layers: list[dict[str, Any]]) -> dict[tuple[int, str], dict[int, list[str]]]:
    owners: dict[tuple[int, str], dict[int, list[str]]] = {}
    for layer in layers:
        cores = owners.setdefault((layer.get("chip", 0), str(layer.get("kind", ""))), {})
        first = int(layer.get("first_core") or 0)
        for core in range(first, first + int(layer.get("cores") or 0)):
            cores.setdefault(core, []).append(f"{layer.get('model', '')}/{layer.get('name', '')}")
    return owners


def _chip_block(chip: dict[str, Any], owners: dict[tuple[int, str], dict[int, list[str]]]) -> str:
    mac, alu = chip.get("mac_core_utilization") or [], chip.get("alu_core_utilization") or []
    facts = [("MAC cores", f"{esc(chip.get('mac_cores', 0))} / {len(mac)}"),
             ("MAC busy", _pct(chip.get("mac_utilization"))),
             ("ALU cores", f"{esc(chip.get('alu_cores', 0))} / {len(alu)}"),
             ("ALU busy", _pct(chip.get("alu_utilization"))),
             ("weight memory", f"{_pct(chip.get('weight_utilization'))} ({_si(chip.get('weight_bytes'), 'B')})"),
             ("feature maps", f"{_num((chip.get('feature_bytes') or 0) / 1024, 0)} KiB")]
    facts_html = "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in facts)
    grid = _core_grid(chip.get("chip", 0), mac, alu, owners)
    return (f'<div class="chip"><div><h3>chip {esc(chip.get("chip", "?"))}</h3><dl>{facts_html}</dl></div>'
            f"<div>{grid}</div></div>")


def _core_grid(chip: int, mac: list[float], alu: list[float],
               owners: dict[tuple[int, str], dict[int, list[str]]]) -> str:
    parts, y = [], 0.0
    for label, cores in (("MAC", mac), ("ALU", alu)):
        names = owners.get((chip, label.lower()), {})
        for start in range(0, len(cores), ROW):
            parts.append(_text(0, y + CELL - 2, f"{label} {start}", "small"))
            for offset, utilization in enumerate(cores[start:start + ROW]):
                core = start + offset
                title = esc(f"{label} core {core}: {utilization:.0%} busy"
                            + (f" · {', '.join(names[core])}" if core in names else ""))
                parts.append(_rect(GRID_LABEL + offset * PITCH, y, CELL, CELL, LEVELS[_level(utilization)],
                                   title, ' rx="2"'))
            y += PITCH
        y += 8
    return _svg(GRID_LABEL + ROW * PITCH, max(y - 8, 1), "".join(parts), f"core utilisation of chip {chip}", "grid")
