"""Reports of a build: the benchmark page ``report.html`` (``html.render_report``).

``render_report`` takes the report data dict the benchmark stage assembles (benchmark.json, mapping.json
and the simulator's timing) and returns one self-contained HTML document: inline CSS, a few lines of
inline JavaScript for tabs and sorting, and charts as inline SVG drawn in Python. ``sample.sample_data``
builds realistic, deterministic data of the same shape for tests and for looking at the page.
"""
