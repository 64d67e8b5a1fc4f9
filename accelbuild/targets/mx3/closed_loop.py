"""Closed-loop compilation: assemble every candidate split of an effort-hard mapping, simulate each,
keep the fastest (as the vendor's closed-loop script does on real chips). The fastest measured split is
the program to ship; the cost model's first choice (split 0) is kept beside it when it differs.

Each split is its own cached unit (key: the inputs of the assemble stage, the split, the simulation
settings), so a re-run recompiles nothing. Splits run ``jobs`` at a time in worker processes, or on the
build's executor (a Dask cluster) when it has one, the models travelling by content; a progress bar shows
on a terminal and stays quiet otherwise.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from accelbuild import __version__
from accelbuild.stages.context import FanOut, SplitCache
from accelbuild.targets import end_to_end
from accelbuild.targets.mx3.assembler import ModelSource, build_dfp
from accelbuild.targets.mx3.dfp import dfp_bytes
from accelbuild.targets.mx3.hardware import HardwareProfile
from accelbuild.targets.mx3.mapper import plan, search
from accelbuild.util.files import json_bytes, json_digest, write_bytes_atomic, write_json_atomic

log = logging.getLogger(__name__)
CHOICE = "cost_model_choice.dfp"


@dataclass(frozen=True)
class SplitJob:
    """One split to compile and simulate; picklable for the worker pool."""

    index: int
    key: str
    record: dict[str, Any]       # mapping.json of this split
    models: tuple[ModelSource, ...]
    profile: dict[str, Any]  # the merged hardware profile
    input_format: str
    output_format: str
    share_input: bool
    sim: dict[str, Any] | None
    frames: int
    seed: int


def split_records(models: list[plan.ModelInput], mapping: dict[str, Any], hw: HardwareProfile,
                  num_chips: int, share_input: bool) -> list[dict[str, Any]]:
    """A full mapping record for every ranked candidate of the hard mapper, in rank order."""
    layers, traffic, _ = plan.load_layers(models, hw)
    traffic = plan.cost.Traffic(traffic.input_bytes, traffic.output_bytes, share_input)
    request = search.Request(num_chips, "hard", None, traffic)
    records = []
    for entry in mapping["candidates"]:
        candidate = search.candidate(layers, hw, request, tuple(entry["boundaries"]), entry["strategy"], None)
        if candidate is None:
            continue
        one = plan.Mapping(layers, [candidate], num_chips, request)
        records.append(plan.record(one, hw, "hard"))
    return records


def compile_and_simulate(job: SplitJob) -> tuple[int, bytes, dict[str, Any]]:
    """Worker: the split's DFP bytes and its simulated figures."""
    from accelbuild.targets.mx3.dfp.reader import parse_dfp
    from accelbuild.targets.mx3.hardware import hardware_from_dict
    from accelbuild.targets.mx3.sim import timing
    from accelbuild.targets.mx3.sim.program import program_of

    dfp = build_dfp(list(job.models), job.record, hardware_from_dict(job.profile), job.input_format,
                    job.output_format, job.sim, share_input=job.share_input)
    data = dfp_bytes(dfp)
    program = program_of(parse_dfp(data, f"split {job.index}"), f"split {job.index}", graphs=False)  # as shipped
    result = timing.simulate(program, job.frames, seed=job.seed)
    fps, fps_is = end_to_end.combined_fps(list(result.model_fps.values()),
                                          "shared_input" if job.share_input else "concurrent")
    figures = {"fps": round(fps, 2), "fps_is": fps_is,
               "model_fps": {k: round(v, 2) for k, v in result.model_fps.items()},
               "latency_ms": round(max(result.steady_latency_ms.values()), 4),
               "model_latency_ms": {k: round(v, 4) for k, v in result.steady_latency_ms.items()},
               "binding": result.binding}
    return job.index, data, figures


def compile_shipped(job: SplitJob, models: dict[str, bytes]) -> tuple[int, bytes, dict[str, Any]]:
    """``compile_and_simulate`` on a machine without this filesystem: the models come as bytes (by name)."""
    with tempfile.TemporaryDirectory() as tmp:
        local = []
        for source in job.models:
            path = Path(tmp) / source.name / "quantized.onnx"
            path.parent.mkdir()
            path.write_bytes(models[source.name])
            local.append(replace(source, quantized=path))
        return compile_and_simulate(replace(job, models=tuple(local)))


