"""report.html: structure, self-containedness, determinism, escaping, the same grid as the terminal view,
and a real browser (headless Chromium) drawing something that is not blank on each tab."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from accelbuild.report.html import SIMULATED
from accelbuild.targets.mx3 import report as report_html
from accelbuild.targets.mx3.mapper.view import ROW, SHADES, shade
from accelbuild.targets.mx3.report import LEVELS, MAX_TIMELINE_LAYER_TRACKS, TABS, render_report
from accelbuild.targets.mx3.report_sample import sample_data

from conftest import run_cli, write

VOID = {"meta", "br", "hr", "img", "input", "link", "wbr"}
EVIL = '<script>alert("x")</script>'


@pytest.fixture(scope="module")
def page() -> str:
    return render_report(sample_data())


# ------------------------------------------------------------------------------------- structure

def test_all_five_tabs_are_present_in_order(page: str) -> None:
    assert [title for _, title in TABS] == ["Summary", "Temporal statistics", "Layer details", "Timeline",
                                            "Utilisation"]
    positions = [page.index(f'<section id="tab-{tab_id}"') for tab_id, _ in TABS]
    assert positions == sorted(positions)
    for tab_id, title in TABS:
        assert f'<a href="#{tab_id}">{title}</a>' in page


def test_each_tab_has_its_chart(page: str) -> None:
    sections = _sections(page)
    assert 'aria-label="throughput per stage"' in sections["summary"]
    assert "<polyline" in sections["temporal"] and "bandwidth (GB/s)" in sections["temporal"]
    assert sections["layers"].count("<tr><td") == len(sample_data()["timing"]["layers"])
    assert 'aria-label="timeline"' in sections["timeline"] and "time (µs)" in sections["timeline"]
    assert sections["utilisation"].count('aria-label="core utilisation of chip') == 2


def test_summary_figures_and_tables(page: str) -> None:
    data = sample_data()
    summary = _sections(page)["summary"]
    bench = data["benchmark"]
    assert f"{bench['fps']:,.1f}" in summary
    for model in bench["models"]:  # each model's end-to-end figures on its own card
        assert f"end to end {model['end_to_end']['fps']:,.1f} FPS" in summary and "(host post-bound)" in summary
        assert f"<b>{model['name']}</b>" in summary
        assert f"{model['accuracy']['cosine']:.6f}" in summary
        assert f"{model['first_frame_latency_ms']:.3f}" in summary
    for entry in bench["agreement"]:                                     # cost model vs simulation, per model
        assert f"{entry['cost_model']['fps']:,.1f}" in summary
    assert f"{bench['host']['post_ms']:.3f} ms" in summary


def test_simulated_figures_say_so(page: str) -> None:
    assert f'<span class="badge">{SIMULATED}</span>' in page
    figures = re.findall(r'<div class="figure">.*?</div></div>', _sections(page)["summary"])
    simulated = [f for f in figures if "Chips" not in f]
    assert len(simulated) == 4 and all('class="tag sim"' in f for f in simulated)  # 2 models, together, accuracy
    measured = copy.deepcopy(sample_data())
    measured["simulated"] = measured["benchmark"]["simulated"] = False
    assert SIMULATED not in render_report(measured).replace(f'title="{SIMULATED}"', "")


def test_page_is_self_contained(page: str) -> None:
    lowered = page.lower()
    for needle in ("http://", "https://", "<script src", "<link", "@import", "url(", "<img", "<iframe",
                   " src=", "<object", "<embed", "fonts.g"):
        assert needle not in lowered, needle
    assert lowered.count("<script") == 1 and lowered.count("<style") == 1


def test_html_is_well_formed(page: str) -> None:
    checker = _TagBalance()
    checker.feed(page)
    checker.close()
    assert checker.errors == []
    assert checker.stack == []
    assert page.startswith("<!DOCTYPE html>\n<html")
    assert {"html", "head", "body", "header", "nav", "main", "section", "table", "svg", "rect", "text"} <= checker.seen


def test_same_data_gives_the_same_bytes() -> None:
    first = render_report(sample_data()).encode()
    second = render_report(copy.deepcopy(sample_data())).encode()
    assert first == second
    assert sample_data(40, 2) == sample_data(40, 2) and sample_data(40, 2) != sample_data(41, 2)
    assert render_report(json.loads(json.dumps(sample_data()))).encode() == first   # as read from JSON


def test_every_string_from_the_data_is_escaped() -> None:
    data = _renamed(sample_data(), "det", EVIL)
    data["pipeline"] = 'p"&<b>'
    data["chip_gen"] = "<i>mx3</i>"
    page = render_report(data)
    assert "alert(" in page                                    # the name is there...
    assert "<script>alert" not in page                         # ...but never as markup
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert page.count("<script") == 1
    assert "<b>p" not in page and "p&quot;&amp;&lt;b&gt;" in page
    assert "<i>mx3" not in page
    checker = _TagBalance()
    checker.feed(page)
    assert checker.errors == [] and checker.stack == []


def test_large_models_keep_the_page_sane() -> None:
    data = sample_data(layers=400, chips=16)
    page = render_report(data)
    assert len(page) < 3_000_000
    timeline = _sections(page)["timeline"]
    hidden = 400 - MAX_TIMELINE_LAYER_TRACKS
    assert f"Showing the {MAX_TIMELINE_LAYER_TRACKS} busiest of 400 layer tracks ({hidden} hidden)" in timeline
    shown, dropped = report_html._select_tracks(data["timing"]["timeline"])
    assert dropped == hidden
    assert sum(track["kind"] == "layer" for track in shown) == MAX_TIMELINE_LAYER_TRACKS
    assert sum(track["kind"] != "layer" for track in shown) == 4 + 15          # every host track, every link
    svg = re.search(r'<svg class="chart" viewBox="0 0 (\d+) (\d+)"[^>]*aria-label="timeline"', timeline)
    assert svg and int(svg.group(1)) <= 1400 and int(svg.group(2)) < 2000


def test_missing_optional_parts_still_render() -> None:
    data = sample_data(layers=12, chips=1)
    bench = data["benchmark"]
    for key in ("host", "cost_model", "end_to_end_fps", "bottleneck"):
        bench.pop(key)
    data["timing"] = {}
    page = render_report(data)
    for tab_id, _ in TABS:
        assert f'id="tab-{tab_id}"' in page
    assert "No bandwidth data." in page and "No timeline." in page and "Host stages were not measured." in page
    assert f"{data['mapping']['models'][0]['fps']:,.1f}" in page   # cost model figures come from mapping.json


def test_benchmark_stage_shapes_render() -> None:
    """What the benchmark stage also writes: end_to_end_bound, the mapping's bottleneck, a host section with
    one side null, bandwidth series named per model or by direction."""
    data = sample_data()
    bench = data["benchmark"]
    bench["models"] = bench["models"][:1]  # one model: the end-to-end card names what bounds it
    bench.update(end_to_end_bound="accelerator", end_to_end_fps=bench["fps"],
                 bottleneck={"kind": "chip_link", "from_chip": 0, "to_chip": 1},
                 host={"pre_ms": None, "post_ms": 0.2, "measured_on": "this host, onnxruntime CPU"})
    old = data["timing"]["bandwidth"]["series"]
    data["timing"]["bandwidth"]["series"] = {"host in · det": old["host in"], "host in · cls": old["host in"],
                                             "chip 1 → host": old["host out"], "chip 0→1": old["chip 0→1"]}
    binding = bench.pop("binding")
    assert "bounded by accelerator (chip link 0 → 1)" in render_report(data)   # no simulator figure: the cost model's
    bench["binding"] = {**binding, "kind": "host_buffers", "direction": "to_host", "frames_in_flight": 4, "busy": 0.998}
    page = render_report(data)
    assert "bounded by accelerator (the host interface's buffers, chip → host (4 transfers in flight, 100% busy))" in page
    assert "Host, per frame: post-processing 0.200 ms." in page
    styles = report_html._series_styles(list(data["timing"]["bandwidth"]["series"]))
    assert list(styles.values()) == [(report_html.HOST_IN, ""), (report_html.HOST_IN, "7 4"),
                                     (report_html.HOST_OUT, ""), (report_html.LINK, "")]
    assert [report_html._series_kind(n) for n in ("host in", "host → chip 0", "host out", "chip 3 -> host",
                                                  "chip 2→3")] == ["host_in", "host_in", "host_out", "host_out",
                                                                   "chip_link"]


def test_multi_model_figures_are_per_model_and_the_combined_one_is_named(page: str) -> None:
    """A card per model; the one combined figure named for what it is; no sum of different models' frames."""
    bench = sample_data()["benchmark"]
    summary = _sections(page)["summary"]
    for model in bench["models"]:
        assert f"Throughput · {model['name']}" in summary and f"{model['fps']:,.1f}" in summary
    assert "Together · 2 models" in summary and "sets per second, one frame of each of the 2 models" in summary
    assert "sum" not in summary.replace("summary", "")
    single = sample_data()
    single["benchmark"]["models"] = single["benchmark"]["models"][:1]
    assert f"model det, {bench['frames']} frames" in _sections(render_report(single))["summary"]


