"""The report shell (``html``): page, CSS, cards, tables and SVG helpers every family's report.html is drawn
with. Each family's tabs live in its own package: ``accelbuild.targets.mx3.report`` (with
``report_sample.sample_data``, realistic deterministic data for tests and for looking at the page),
``accelbuild.targets.npu.report``, ``accelbuild.targets.ethos_u.report``.
"""
