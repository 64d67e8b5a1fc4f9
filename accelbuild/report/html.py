"""The report shell every family's report.html is drawn with: the page (header, tab bar, inline CSS and
script), cards, tables, figures, legends and inline SVG primitives, and one palette.

Everything is inline: CSS, a few lines of JavaScript (tab switching, opening the tab named in the URL
fragment such as ``#timeline``, sorting tables), and every chart as SVG drawn in Python. Nothing is
fetched, so the page works offline and from a CI artifact. The same data gives the same bytes (no
timestamps, fixed number formats, data order kept); ``esc`` HTML-escapes every string from the data.
A family's tabs live in its own package (``accelbuild.targets.<family>.report``) and draw with these.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

SIMULATED = "simulated: modelled accelerator"

# One palette everywhere: MAC work blue, ALU work orange, host input green, host output purple,
# chip-to-chip links red (more links take the next colours), data movement teal.
MAC, ALU, HOST_IN, HOST_OUT, LINK, DATA, NEUTRAL = (
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#8c96a5")
LINK_COLOURS = (LINK, "#edc948", "#9c755f", "#ff9da7", "#76b7b2", "#bab0ac")
DASHES = ("", "7 4", "2 3")


# ----------------------------------------------------------------------------------------- helpers

def esc(value: object) -> str:
    """Text from the data, safe in element content and in quoted attributes."""
    return html.escape(str(value), quote=True)


def _num(value: float | None, digits: int = 1) -> str:
    if value is None or not isinstance(value, (int, float)) or math.isnan(value):
        return "—"
    return f"{value:,.{digits}f}"


def _si(value: float | None, unit: str = "") -> str:
    """3 significant-ish digits with a decimal prefix: 4.09 G, 221 k."""
    if not value:
        return "—"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{_trim(value / scale)} {prefix}{unit}"
    return f"{_trim(value)} {unit}".rstrip()


def _trim(value: float) -> str:
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


def _tag(simulated: bool, host: bool = False) -> str:
    if host:
        return '<span class="tag host" title="measured with onnxruntime on the build host">measured on host</span>'
    if simulated:
        return f'<span class="tag sim" title="{SIMULATED}">simulated</span>'
    return '<span class="tag">measured</span>'


def _kind(text: str) -> str:
    """How a figure was obtained, as its tag: ``estimated by Vela 4.2.0``, ``measured on <machine>``."""
    return f'<span class="tag kind" title="{esc(text)}">{esc(text)}</span>'


def _ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top``."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw - 1e-12)
    return [i * step for i in range(int(math.ceil(top / step - 1e-9)) + 1)]


def _step(ticks: list[float]) -> float:
    return ticks[1] - ticks[0] if len(ticks) > 1 else 1.0


def _tick_label(value: float, step: float) -> str:
    """As few decimals as the tick step needs (0.25 -> 2, 0.5 -> 1, 500 -> 0)."""
    decimals = next((d for d in range(7) if abs(round(step, d) - step) < 1e-9 * max(1.0, step)), 6)
    return f"{value:,.{decimals}f}"


def _svg(width: float, height: float, body: str, label: str, css: str = "chart") -> str:
    return (f'<svg class="{css}" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
            f'height="{height:.0f}" role="img" aria-label="{esc(label)}">{body}</svg>')


def _text(x: float, y: float, content: str, css: str = "", anchor: str = "start") -> str:
    cls = f' class="{css}"' if css else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{cls}>{content}</text>'


def _rect(x: float, y: float, w: float, h: float, fill: str, title: str = "", extra: str = "") -> str:
    head = f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.0):.1f}" height="{h:.1f}" fill="{fill}"{extra}'
    return f"{head}><title>{title}</title></rect>" if title else f"{head}/>"


def _line(x1: float, y1: float, x2: float, y2: float, css: str) -> str:
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" class="{css}"/>'


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], css: str = "") -> str:
    header = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>'


def _name(text: object) -> str:
    """A name from the data (a model, a TFLite layer: often a long path with no space), cut short with an
    ellipsis where it is too long for its column; the ``title`` holds it whole."""
    shown = esc(text)
    return f'<span class="name" title="{shown}">{shown}</span>'


def _prose(text: object) -> str:
    """A sentence in a table cell (which inputs, why): it wraps, where numbers and names do not."""
    return f'<span class="prose">{esc(text)}</span>' if text else ""


def _card(title: str, content: str, note: str = "") -> str:
    extra = f'<p class="note">{note}</p>' if note else ""
    return f'<div class="card"><h2>{title}</h2>{content}{extra}</div>'


def _swatch(colour: str) -> str:
    return f'<i class="swatch" style="background:{colour}"></i>'


def _legend(items: Iterable[tuple[str, str]]) -> str:
    spans = "".join(f"<span>{_swatch(colour)}{label}</span>" for label, colour in items)
    return f'<div class="legend">{spans}</div>'


def _section(tab_id: str, title: str, content: str) -> str:
    return f'<section id="tab-{tab_id}" class="tab" aria-label="{esc(title)}">{content}</section>'


# ---------------------------------------------------------------------------------------- document

CSS = """
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bg:#f4f5f7;--card:#fff;--accent:#2563eb}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
 font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue","Liberation Sans",Arial,sans-serif}
