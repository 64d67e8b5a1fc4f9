"""Measuring on devices: ``benchmark.device: {farm: dask://HOST:PORT, resource: NAME}`` (or ``run --device-farm``).

A device is a Dask worker started with ``--resources "NAME=1"`` and the family's runtime installed
(docs/devices.md). Before anything is built, ``resolve`` reaches each farm, finds the workers that carry
each pipeline's resource and asks them what they are (the family's ``device_runtime()``: the machine and its
runtime); that description goes into the pipeline's spec, so the benchmark task's key holds the device's
identity: another device re-measures, the same one restores from the cache. ``run_job`` sends the
benchmark task there with the resource as a hard restriction. A device worker that dies mid-measurement
is retried by the scheduler on another worker with the resource (or the same one, brought back by its
nanny); when none is left for ``ACCELBUILD_DEVICE_WAIT`` seconds (60 by default) the task fails naming
the device. Outputs come back by content and are published as any task's, so nothing half-written is kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pickle
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbuild.engine import dask_executor, shipping
from accelbuild.errors import StageError, UserError

if TYPE_CHECKING:
    from accelbuild.config.spec import PipelineSpec
    from accelbuild.engine.plan import Job

log = logging.getLogger(__name__)

WAIT_ENV = "ACCELBUILD_DEVICE_WAIT"
POLL = 1.0  # seconds between looks at the farm while a measurement runs

_FARMS: dict[tuple[int, str], dask_executor.DaskExecutor] = {}  # (process, farm address) -> connection


def farm(address: str) -> dask_executor.DaskExecutor:
    """This process's connection to the farm at ``address`` (opened once per process: ``-j N`` workers each
    open their own)."""
    key = (os.getpid(), address)
    if key not in _FARMS:
        _FARMS[key] = dask_executor.DaskExecutor.connect(address)
    return _FARMS[key]


@contextlib.contextmanager
def farms_open() -> Iterator[None]:
    """Close this process's farm connections when the run ends."""
    try:
        yield
    finally:
        for key in [k for k in _FARMS if k[0] == os.getpid()]:
            _FARMS.pop(key).close()


def resolve(pipelines: list[PipelineSpec], farm_override: str | None = None) -> list[PipelineSpec]:
    """The pipelines with each ``benchmark.device`` bound to its farm and the device's description (part of the
    benchmark task's key). A missing farm, an unreachable one, or no device with the resource is a
    ``UserError`` (exit 2) before anything is built."""
    found: dict[tuple[str, str, str], str] = {}
    resolved = []
    for pipeline in pipelines:
        device = pipeline.benchmark.device
        if device is None:
            resolved.append(pipeline)
            continue
        address = farm_override or device.farm
        if address is None:
            raise UserError(f"{pipeline.source.file}: benchmark.device (resource {device.resource}) names no farm: "
                            "set benchmark.device.farm or run with --device-farm dask://HOST:PORT")
        family = pipeline.target.family
        ident = (address, device.resource, family)
        if ident not in found:
            found[ident] = describe_device(farm(address), device.resource, family)
            log.info("device %s on %s: %s", device.resource, address, found[ident])
        bound = replace(device, farm=address, machine=found[ident])
        resolved.append(replace(pipeline, benchmark=replace(pipeline.benchmark, device=bound)))
    return resolved


def tagged_workers(ex: dask_executor.DaskExecutor, resource: str) -> list[str]:
    """The live workers of the farm that advertise ``resource`` and run this build's accelbuild."""
    info = ex.client.scheduler_info(n_workers=-1)["workers"]
    accepted = set(ex.workers())
    return sorted(a for a, w in info.items() if a in accepted and (w.get("resources") or {}).get(resource, 0) > 0)


def describe_device(ex: dask_executor.DaskExecutor, resource: str, family: str) -> str:
    """What the workers with ``resource`` are (the family's ``device_runtime()`` run there); they must agree."""
    workers = tagged_workers(ex, resource)
    if not workers:
        offered = sorted({r for w in ex.client.scheduler_info(n_workers=-1)["workers"].values()
                          for r in (w.get("resources") or {})})
        raise UserError(f"{ex.address}: no device with resource {resource} (resources offered: "
                        f"{', '.join(offered) or 'none'}); start one with: dask worker "
                        f"tcp://{ex.address[len(dask_executor.SCHEME):]} --resources \"{resource}=1\"")
    answers = ex.client.run(_device_runtime, family, workers=workers, on_error="return")
    described = {}
    for address in workers:
        answer = answers.get(address, RuntimeError("no answer"))
        if isinstance(answer, BaseException):
            raise UserError(f"device {resource} ({address}) cannot run family {family}'s builds: {answer}")
        described[address] = answer
    if len(set(described.values())) > 1:
        listed = "; ".join(f"{a}: {d}" for a, d in sorted(described.items()))
        raise UserError(f"device {resource}: its workers are different machines ({listed}); give each kind of "
                        "machine a resource name of its own")
    return next(iter(described.values()))


