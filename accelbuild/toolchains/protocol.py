"""Running a family's driver script in its toolchain: a request file in, a response file out (protocol 1).

The driver is a Python file of the family (standard library, numpy and the vendor SDK only: it never imports
accelbuild) with a mapping ``ACTIONS = {"name": function}``; each function takes the request (a JSON object)
and returns a JSON object. ``toolchain_runtime.py`` loads it in the toolchain's interpreter and writes::

    {"protocol": 1, "ok": true, "result": {...}}
    {"protocol": 1, "ok": false, "refusal": "<the vendor tool's own words>"}   (raise Refusal in the driver)
    {"protocol": 1, "ok": false, "error": "<traceback>"}                       (anything else raised)

A refusal is the vendor's verdict on valid input (exit 1 with its words); an error is a failure of the driver
or the toolchain (exit 1 with the traceback's last lines and the log's path). Everything the driver and the SDK
print goes to ``driver.log`` in the work folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from accelbuild.errors import StageError
from accelbuild.toolchains.environment import Environment
from accelbuild.util.files import write_json_atomic

PROTOCOL = 1
RUNTIME = Path(__file__).with_name("toolchain_runtime.py")
LOG = "driver.log"


class VendorRefusal(StageError):
    """The vendor tool refused the model: its own message, exit 1."""


def run_driver(env: Environment, driver: Path, action: str, request: dict[str, Any], workdir: Path,
               timeout: float | None = None) -> dict[str, Any]:
    """Run ``ACTIONS[action](request)`` of ``driver`` in ``env``'s interpreter, with ``workdir`` as its folder."""
    workdir.mkdir(parents=True, exist_ok=True)
    request_path, response_path = workdir / "request.json", workdir / "response.json"
    write_json_atomic(request_path, {**request, "protocol": PROTOCOL, "action": action}, durable=False)
    response_path.unlink(missing_ok=True)
    with open(workdir / LOG, "ab") as log_file:
        try:
            done = subprocess.run([str(env.python), "-I", str(RUNTIME), str(driver), str(request_path),
                                   str(response_path)], cwd=workdir, stdout=log_file, stderr=subprocess.STDOUT,
                                  env=_environment(), timeout=timeout)
        except subprocess.TimeoutExpired:
            raise StageError(f"toolchain {env.name}: {action} took longer than {timeout:.0f} s "
                             f"(log: {workdir / LOG})") from None
    try:
        response = json.loads(response_path.read_text())
    except (OSError, ValueError):
        raise StageError(f"toolchain {env.name}: {action} {_ended(done.returncode)} and gave no answer; the last "
                         f"lines of its log ({workdir / LOG}):\n{_tail(workdir / LOG)}") from None
    if response.get("ok"):
        return dict(response["result"])
    if "refusal" in response:
        raise VendorRefusal(f"{env.name}: {response['refusal']}")
    raise StageError(f"toolchain {env.name}: {action} failed in the driver:\n{_tail_text(response.get('error', ''))}"
                     f"\n(log: {workdir / LOG})")


@contextlib.contextmanager
def workspace(prefix: str) -> Iterator[Path]:
    """A temporary folder for a driver's files, removed when the stage succeeds and kept when it fails, so the
    driver.log a failure message names is still there to read."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def write_frames(folder: Path, feeds: list[dict[str, np.ndarray]], order: list[str]) -> list[list[str]]:
    """Each frame's inputs as ``.npy`` files in input order (how drivers take frames): their paths, per frame."""
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i, feed in enumerate(feeds):
        frame = []
        for k, name in enumerate(order):
            path = folder / f"frame_{i:05d}_in{k}.npy"
            np.save(path, np.ascontiguousarray(feed[name]))
            frame.append(str(path))
        files.append(frame)
    return files


def read_outputs(paths: list[str]) -> list[list[np.ndarray]]:
    """The outputs a driver saved per frame (``np.savez`` of them in order: ``arr_0``, ``arr_1``, ...)."""
    outputs = []
    for path in paths:
        with np.load(path) as npz:
            outputs.append([npz[k] for k in sorted(npz.files, key=lambda k: int(k.split("_")[1]))])
    return outputs


def _ended(code: int) -> str:
    """How the driver's process ended: a negative code is the signal that stopped it (the vendor library aborted)."""
    if code < 0:
        try:
            return f"was stopped by signal {-code} ({signal.Signals(-code).name}: the vendor library crashed)"
        except ValueError:
            return f"was stopped by signal {-code}"
    return f"ended with exit code {code}"


def _environment() -> dict[str, str]:
    """This process's environment without what would make the toolchain's Python read accelbuild's packages."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    env["PYTHONHASHSEED"] = "0"
    return env


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return _tail_text(path.read_text(errors="replace"), lines)
    except OSError:
        return "(no log)"


def _tail_text(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