def run(jobs: list[SplitJob], workers: int, cache: SplitCache | None,
        cluster: FanOut | None = None) -> list[tuple[bytes, dict[str, Any]]]:
    """Every split's (DFP bytes, figures), from the cache where possible, the rest computed in parallel: on
    ``cluster`` (the build's executor, ``ctx.fan_out``) when there is one, else in ``workers`` processes."""
    results: dict[int, tuple[bytes, dict[str, Any]]] = {}
    todo = []
    for job in jobs:
        hit = _cached(cache, job.key)
        if hit is not None:
            results[job.index] = hit
        else:
            todo.append(job)
    log.info("closed loop: %d split(s), %d from the cache%s", len(jobs), len(jobs) - len(todo),
             f", the rest on {cluster.address}" if cluster is not None and todo else "")
    keys = {job.index: job.key for job in todo}
    with _progress(len(todo)) as advance:
        def done(index: int, data: bytes, figures: dict[str, Any]) -> None:
            results[index] = (data, figures)
            _store(cache, keys[index], data, figures)  # here while the workers go on with the next splits
            advance()

        if cluster is not None and todo:
            models = {m.name: Path(m.quantized).read_bytes() for m in todo[0].models}
            for index, data, figures in cluster.map(compile_shipped, todo, models):
                done(index, data, figures)
        elif workers > 1 and len(todo) > 1:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                for index, data, figures in pool.map(compile_and_simulate, todo):
                    done(index, data, figures)
        else:
            for job in todo:
                done(*compile_and_simulate(job))
    return [results[job.index] for job in jobs]


def split_key(input_digest: str, record: dict[str, Any], job_settings: dict[str, Any], code: str | None) -> str:
    """The cache key of one split: the stage's inputs, the split, the settings and the digest of the mx3 code
    that compiles and times it (``code``; an edit to the assembler or the simulator must not reuse old
    figures)."""
    return json_digest({"kind": "closed_loop_split", "inputs": input_digest, "boundaries": record["boundaries"],
                        "strategy": record["strategy"], "settings": job_settings, "version": __version__,
                        "code": code})


def choose(figures: list[dict[str, Any]], prioritize: int, model_names: list[str]) -> int:
    """Index of the best split: highest combined FPS (the slowest model's rate, as benchmark.json's fps), or
    highest FPS of model ``prioritize``; then the models' rates together; remaining ties go to the cost
    model's higher-ranked split."""
    def score(i: int) -> tuple[float, float]:
        f = figures[i]
        total = sum(f["model_fps"].values())
        return (f["fps"] if prioritize < 0 else f["model_fps"][model_names[prioritize]]), total
    return max(range(len(figures)), key=lambda i: (*score(i), -i))


@dataclass(frozen=True)
class Files:
    """Where the closed loop's programs went: the one to ship and the cost model's first choice."""

    shipped: str       # <dfp_name>: the best measured split, the same bytes as best_split.dfp
    cost_model: str    # cost_model_choice.dfp, or <dfp_name> when the best split is the cost model's choice


def record(figures: list[dict[str, Any]], records: list[dict[str, Any]], best: int, prioritize: int,
           frames: int, files: Files) -> dict[str, Any]:
    """closed_loop.json. Split 0 is the cost model's first choice."""
    splits = [{"id": i, **f, "cost_model_fps": r["fps"], "cost_model_latency_ms": r["latency_ms"],
               "boundaries": r["boundaries"], "strategy": r["strategy"], "num_chips": r["num_chips"]}
              for i, (f, r) in enumerate(zip(figures, records))]
    choice = figures[0]["fps"]
    return {
        "simulated": True,
        "frames": frames,
        "prioritize_model": prioritize,
        "splits": splits,
        "best": best,
        "best_fps": figures[best]["fps"],
        "cost_model_choice": 0,
        "cost_model_choice_fps": choice,
        "gain": round(figures[best]["fps"] / choice - 1.0, 4) if choice else 0.0,
        "dfp": files.shipped,
        "programs": {
            files.shipped: {"split": best, "what": "the program to ship: the best measured split",
                            "same_bytes_as": "best_split.dfp"},
            **({} if files.cost_model == files.shipped else {
                files.cost_model: {"split": 0, "what": "the cost model's first choice, measured slower"}}),
        },
    }


def write_splits(folder: Path, results: list[tuple[bytes, dict[str, Any]]]) -> None:
    """Every split's program and figures, one folder each (``splits/NN/``); not fsync'ed one by one: the build
    checks its outputs by hash (doit's values) and rebuilds any that a crash left damaged."""
    for index, (data, figures) in enumerate(results):
        write_bytes_atomic(folder / f"{index:02d}" / "split.dfp", data, durable=False)
        write_json_atomic(folder / f"{index:02d}" / "split.json", figures, durable=False)


def _cached(cache: SplitCache | None, key: str) -> tuple[bytes, dict[str, Any]] | None:
    if cache is None:
        return None
    found = cache.lookup(key)
    if found is None or set(found) != {"split.dfp", "split.json"}:
        return None
    return found["split.dfp"].read_bytes(), json.loads(found["split.json"].read_bytes())


def _store(cache: SplitCache | None, key: str, data: bytes, figures: dict[str, Any]) -> None:
    if cache is None:
        return
    cache.store(key, {"split.dfp": data, "split.json": json_bytes(figures)})


class _progress:
    """A rich progress bar on a terminal; nothing otherwise."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar = None

    def __enter__(self):
        if self.total and sys.stderr.isatty():
            from rich.progress import Progress

            self.bar = Progress(transient=True)
            self.bar.start()
            task = self.bar.add_task("closed loop: compiling and simulating splits", total=self.total)
            return lambda: self.bar.advance(task)
        return lambda: None

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