def _device_runtime(family: str) -> str:
    """Worker side: the family's description of this machine and its runtime."""
    from accelbuild.families import get_target

    return str(get_target(family).device_runtime())


def run_job(job: Job, staged: dict[str, Path]) -> None:
    """Run ``job`` (a benchmark task) on its device; its outputs land (verified) in ``staged``."""
    assert job.device is not None
    address, resource = job.device
    ex = farm(address)
    future = ex.client.submit(shipping.run_parcel, shipping.pack(job), ex.identity, pure=False, retries=1,
                              key=f"accelbuild-{job.stage}-{resource}-{uuid.uuid4().hex}", resources={resource: 1})
    try:
        shipping.unpack(_wait(ex, future, job.name, resource), staged)
    finally:
        future.release()


class _Lost(Exception):
    """A task on the device was cancelled while the scheduler is up: the device's worker died and took the
    data sent to it (which Dask cannot recompute)."""


class DeviceFanOut:
    """``ctx.fan_out`` of a stage whose own work measures (a measured closed loop): each item runs on the device,
    ``shared`` sent to the device's workers once; results in the order of the items. When the device's worker
    dies, the data goes to the device again (once it is back, or to another worker with its resource) and
    the items not yet measured are measured there, up to ``RESENDS`` times."""

    RESENDS = 3

    def __init__(self, address: str, resource: str) -> None:
        self.address = address
        self.device = resource

    def map(self, fn: Callable[[Any, Any], Any], items: Sequence[Any], shared: Any) -> Iterator[Any]:
        if not items:
            return
        ex = farm(self.address)
        what = f"{fn.__name__} on the device"
        remaining, resends = list(items), 0
        while remaining:
            [shared_future] = ex.client.scatter([shared], workers=_await_device(ex, what, self.device),
                                                broadcast=True, hash=False)
            futures = [ex.client.submit(dask_executor._verified_call, fn, item, shared_future, ex.identity,
                                        pure=False, retries=1, resources={self.device: 1},
                                        key=f"accelbuild-{fn.__name__}-{self.device}-{uuid.uuid4().hex}")
                       for item in remaining]
            done = 0
            try:
                for future in futures:
                    data, digest = _wait(ex, future, what, self.device)
                    if hashlib.sha256(data).hexdigest() != digest:
                        raise OSError(f"a result of {fn.__name__} arrived altered from device {self.device}")
                    done += 1
                    yield pickle.loads(data)
            except _Lost:
                resends += 1
                if resends > self.RESENDS:
                    raise StageError(f"{what}: device {self.device} on {self.address}: its workers died "
                                     f"{resends} times mid-measurement") from None
                log.warning("device %s: its worker died mid-measurement; measuring the %d remaining item(s) "
                            "again", self.device, len(remaining) - done)
            finally:
                ex.client.cancel([f for f in futures if not f.done()])
                for f in futures:
                    f.release()
                shared_future.release()
            remaining = remaining[done:]


def _device_wait() -> float:
    return float(os.environ.get(WAIT_ENV) or 60)


def _await_device(ex: dask_executor.DaskExecutor, what: str, resource: str) -> list[str]:
    """The workers with ``resource``, waiting up to ``ACCELBUILD_DEVICE_WAIT`` seconds for one to (re)join."""
    wait = _device_wait()
    deadline = time.monotonic() + wait
    while not (workers := tagged_workers(ex, resource)):
        if time.monotonic() > deadline:
            raise StageError(f"{what}: device {resource} on {ex.address}: no worker with resource {resource} is "
                             f"left (waited {wait:g} s)")
        time.sleep(POLL)
    return workers


def _wait(ex: dask_executor.DaskExecutor, future: Any, what: str, resource: str) -> Any:
    """The task's result; a clear error naming the device when it cannot be measured (``_Lost`` when the task
    was cancelled by the loss of its worker while the scheduler is up)."""
    from distributed.client import FutureCancelledError

    wait = _device_wait()
    gone_since: float | None = None
    on = f"device {resource} on {ex.address}"
    while True:
        try:  # a killed worker's task is rescheduled by the scheduler; KilledWorker past its allowed failures
            if future.status == "cancelled" and ex.client.status == "running":
                raise _Lost(what)
            return ex._result(future, f"{what} ({on})", POLL)
        except TimeoutError:
            pass
        except StageError as exc:
            if isinstance(exc.__context__, FutureCancelledError) and ex.client.status == "running":
                raise _Lost(what) from None
            raise
        if tagged_workers(ex, resource):
            gone_since = None
            continue
        gone_since = gone_since or time.monotonic()
        if time.monotonic() - gone_since > wait:
            ex.client.cancel([future])
            raise StageError(f"{what}: {on}: no worker with resource {resource} is left (its worker left "
                             f"mid-measurement or never started; waited {wait:g} s); nothing was kept")
