"""Fetch the trained MediaPipe models of MemryX's published MX3 figures, run by ``tools/credibility.py`` (its mx3
part).

MemryX's factory-diagnostics runs name these ``tfl_real_mp_<name>``: MediaPipe's own TFLite files. The
mediapipe wheel of release 0.10.14 ships them under ``mediapipe/modules/``; this downloads that wheel with pip
(``--no-deps``, into a temporary folder: mediapipe never becomes a dependency) and copies each file out as
``<name>.tflite``. Unlike the other exporters these are the real trained models, weights included.

    python tools/networks/mediapipe_models.py OUT_DIR NAME [NAME ...]

Prints one JSON line per model: its name, file and size. Existing files are kept.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from functools import cache
from pathlib import Path

import export_cli

RELEASE = "0.10.14"
# name -> the file's path inside the wheel
NETWORKS = {
    "mp_pose_detection": "mediapipe/modules/pose_detection/pose_detection.tflite",
    "mp_pose_landmark_full": "mediapipe/modules/pose_landmark/pose_landmark_full.tflite",
    "mp_hand_recrop": "mediapipe/modules/holistic_landmark/hand_recrop.tflite",
    "mp_hand_landmark_full": "mediapipe/modules/hand_landmark/hand_landmark_full.tflite",
    "mp_hand_landmark_lite": "mediapipe/modules/hand_landmark/hand_landmark_lite.tflite",
    "mp_palm_detection_full": "mediapipe/modules/palm_detection/palm_detection_full.tflite",
    "mp_palm_detection_lite": "mediapipe/modules/palm_detection/palm_detection_lite.tflite",
    "mp_face_detection_short_range": "mediapipe/modules/face_detection/face_detection_short_range.tflite",
    "mp_face_detection_full_range_sparse": "mediapipe/modules/face_detection/face_detection_full_range_sparse.tflite",
    "mp_face_landmark": "mediapipe/modules/face_landmark/face_landmark.tflite",
    "mp_iris_landmark": "mediapipe/modules/iris_landmark/iris_landmark.tflite",
    "mp_selfie_segmentation": "mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",
    "mp_selfie_segmentation_landscape": "mediapipe/modules/selfie_segmentation/selfie_segmentation_landscape.tflite",
}


@cache
def wheel() -> Path:
    """mediapipe's wheel of ``RELEASE`` for this machine, downloaded into a temporary folder (removed at exit)."""
    folder = tempfile.mkdtemp(prefix="mediapipe-wheel-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"mediapipe=={RELEASE}",
                    "-d", folder], check=True)
    return next(Path(folder).glob(f"mediapipe-{RELEASE}-*.whl"))


def export(name: str, out: Path) -> dict:
    target = out / f"{name}.tflite"
    if not target.exists():
        with zipfile.ZipFile(wheel()) as archive:
            data = archive.read(NETWORKS[name])
        tmp = out / f".{name}.{os.getpid()}.tflite"
        tmp.write_bytes(data)
        tmp.replace(target)
    return {"name": name, "file": str(target), "bytes": target.stat().st_size, "mediapipe": RELEASE}


if __name__ == "__main__":
    sys.exit(export_cli.main(__doc__, NETWORKS, export))
