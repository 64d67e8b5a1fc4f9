"""Family ``npu``: sequential integer NPUs with host offload (TI TIDL, SiMa.ai MLSoC, Horizon BPUs), modelled.

The library core, one job per module (docs/npu.md has the whole picture and every reported field):

- ``hardware``: the profile files (``profiles/*.yaml``) as a frozen, typed ``NpuHardware``;
- ``graph_info``: shapes, op facts and Q/DQ ownership of an ONNX model (float or QDQ), computed once;
- ``support``: operator-support predicates ``(ok, reason)`` (user messages and docs/supported_ops.md);
- ``partition``: NPU / host assignment, fewest crossings, standalone subgraph models, partition.json;
- ``schedule``: the one cost model, tiling, fusion, batch; schedule.json;
- ``timeline``: the unit-timeline simulator (steady-state FPS, latency, DDR bandwidth over a frame).
"""