def test_both_binding_resources_are_named_and_a_parting_is_explained(page: str) -> None:
    summary = _sections(page)["summary"]
    assert summary.count("Simulator's binding resource:") == summary.count("Cost-model bottleneck:") == 2
    assert "Bound by (simulator)" in summary and "100% busy" in summary
    assert "agree for every model" in summary
    data = sample_data()
    entry = data["benchmark"]["agreement"][1]
    entry.update(agree=False, effects=["the simulator is bound by chip link 0 -> 1; the cost model by layer x"])
    parted = _sections(render_report(data))["summary"]
    assert "<b>cls</b> parts from the cost model: the simulator is bound by chip link 0 -&gt; 1" in parted
    assert "agree for every model" not in parted


def test_grid_is_the_terminal_views_grid(page: str) -> None:
    """One square per core, rows of ROW, in the level mapper.view.shade gives each core."""
    mapping = sample_data()["mapping"]
    grids = re.findall(r'<svg class="grid".*?</svg>', _sections(page)["utilisation"])
    assert len(grids) == len(mapping["chips"])
    for grid, chip in zip(grids, mapping["chips"]):
        cores = chip["mac_core_utilization"] + chip["alu_core_utilization"]
        fills = re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"', grid)
        assert fills == [LEVELS[SHADES.index(shade(u))] for u in cores]
        rows = -(-len(chip["mac_core_utilization"]) // ROW) - (-len(chip["alu_core_utilization"]) // ROW)
        assert len(re.findall(r">(?:MAC|ALU) \d+<", grid)) == rows


def test_renders_a_real_mapping_json(project: Path) -> None:
    write(project / "p.yaml", "accelbuild: 1\nname: p\ntarget: {num_chips: 2}\nmodels:\n"
          "  - name: cls\n    path: models/tinycls.onnx\n")
    result = run_cli("run", "p.yaml", "--until", "map", "--state-dir", "s", cwd=project)
    assert result.code == 0, result.stderr
    data = sample_data()
    data["mapping"] = json.loads((project / "build" / "p" / "mapping.json").read_text())
    page = render_report(data)
    used = [chip for chip in data["mapping"]["chips"] if chip["mac_cores"] or chip["alu_cores"]]
    assert _sections(page)["utilisation"].count('<svg class="grid"') == len(used) >= 1
    assert "Cost-model bottleneck:" in page


# ---------------------------------------------------------------------------------------- browser

def _chromium() -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary:
        return binary
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed: CI must have it (.ci/run installs it from the OS packages)")
    pytest.skip("chromium is not installed (apt-get install chromium); the browser test needs it")


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, int, bytes]]:
    binary = _chromium()
    folder = tmp_path_factory.mktemp("report")
    report = folder / "report.html"
    report.write_text(render_report(sample_data()), encoding="utf-8")
    return {tab_id: _screenshot(binary, report, tab_id, folder) for tab_id, _ in TABS}


