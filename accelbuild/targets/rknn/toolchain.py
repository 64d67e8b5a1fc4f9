"""The rknn-toolkit2 environment: every package pinned (the toolkit pins old numpy/onnx/protobuf itself).

torch is the CPU build (the toolkit imports it; its own pin, torch <= 2.4, would pull a CUDA build of
several GB): installed with ``--no-deps`` like every pin, the toolkit's stated range is not enforced.
"""

from __future__ import annotations

from accelbuild.toolchains import Toolchain

TOOLKIT = "rknn-toolkit2"

TOOLCHAIN = Toolchain(
    name="rknn",
    packages=(
        "rknn-toolkit2==2.5.0",
        "numpy==1.26.4",
        "onnx==1.18.0",
        "onnxruntime==1.26.0",
        "protobuf==4.25.4",
        "torch==2.13.0",
        "opencv-python-headless==4.11.0.86",
        "scipy==1.17.1",
        "psutil==7.2.2",
        "ruamel.yaml==0.19.1",
        "tqdm==4.70.1",
        "fast-histogram==0.14",
        "setuptools==80.10.2",
        "filelock==4.3.2",
        "flatbuffers==25.12.19",
        "fsspec==2026.9.0",
        "Jinja2==3.1.6",
        "MarkupSafe==3.0.4",
        "mpmath==1.3.0",
        "networkx==3.6.1",
        "packaging==26.4",
        "sympy==1.14.0",
        "typing_extensions==4.16.0",
    ),
    python=((3, 8), (3, 13)),
    size_note="about 1.5 GB, 1-2 minutes",
    licence_note="rknn-toolkit2: Rockchip's RKNN SDK licence (proprietary, royalty-free for Rockchip products)",
)


def toolkit_version() -> str:
    version = TOOLCHAIN.version_of(TOOLKIT)
    assert version is not None
    return version
