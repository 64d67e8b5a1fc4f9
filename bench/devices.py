"""Measuring on a device of a Dask farm: what the farm costs per measured task, and family cpu's measuring
closed loop on a real model (docs/devices.md).

On this machine it starts a scheduler (``distributed.LocalCluster(n_workers=0)``) and one device worker as
docs/devices.md starts them (``dask worker ... --nthreads 1 --resources "bench=1"``), then, with YOLOv8n
(``nudenet/320n.onnx`` from the ``nudenet`` wheel, fetched and checked by ``bench/corpus.py``) through
family cpu:

1. the benchmark task run ``--repeat`` times here and on the device, alternating (``run --force``; the
   figure is the task's seconds from ``run --json``): the farm's overhead per measured task is the device
   task's time minus the local one's (the inputs packed, sent, the stage run in a temp folder, the
   outputs sent back and verified); the stage's own work is the same on both sides (same machine);
2. the closed loop (``target.closed_loop.enabled``) measured on the device: every candidate's fps with its spread,
   the chosen configuration's against the default configuration's, and what the loop cost; then the same
   loop again from a fresh build folder, every measurement restored from the cache.

    python bench/devices.py [--model PATH/320n.onnx] [--frames 100] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

PIPELINE = """\
accelbuild: 2
name: yolo
target: {{family: cpu{loop}}}
models:
  - name: yolov8n
    path: {model}
    input_shapes: {{images: [320, 320, 3]}}
benchmark: {{frames: {frames}, host: false, accuracy: {{samples: 2}}{device}}}
"""


def find_model(given: str | None) -> Path:
    if given:
        return Path(given)
    import corpus

    model = next(m for m in corpus.MODELS if m.name == "nudenet_320n")
    cache = Path(os.environ.get("ACCELBUILD_CORPUS_CACHE", Path.home() / ".cache/accelbuild-corpus"))
    return corpus.fetch(model, cache)


def cli(folder: Path, *args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELBUILD_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", "p.yaml", "--json", *args], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"accelbuild run failed in {folder}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def task_seconds(summary: dict[str, Any], name: str) -> float:
    return next(t["seconds"] for t in summary["tasks"] if t["name"] == name)


def write(folder: Path, model: Path, frames: int, device: str | None, loop: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "p.yaml").write_text(PIPELINE.format(
        model=model, frames=frames, device=f", device: {{farm: '{device}', resource: bench}}" if device else "",
        loop=", closed_loop: {enabled: true}" if loop else ""))


def overhead(model: Path, work: Path, farm: str, frames: int, repeat: int) -> dict[str, Any]:
    local, device = work / "local", work / "device"
    write(local, model, frames, None, False)
    write(device, model, frames, farm, False)
    cli(local)  # warm: the model imported, caches filled
    cli(device)
    seconds: dict[str, list[float]] = {"local": [], "device": []}
    for _ in range(repeat):
        seconds["local"].append(task_seconds(cli(local, "--force"), "yolo:benchmark"))
        seconds["device"].append(task_seconds(cli(device, "--force"), "yolo:benchmark"))
    per_task = [d - lo for lo, d in zip(seconds["local"], seconds["device"])]
    bench = json.loads((device / "build/yolo/benchmark.json").read_text())
    return {"frames": frames, "repeat": repeat, "seconds": seconds,
            "median_local_s": round(statistics.median(seconds["local"]), 3),
            "median_device_s": round(statistics.median(seconds["device"]), 3),
            "overhead_per_task_s": round(statistics.median(per_task), 3),
            "overhead_range_s": [round(min(per_task), 3), round(max(per_task), 3)],
            "measured_on": bench["measured_on"], "device_fps": bench["fps"]}


def closed_loop(model: Path, work: Path, farm: str, frames: int) -> dict[str, Any]:
    folder = work / "loop"
    write(folder, model, frames, farm, True)
    started = time.monotonic()
    summary = cli(folder)
    first_s = time.monotonic() - started
    record = json.loads((folder / "build/yolo/yolov8n/closed_loop.json").read_text())
    (folder / "build").rename(folder / "first")
    (folder / ".accelbuild" / "doit.db").unlink(missing_ok=True)
    started = time.monotonic()
    cli(folder)  # the whole map task restored from the cache
    restore_s = time.monotonic() - started
    return {"record": record, "build_s": round(first_s, 1), "map_task_s": task_seconds(summary, "yolo:yolov8n:map"),
            "rebuild_from_cache_s": round(restore_s, 1)}


def main() -> int:
    import distributed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="YOLOv8n ONNX (nudenet's 320n.onnx); fetched from its wheel if absent")
    parser.add_argument("--frames", type=int, default=100, help="benchmark.frames (timed frames per measurement)")
    parser.add_argument("--repeat", type=int, default=3, help="benchmark tasks per side for the overhead")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = find_model(args.model).resolve()
    with tempfile.TemporaryDirectory() as tmp, \
            distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=":0") as scheduler, \
            distributed.Client(scheduler.scheduler_address, set_as_default=False) as client:
        worker = subprocess.Popen([str(Path(sys.executable).with_name("dask")), "worker", scheduler.scheduler_address,
                                   "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1", "--resources",
                                   "bench=1"], env={**os.environ, "PYTHONPATH": str(REPO)},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            client.wait_for_workers(1, timeout=120)
            farm = scheduler.scheduler_address.replace("tcp://", "dask://")
            figures = {"cpus": os.cpu_count(), "load_before": [round(x, 1) for x in os.getloadavg()],
                       "overhead": overhead(model, Path(tmp), farm, args.frames, args.repeat),
                       "closed_loop": closed_loop(model, Path(tmp), farm, args.frames),
                       "load_after": [round(x, 1) for x in os.getloadavg()]}
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    o, loop = figures["overhead"], figures["closed_loop"]
    record = loop["record"]
    print(f"{figures['cpus']} CPU(s); load average {figures['load_before']} before, {figures['load_after']} after")
    print(f"benchmark task, YOLOv8n, {o['frames']} frames, median of {o['repeat']}: here {o['median_local_s']:.2f} s, "
          f"on the device {o['median_device_s']:.2f} s: farm overhead {o['overhead_per_task_s']:+.2f} s per task "
          f"(range {o['overhead_range_s'][0]:+.2f}..{o['overhead_range_s'][1]:+.2f} s)")
    print(f"closed loop on device bench, {len(record['candidates'])} candidates, {record['frames']} frames each "
          f"(fps = 1000 / median latency; spread: fps at the quartile latencies):")
    for row in sorted(record["candidates"], key=lambda r: r["latency_ms"]):
        print(f"  {row['label']:<28} {row['fps']:8.2f} FPS ({row['fps_spread'][0]:.2f}..{row['fps_spread'][1]:.2f})")
    c, d = record["chosen"], record["default"]
    print(f"  chosen  {c['label']}: {c['fps']:.2f} FPS ({c['fps_spread'][0]:.2f}..{c['fps_spread'][1]:.2f})")
    print(f"  default {d['label']}: {d['fps']:.2f} FPS ({d['fps_spread'][0]:.2f}..{d['fps_spread'][1]:.2f})"
          f"{' (a tie with the chosen one)' if d['tie_with_chosen'] else ''}; ties: {', '.join(record['ties']) or 'none'}")
    cost = record["cost"]
    print(f"  cost: {cost['measured']} measured in {cost['measurement_seconds']:.1f} s of device time, loop "
          f"{cost['loop_seconds']:.1f} s, map task {loop['map_task_s']:.1f} s, whole build {loop['build_s']:.1f} s; "
          f"again from the cache {loop['rebuild_from_cache_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