def _screenshot(binary: str, report: Path, tab_id: str, folder: Path) -> tuple[int, int, bytes]:
    shot = folder / f"{tab_id}.png"
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={folder / 'profile'}",
               "--window-size=1400,1000", f"--screenshot={shot}", f"{report.as_uri()}#{tab_id}"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert shot.is_file(), f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return read_png(shot)


@pytest.mark.parametrize("tab_id", [tab_id for tab_id, _ in TABS])
def test_browser_draws_each_tab(screenshots: dict[str, tuple[int, int, bytes]], tab_id: str) -> None:
    width, height, pixels = screenshots[tab_id]
    assert (width, height) == (1400, 1000)
    drawn, colours = _drawn(pixels, width * height)
    assert drawn >= 0.03, f"screenshot is (nearly) one colour: {drawn:.1%} differs from the background"
    assert colours > 20, f"screenshot has only {colours} colours: too few for a drawn report"
    assert _pixel(pixels, width, 5, 5) == (0x1F, 0x29, 0x37)         # the header bar (checks the decoder too)
    assert _pixel(pixels, width, 5, 995) == (0xF4, 0xF5, 0xF7)       # the page background


def test_blank_page_fails_the_check(tmp_path: Path) -> None:
    """The blank check is not vacuous: an empty page in the same browser fails it."""
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    width, height, pixels = _screenshot(_chromium(), blank, "summary", tmp_path)
    drawn, colours = _drawn(pixels, width * height)
    assert drawn < 0.03 and colours <= 20


