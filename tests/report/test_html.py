"""The report shell's layout in a real browser (headless Chromium): every family's report, with TFLite-long
layer and model names, fits the window at 1000, 1400 and 1920 px on every tab (no sideways scrolling of the
page), no card or headline figure is squeezed narrower than ``MIN_CARD_PX``, and a name that is cut short
carries the whole name in its ``title``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelbuild.targets.cpu import report as cpu_report
from accelbuild.targets.ethos_u import report as ethos_u_report
from accelbuild.targets.mx3.report import render_report
from accelbuild.targets.mx3.report_sample import sample_data
from accelbuild.targets.npu.report import render_npu_report

WIDTHS = (1000, 1400, 1920)
MIN_CARD_PX = 160


def long_name(short: str) -> str:
    """A layer name as TensorFlow's converter writes them: one long token, no spaces."""
    stem = re.sub(r"\W", "_", short)
    return (f"model/{stem}/BiasAdd;model/batch_normalization_{len(stem)}/FusedBatchNormV3;"
            f"model/{stem}/Conv2D;model/{stem}/depthwise_conv2d_native/ReadVariableOp/resource_{stem}")


def _renamed(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every string equal to one of ``names`` replaced."""
    if isinstance(value, dict):
        return {names.get(k, k) if isinstance(k, str) else k: _renamed(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, names) for v in value]
    return names.get(value, value) if isinstance(value, str) else value


def mx3_page(models: int = 2) -> str:
    """The sample (det and cls), or its first model alone (then the headline end-to-end figure is bounded by
    a layer named in full), with long layer names and a long model name."""
    data = sample_data()
    names = {layer["name"]: long_name(layer["name"]) for layer in data["mapping"]["layers"]}
    data = _renamed(data, {**names, "det": MODEL})
    bench = data["benchmark"]
    if models == 1:
        bench["models"] = bench["models"][:1]
        bench["binding"] = {"model": MODEL, **bench["models"][0]["binding"]}
        bench["end_to_end_bound"] = "accelerator"
        bench["latency_model"] = MODEL
    return render_report(data)


def _accuracy(cosine: float) -> dict[str, Any]:
    return {"cosine": cosine, "sqnr_db": 31.5, "max_abs_err": 0.02, "inputs": "random", "samples": 8, "seed": 0}


MODEL = "ssd_mobilenet_v2_fpnlite_320x320_coco17_tpu-8_quantized_edgetpu"


def npu_page() -> str:
    layers = [{"subgraph": "npu_0", "name": long_name(f"conv_{i}"), "unit": "mac", "start_cycle": 1000 * i,
               "end_cycle": 1000 * i + 900, "compute_cycles": 800, "load_cycles": 300, "store_cycles": 200,
               "ddr_bytes": 40_000} for i in range(12)]
    bench = {"fps": 412.5, "latency_ms": 2.42, "batch_size": 1, "desired_batch_size": 4, "frames_in_flight": 2,
             "offload": {"host_layers": 1, "npu_layers": 12, "subgraphs": 2,
                         "host_code": {"compiler": "none", "reason": "offload.host_compiler is none"}},
             "models": [{"name": MODEL, "fps": 412.5, "latency_ms": 2.42, "accuracy": _accuracy(0.9991)}],
             "agreement": {"predicted_fps": 420.0, "simulated_fps": 412.5, "ratio": 0.982, "explanation": "fill"},
             "credibility": {"text": "within 25% of published figures"}}
    intervals = [{"unit": "mac", "start_us": 1.5 * i, "end_us": 1.5 * i + 1.4, "label": long_name(f"conv_{i}")}
                 for i in range(12)]
    data = {"pipeline": "p", "platform": "tda4vm", "clock_mhz": 1000, "benchmark": bench, "layers": layers,
            "timeline": {"units": ["mac", "vector", "dma", "host"], "frame_us": 20.0, "intervals": intervals},
            "bandwidth": {"t_us": [0.0, 5.0, 10.0, 20.0], "bytes_per_second": [1e9, 3e9, 2e9, 0.5e9],
                          "peak_bytes_per_second": 4e9}}
    return render_npu_report(data)


def ethos_u_page() -> str:
    cpu_ops = [{"op": "CUSTOM", "name": long_name("postprocess"), "reason": "not supported by the NPU"}]
    bench = {"estimated_by": "vela 4.2.0", "accelerator": "ethos-u55-128",
             "models": [{"name": MODEL, "fps": 97.3, "latency_ms": 10.28, "cycles": 5_140_000, "npu_ops": 41,
                         "cpu_ops": cpu_ops, "sram_bytes": 380_000, "flash_bytes": 3_400_000,
                         "accuracy": _accuracy(0.9987)}]}
    stats = {MODEL: [{"name": long_name(f"conv_{i}"), "op": "CONV_2D", "npu_op": "Conv2D", "unit": "npu",
                      "cycles": 10_000 + 1000 * i, "macs": 2_000_000} for i in range(12)]}
    return ethos_u_report.render("p", bench, stats)


def cpu_page() -> str:
    model = {"name": MODEL, "fps": 211.0, "latency_ms": 4.74, "latency_p90_ms": 4.9, "frames": 200, "warmup_frames": 20,
             "accuracy": _accuracy(1.0),
             "end_to_end": {"fps": 190.0, "latency_ms": 5.26, "sections": "pre + ai + post"}}
    bench = {"measured_on": "AMD EPYC 7B13 (2 logical cores), Linux 6.1", "backend": "onnxruntime",
             "onnxruntime": "1.32.0", "graph_optimization": "all", "precision": "int8", "models": [model],
             "machine": {"cpu": "AMD EPYC 7B13", "logical_cores": 2, "isa": ["avx2", "fma"],
                         "int8_dot_product": "vpdpbusd"}}
    configs = {MODEL: {"precision": "int8", "graph_optimization_level": "all", "execution_mode": "sequential",
                       "intra_op_num_threads": 1, "inter_op_num_threads": 1, "notes": ["one frame at a time"]}}
    records = {MODEL: {"operators": {long_name("QLinearConv"): 40}, "bytes": 3_500_000, "integer_operators": 40,
                       "check": {"cosine": 1.0, "max_abs_err": 0.0}}}
    return cpu_report.render("p", bench, configs, records)


PAGES: dict[str, Callable[[], str]] = {"mx3": mx3_page, "mx3 one model": lambda: mx3_page(1), "npu": npu_page, "ethos-u": ethos_u_page, "cpu": cpu_page}

# Opens every tab in turn and records the page's scroll width, the narrowest card or figure, the cards that
# scroll sideways inside and every element whose text is cut short (CSS ellipsis) without a title naming it whole.
MEASURE = """<script>(function(){
var out={width:window.innerWidth,tabs:{}},links=document.querySelectorAll('nav a');
for(var i=0;i<links.length;i++){
 links[i].click();var id=links[i].getAttribute('href').slice(1),sec=document.getElementById('tab-'+id);
 var narrow=null,boxes=sec.querySelectorAll('.card,.figure'),cut=[],scrolled=[];
 for(var j=0;j<boxes.length;j++){var w=boxes[j].getBoundingClientRect().width;
  if(narrow===null||w<narrow.px){narrow={px:w,text:boxes[j].textContent.slice(0,80)};}
  if(boxes[j].scrollWidth>boxes[j].clientWidth+1){scrolled.push(boxes[j].textContent.slice(0,80));}}
 var all=sec.querySelectorAll('*');
 for(var k=0;k<all.length;k++){var e=all[k],s=getComputedStyle(e);
  if(s.textOverflow==='ellipsis'&&e.scrollWidth>e.clientWidth+1){
   var t=e.getAttribute('title')||(e.closest('[title]')||{getAttribute:function(){return '';}}).getAttribute('title')||'';
   if(t.indexOf(e.textContent.trim())<0){cut.push(e.textContent.slice(0,80));}}}
 out.tabs[id]={scroll:document.documentElement.scrollWidth,narrowest:narrow,untitled:cut.slice(0,5),
  scrolled:scrolled};}
var pre=document.createElement('pre');pre.id='layout';pre.textContent=JSON.stringify(out);
document.body.appendChild(pre);})();</script>"""


def _chromium() -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary:
        return binary
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed: CI must have it (.ci/run installs it from the OS packages)")
    pytest.skip("chromium is not installed (apt-get install chromium); the browser test needs it")


def measure(page: str, width: int, folder: Path) -> dict[str, Any]:
    """What ``MEASURE`` finds in ``page`` shown in a ``width`` px wide window."""
    report = folder / f"report_{width}.html"
    report.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    command = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={folder / 'profile'}",
               f"--window-size={width},900", "--dump-dom", report.as_uri()]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="layout">(.*?)</pre>', proc.stdout, flags=re.S)
    assert found, f"chromium printed no measurement (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], dict[str, Any]]:
    folder = tmp_path_factory.mktemp("layout")
    return {(family, width): measure(make(), width, folder) for family, make in PAGES.items() for width in WIDTHS}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("family", list(PAGES))
def test_every_tab_fits_the_window_with_long_names(measured: dict, family: str, width: int) -> None:
    result = measured[(family, width)]
    assert result["width"] == width
    for tab, figures in result["tabs"].items():
        assert figures["scroll"] <= width, f"{family} {tab} at {width} px: the page is {figures['scroll']} px wide"
        narrow = figures["narrowest"]
        assert narrow is None or narrow["px"] >= MIN_CARD_PX, \
            f"{family} {tab} at {width} px: a card is {narrow['px']:.0f} px wide: {narrow['text']!r}"
        assert not figures["untitled"], f"{family} {tab}: names cut short without a title: {figures['untitled']}"


@pytest.mark.parametrize("width", WIDTHS[1:])
@pytest.mark.parametrize("family", list(PAGES))
def test_the_summary_tables_fit_their_cards(measured: dict, family: str, width: int) -> None:
    """From 1400 px, every column of the Summary tab (the accuracy columns at the right too) is on screen."""
    assert not measured[(family, width)]["tabs"]["summary"]["scrolled"]


def test_the_check_fails_on_a_page_that_scrolls_sideways(tmp_path: Path) -> None:
    """Not vacuous: a card that a long name forces wide, in the old shell's grid, is caught."""
    page = mx3_page().replace("</style>", ".figures{grid-template-columns:repeat(4,max-content)}</style>")
    result = measure(page, 1000, tmp_path)
    assert result["tabs"]["summary"]["scroll"] > 1000


def test_long_names_are_in_the_pages() -> None:
    for family, make in PAGES.items():
        page = make()
        assert MODEL in page and "FusedBatchNormV3" in page, family


@pytest.mark.parametrize(("family", "kind"), [("mx3", "simulated"), ("mx3 one model", "simulated"),
                                              ("npu", "simulated"), ("ethos-u", "estimated by Vela 4.2.0"),
                                              ("cpu", "measured on AMD EPYC 7B13")])
def test_every_summary_has_headline_figures_with_their_kind(family: str, kind: str) -> None:
    summary = PAGES[family]().split('<section id="tab-summary"')[1].split("</section>")[0]
    figures = re.findall(r'<div class="figure">.*?</div></div>', summary)
    labels = [re.search(r'<span class="label">(.*?)</span>', f).group(1) for f in figures]
    assert any(label.startswith("Throughput") for label in labels) and "Accuracy" in labels, labels
    speed = [f for f, label in zip(figures, labels) if label.startswith(("Throughput", "Latency"))]
    assert speed and all(kind in f for f in speed), family
    accuracy = figures[labels.index("Accuracy")]
    assert "0.99870" in accuracy or "0.99910" in accuracy or "1.00000" in accuracy or "0.9998" in accuracy
    assert "cosine vs float" in accuracy and "SQNR" in accuracy