header{background:#1f2937;color:#f9fafb;padding:18px 32px 0}
header h1{margin:0;font-size:20px;font-weight:600}
header .sub{color:#cbd5e1;margin:4px 0 14px;display:flex;gap:12px;align-items:center;flex-wrap:wrap}
nav{display:flex;gap:4px}
nav a{color:#cbd5e1;text-decoration:none;padding:9px 16px;border-radius:6px 6px 0 0;font-weight:500}
nav a:hover{color:#fff;background:#374151}
nav a.active{background:var(--bg);color:var(--ink)}
main{max-width:1340px;margin:0 auto;padding:20px 32px 40px}
main p,.figure,.note,.bottleneck,.card h2{overflow-wrap:anywhere}
.js section.tab{display:none}
.js section.tab.active{display:block}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:16px 20px;margin:0 0 18px;
 overflow-x:auto;min-width:0}
.card h2{font-size:15px;margin:0 0 12px;font-weight:600}
.note{color:var(--muted);font-size:12.5px;margin:10px 0 0}
.figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(210px,1fr));gap:18px;margin-bottom:18px}
.figure{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 18px;min-width:0}
.figure .top{display:flex;justify-content:space-between;align-items:center;gap:6px;flex-wrap:wrap}
.figure .label{color:var(--muted);font-size:12.5px;text-transform:uppercase;letter-spacing:.04em}
.figure .tag{margin:0 0 0 4px}
.figure .value{font-size:30px;font-weight:650;margin:2px 0;font-variant-numeric:tabular-nums}
.figure .value small{font-size:15px;font-weight:500;color:var(--muted);margin-left:4px}
.figure .detail{color:var(--muted);font-size:12.5px}
.tag{display:inline-block;font-size:11px;font-weight:600;padding:1px 7px;border-radius:10px;
 border:1px solid #d1d5db;color:var(--muted);vertical-align:middle;margin-left:6px;white-space:nowrap}
.tag.sim{background:#fef3c7;border-color:#f59e0b;color:#92400e}
.tag.host{background:#e0f2fe;border-color:#38bdf8;color:#075985}
.tag.kind{white-space:normal;max-width:100%;overflow-wrap:anywhere}
.badge{background:#fef3c7;color:#92400e;border-radius:12px;padding:2px 10px;font-size:12px;font-weight:600}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:5px 9px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{font-size:12px;color:var(--muted);font-weight:600;background:#f9fafb;white-space:normal;min-width:4.5em}
th:first-child,td:first-child,td.name,th.name{text-align:left}
tbody tr:hover{background:#f8fafc}
.sortable th{cursor:pointer;user-select:none;position:sticky;top:0;z-index:1}
.sortable th:hover{color:var(--ink)}
.sortable th[aria-sort=ascending]::after{content:" \\25B2";font-size:9px}
.sortable th[aria-sort=descending]::after{content:" \\25BC";font-size:9px}
.scroll{max-height:720px;overflow:auto;border:1px solid var(--line);border-radius:6px}
.scroll table{border:0}
td.name{max-width:220px;overflow:hidden;text-overflow:ellipsis}
span.prose{display:inline-block;white-space:normal;min-width:12em;max-width:26em;text-align:left;
 overflow-wrap:anywhere}
span.name{display:inline-block;max-width:16em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
 vertical-align:bottom}
table.layers{font-size:12.5px}
table.layers th,table.layers td{padding:4px 6px}
.bar{display:flex;align-items:center;gap:6px;justify-content:flex-end}
.bar svg{flex:none}
.legend svg{vertical-align:0}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;font-size:12.5px;color:var(--muted);margin:4px 0 10px}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px;vertical-align:-2px;
 border:1px solid rgba(0,0,0,.12)}
svg.chart{display:block;max-width:100%;height:auto}
svg text{font-size:11px;fill:#4b5563}
svg text.title{font-size:12px;font-weight:600;fill:var(--ink)}
svg text.group{font-size:12px;font-weight:600;fill:var(--ink)}
svg text.value{fill:var(--ink)}
svg text.small{font-size:10px}
code{white-space:nowrap;font-size:12px}
svg text.inside{fill:#fff;font-weight:600}
svg .grid{stroke:#eceef1}
svg .axis{stroke:#9ca3af}
svg .frame{stroke:#9ca3af;stroke-dasharray:4 3}
.chip{display:grid;grid-template-columns:260px 1fr;gap:24px;align-items:start;padding:14px 0;
 border-top:1px solid var(--line)}
.chip:first-of-type{border-top:0;padding-top:0}
.chip h3{margin:0 0 6px;font-size:14px}
.chip dl{display:grid;grid-template-columns:auto 1fr;gap:3px 12px;margin:0;font-size:12.5px}
.chip dt{color:var(--muted)}
.chip dd{margin:0;text-align:right;font-variant-numeric:tabular-nums}
.bottleneck{background:#fff7ed;border-left:3px solid #f28e2b;padding:8px 12px;margin:0 0 12px;border-radius:4px}
span.bound{white-space:normal;display:inline-block;min-width:220px;max-width:420px;text-align:left;
 overflow-wrap:anywhere}
"""

SCRIPT = """
(function(){
document.documentElement.className+=' js';
var anchors=document.querySelectorAll('nav a');
function show(id){
 if(!document.getElementById('tab-'+id)){id='summary';}
 var s=document.querySelectorAll('section.tab');
 for(var i=0;i<s.length;i++){s[i].classList.toggle('active',s[i].id==='tab-'+id);}
 for(var j=0;j<anchors.length;j++){anchors[j].classList.toggle('active',anchors[j].getAttribute('href')==='#'+id);}
}
for(var k=0;k<anchors.length;k++){anchors[k].addEventListener('click',function(e){
 e.preventDefault();var id=this.getAttribute('href').slice(1);show(id);history.replaceState(null,'','#'+id);});}
window.addEventListener('hashchange',function(){show(location.hash.slice(1));});
show(location.hash.slice(1));
function key(row,i,num){var c=row.cells[i],v=c.getAttribute('data-v');if(v===null){v=c.textContent;}
 return num?parseFloat(v):v.toLowerCase();}
var heads=document.querySelectorAll('table.sortable th');
for(var h=0;h<heads.length;h++){heads[h].addEventListener('click',function(){
 var th=this,table=th.closest('table'),body=table.tBodies[0],i=th.cellIndex,num=th.getAttribute('data-type')==='num';
 var dir=th.getAttribute('aria-sort')==='descending'?1:-1;if(!num&&!th.hasAttribute('aria-sort')){dir=1;}
 var rows=Array.prototype.slice.call(body.rows);
 rows.sort(function(a,b){var x=key(a,i,num),y=key(b,i,num);return (x<y?-1:x>y?1:0)*dir;});
 var all=table.querySelectorAll('th');for(var n=0;n<all.length;n++){all[n].removeAttribute('aria-sort');}
 th.setAttribute('aria-sort',dir>0?'ascending':'descending');
 for(var r=0;r<rows.length;r++){body.appendChild(rows[r]);}});}
})();
"""


def page(pipeline: str, facts: Sequence[str], simulated: bool, tabs: Sequence[tuple[str, str]], body: str) -> str:
    """The report shell every family shares: header (``facts`` are HTML), tab bar, ``body`` (the
    ``section`` of each tab), the inline CSS and script."""
    name = esc(pipeline)
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8"><title>{name} · accelbuild benchmark report</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{CSS}</style></head><body>{_header(pipeline, facts, simulated, tabs)}<main>{body}</main>"
            f"<script>{SCRIPT}</script></body></html>\n")


def _header(pipeline: str, facts: Sequence[str], simulated: bool, tabs: Sequence[tuple[str, str]]) -> str:
    badge = f'<span class="badge">{SIMULATED}</span>' if simulated else ""
    links = "".join(f'<a href="#{tab_id}">{title}</a>' for tab_id, title in tabs)
    return (f"<header><h1>{esc(pipeline)} — benchmark report</h1>"
            f'<div class="sub"><span>{" · ".join(facts)}</span>{badge}</div><nav>{links}</nav></header>')


def _figure(label: str, value: str, unit: str, detail: str, tag: str) -> str:
    small = f"<small>{unit}</small>" if unit else ""
    return (f'<div class="figure"><div class="top"><span class="label">{label}</span><span>{tag}</span></div>'
            f'<div class="value">{value}{small}</div><div class="detail">{detail}</div></div>')


def _accuracy_figure(models: Sequence[dict[str, Any]], how: str, tag: str = "") -> str:
    """The headline accuracy: the lowest cosine similarity to the float model over ``models`` (benchmark.json
    entries), whose it is, its SQNR and ``how`` it was measured."""
    scored = [m for m in models if isinstance((m.get("accuracy") or {}).get("cosine"), (int, float))]
    if not scored:
        return _figure("Accuracy", "—", "", "not measured", tag)
    worst = min(scored, key=lambda m: m["accuracy"]["cosine"])
    accuracy = worst["accuracy"]
    whose = f"model {esc(worst.get('name', '?'))}" + (f", the lowest of {len(scored)}" if len(scored) > 1 else "")
    detail = f"cosine vs float · {whose} · SQNR {_num(accuracy.get('sqnr_db'), 1)} dB · {how}"
    return _figure("Accuracy", f"{accuracy['cosine']:.5f}", "", detail, tag)


def _speed_figures(models: Sequence[dict[str, Any]], tag: str, latency_note: str = "") -> list[str]:
    """Headline throughput and latency: for one model its two figures; for several, one card per model
    (never a sum of different models' frames)."""
    if len(models) == 1:
        model = models[0]
        name = esc(model.get("name", "?"))
        return [_figure("Throughput", _num(model.get("fps")), "FPS", f"model {name}", tag),
                _figure("Latency", _num(model.get("latency_ms"), 3), "ms",
                        f"model {name}, one frame" + (f" · {latency_note}" if latency_note else ""), tag)]
    return [_figure(f"Throughput · {esc(m.get('name', '?'))}", _num(m.get("fps")), "FPS",
                    f"latency {_num(m.get('latency_ms'), 3)} ms", tag) for m in models]


def _figures(cards: Sequence[str]) -> str:
    return f'<div class="figures">{"".join(cards)}</div>'


# Building blocks for other families' reports (the npu and ethos-u reports draw with these).
section, card, table, figure, tag, svg, rect, text, line, legend, swatch, num, si, pct, ticks, name = (
    _section, _card, _table, _figure, _tag, _svg, _rect, _text, _line, _legend, _swatch, _num, _si, _pct, _ticks,
    _name)
prose, kind, accuracy_figure, speed_figures, figures = _prose, _kind, _accuracy_figure, _speed_figures, _figures
