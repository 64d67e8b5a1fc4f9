"""The onnxruntime-qnn environment: its own onnxruntime build with the QNN execution provider and Qualcomm's
QAIRT libraries (HTP compiler and x86 emulator), every package pinned."""

from __future__ import annotations

from accelbuild.toolchains import Toolchain

RUNTIME = "onnxruntime-qnn"

TOOLCHAIN = Toolchain(
    name="qnn",
    packages=(
        "onnxruntime-qnn==2.7.0",
        "onnxruntime==1.32.0",
        "numpy==2.4.6",
        "coloredlogs==15.0.1",
        "flatbuffers==25.12.19",
        "humanfriendly==10.0",
        "mpmath==1.3.0",
        "packaging==26.4",
        "protobuf==7.36.2",
        "sympy==1.14.0",
    ),
    python=((3, 11), (3, 14)),
    size_note="about 540 MB, under a minute",
    licence_note="onnxruntime-qnn: MIT; its QAIRT libraries: Qualcomm's AI Stack licence (no standalone "
                 "redistribution)",
)