def _drawn(pixels: bytes, count: int) -> tuple[float, int]:
    """Share of pixels that differ from the most common colour, and how many colours there are."""
    colours = Counter(pixels[i:i + 3] for i in range(0, len(pixels), 3))
    return 1 - colours.most_common(1)[0][1] / count, len(colours)


def _pixel(pixels: bytes, width: int, x: int, y: int) -> tuple[int, int, int]:
    at = (y * width + x) * 3
    return pixels[at], pixels[at + 1], pixels[at + 2]


def test_browser_opens_the_tab_named_in_the_fragment(screenshots: dict[str, tuple[int, int, bytes]]) -> None:
    """The tab script ran: each fragment shows a different picture."""
    assert len({pixels for _, _, pixels in screenshots.values()}) == len(TABS)


# ----------------------------------------------------------------------------------------- helpers

def _sections(page: str) -> dict[str, str]:
    found = re.findall(r'<section id="tab-(\w+)".*?</section>', page, flags=re.S)
    parts = re.split(r'(?=<section id="tab-)', page)[1:]
    assert len(found) == len(parts) == len(TABS)
    return dict(zip(found, parts))


def _renamed(data: dict, old: str, new: str) -> dict:
    """The data with model ``old`` called ``new`` everywhere a model name appears."""
    data = copy.deepcopy(data)
    records = (data["benchmark"]["models"] + data["mapping"]["models"] + data["mapping"]["layers"]
               + data["timing"]["layers"])
    for record in records:
        for key in ("name", "model"):
            if record.get(key) == old:
                record[key] = new
    for track in data["timing"]["timeline"]:
        track["track"] = track["track"].replace(old, new)
    data["mapping"]["bottleneck"]["model"] = new
    return data


class _TagBalance(HTMLParser):
    """Every element that is opened is closed, in order (void elements excepted)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.seen: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.seen.add(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.seen.add(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()


def read_png(path: Path) -> tuple[int, int, bytes]:
    """Width, height and RGB bytes of an 8-bit RGB or RGBA, non-interlaced PNG (standard library only)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    header, compressed, pos = None, [], 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            compressed.append(chunk)
    assert header is not None
    width, height, depth, colour_type, _, _, interlace = header
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, f"unsupported PNG {header}"
    channels = 3 if colour_type == 2 else 4
    rows = _unfilter(zlib.decompress(b"".join(compressed)), width * channels, height, channels)
    if channels == 4:
        rows = bytes(b for i in range(0, len(rows), 4) for b in rows[i:i + 3])
    return width, height, rows


def _unfilter(raw: bytes, stride: int, height: int, bpp: int) -> bytes:
    out = bytearray()
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            _paeth(line, previous, bpp)
        else:
            assert kind == 0, f"bad PNG filter {kind}"
        out += line
        previous = line
    return bytes(out)


def _paeth(line: bytearray, previous: bytearray, bpp: int) -> None:
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b = previous[i]
        c = previous[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        predictor = a if pa <= pb and pa <= pc else b if pb <= pc else c
        line[i] = (line[i] + predictor) & 0xFF


def test_the_temporal_caption_says_which_models_are_running() -> None:
    data = sample_data()
    bandwidth = data["timing"]["bandwidth"]
    bandwidth["window_us"] = 400.0
    bandwidth["running"] = {"cls": {"from_us": None, "until_us": 120.5}, "det": {"from_us": None, "until_us": None}}
    temporal = _sections(render_report(data))["temporal"]
    assert "cls until 120.5 µs (its frames are done); det throughout" in temporal
    assert "all models running" not in temporal
    bandwidth["running"] = {"cls": {"from_us": None, "until_us": 0.0}, "det": {"from_us": None, "until_us": None}}
    assert "cls not running (its frames are done); det throughout" in _sections(render_report(data))["temporal"]
    bandwidth["running"] = {name: {"from_us": None, "until_us": None} for name in ("cls", "det")}
    assert "all models running" in _sections(render_report(data))["temporal"]
