"""The mx3 dataflow model against published MemryX MX3 figures: the mx3 part of ``bench/credibility.py``.

Each network is built by accelbuild as a user's pipeline builds it (``accelbuild run``: import, crop, weight
quantization, mapping on the 4 chips of the M.2 module, assembly, and the benchmark's timing simulation and
host timings), with the built-in profile, and its benchmark.json is read. How the published figures were
measured decides what they are compared with:

- **MemryX's ResNet-50** (the vendor's benchmark tool; the profile's calibration): the whole model on the
  chips, frames streamed. It measures the chips, so it is compared with the simulated FPS and latency.
- **Frigate's table** (Intel i7-13700 host): "Total FPS" and "Inference Time" of Frigate's MemryX detector,
  which runs the model's pre-processing (YOLOX's 4-way slicing) and post-processing (box decoding in NumPy,
  YOLO-NAS's and SSDlite's ``_post.onnx``) on the host, in Python. These are end-to-end figures, so they are
  compared with the build's end-to-end figures, the same sections cropped to the host (``crop: {auto:
  true}``) and timed in onnxruntime on this machine: ``end_to_end_fps`` (the slowest of the chips and the host
  sections) and the simulated latency plus the host pre and post times. They also bound the chips from below:
  the chips must sustain at least the published frame rate.

The free values of the profile are not fitted: only one network (ResNet-50) has a published figure of the
chips alone, and fitting chip parameters to host-bound end-to-end figures would put the host's Python time
into the chips. docs/credibility.md says so and shows every comparison.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from accelbuild.errors import AccelbuildError
from accelbuild.targets.mx3.hardware import MX3_PROFILES
from accelbuild.targets.profile_files import load_profile
from accelbuild.util.files import json_digest

BUILTIN = Path(__file__).resolve().parent.parent / "accelbuild" / "targets" / "mx3" / "profiles" / "mx3.yaml"
NUM_CHIPS = 4  # every published figure is of the 4-chip M.2 module
VENDOR = ("MemryX benchmark figure (the vendor's benchmark tool on the 4-chip M.2 module at 600 MHz, as quoted by "
          "third-party benchmarks; the profile's calibration)")
FRIGATE = ("blakeblackshear/frigate docs/docs/frigate/hardware.md @ 00d0317, section MemryX MX3 (4-chip M.2, Intel "
           "13700 host): {what}")
# network -> whether the source ran pre/post sections on the host (its figures are end to end)
NETWORKS = {"resnet50_224": False, "yolo_nas_s_320": True, "yolo_nas_s_640": True, "yolov9s_320": True,
            "yolov9s_640": True, "yolox_s_640": True, "ssdlite_mobilenetv2_320": True}


def published() -> list[tuple[str, str, float, str]]:
    """The published MX3 figures: (network, metric, value, source)."""
    found = [("resnet50_224", "fps", 1800.0, VENDOR), ("resnet50_224", "latency_ms", 3.3, VENDOR)]
    for network, latency_ms, fps in (("yolo_nas_s_320", 9, 378), ("yolo_nas_s_640", 21, 138),
                                     ("yolov9s_320", 16, 382), ("yolov9s_640", 41, 110),
                                     ("yolox_s_640", 16, 263), ("ssdlite_mobilenetv2_320", 5, 1056)):
        found.append((network, "latency_ms", float(latency_ms), FRIGATE.format(what="Inference Time, host pre/post "
                                                                                   "included; ~, approximate")))
        found.append((network, "fps", float(fps), FRIGATE.format(what="Total FPS, measured apart from latency; ~")))
    return found


def builtin_digests() -> dict[str, str]:
    """Digest of each built-in mx3-family profile as a build sees it (merged), by name."""
    return {path.stem: json_digest(load_profile(path, MX3_PROFILES)) for path in sorted(BUILTIN.parent.glob("*.yaml"))}


# ------------------------------------------------------------------------------------------------ builds
def pipeline_yaml(network: str, model: Path) -> str:
    entry: dict[str, Any] = {"path": str(model)}
    if NETWORKS[network]:
        entry["crop"] = {"auto": True}
    config = {"accelbuild": 1, "name": network, "models": [entry],
              "target": {"family": "mx3", "chip_gen": "mx3", "num_chips": NUM_CHIPS}}
    return yaml.safe_dump(config, sort_keys=False)


def build(network: str, folder: Path, work: Path) -> dict[str, Any]:
    """``accelbuild run`` of the network's pipeline with the built-in mx3 profile; its benchmark.json."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / f"{network}.yaml"
    config.write_text(pipeline_yaml(network, folder / f"{network}.onnx"))
    result = subprocess.run([sys.executable, "-m", "accelbuild.cli", "run", str(config)], cwd=work,
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise AccelbuildError(f"{network}: accelbuild run failed: {(result.stderr or result.stdout).strip()[-600:]}")
    return json.loads((work / "build" / network / "benchmark.json").read_text())


def chip_figures(bench: dict[str, Any]) -> tuple[float, float]:
    """(FPS, latency ms) of the chips alone, simulated."""
    return float(bench["fps"]), float(bench["latency_ms"])


def end_to_end_figures(bench: dict[str, Any]) -> tuple[float, float]:
    """(FPS, latency ms) with the host sections: the slowest stage's rate, and the simulated latency plus the
    host pre and post times measured on this machine."""
    host = bench.get("host") or {}
    extra = (host.get("pre_ms") or 0.0) + (host.get("post_ms") or 0.0)
    return float(bench["end_to_end_fps"]), float(bench["latency_ms"]) + extra
