"""How far to trust the modelled accelerators: npu profiles fitted on published figures and cross-validated,
the mx3 profile checked against MemryX's and Frigate's figures (``tools/credibility_mx3.py``); written to the
docs.

Every point is a figure a vendor or its model zoo published for a network on a device (sources in
``POINTS``). The networks are rebuilt untrained at their published input sizes with torch + timm /
ultralytics in a venv of their own (``tools/networks/export_networks.py``, given with ``--torch-python``);
random weights time like trained ones. accelbuild imports each one as a user's build would (its passes),
partitions it for the platform and prices it with the npu cost model (``schedule.py``) and the timeline's
throughput / latency bound.

Per platform, the profile's free parameters (``free_parameters``: physical quantities with plausible ranges,
never a per-model factor) are fitted by least squares on log(predicted / published), with a weak pull towards the
profile's stated values (so a platform with few points keeps its assumptions where the data say nothing).
The fit evaluates the fast cost model, then refits once with each point scaled by the simulator's figure over
the cost model's at the first answer, so what it fits is what a build reports (``fit_simulated``).
Platforms that share their cores and software (``JOINT_FITS``: TI's three) are fitted together, one value
of each core parameter for all their figures. Then each point is predicted by a fit that did not see its
network (leave-one-network-out; the full fits first, then the left-out fits split over ``--jobs`` workers,
each holding its networks without their weights' values, which no cost reads). Printed per platform: every point's predicted / published ratio in-sample
and left out, the median and worst |error|, and the fitted parameters. ``--write`` rewrites the fitted values
into the built-in profiles, docs/credibility.md and ``accelbuild/targets/credibility.json`` (the bands
benchmark.json and the reports quote), all from this run, and saves the run the page shows in
``tools/credibility_results.json``: a later ``--write`` of some platforms takes the others from it.

    python -m tools.credibility --torch-python /work/venv-timm/bin/python [--platforms x5,tda4vm,mx3] [--write]

Needs scipy (``pip install scipy``) in accelbuild's venv; torch, timm and ultralytics only in the other.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from copy import deepcopy
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from accelbuild.errors import AccelbuildError
from accelbuild.passes import run_passes
from accelbuild.targets.npu.graph_info import GraphInfo
from accelbuild.targets.npu.hardware import NPU_PROFILES, NpuHardware, builtin_profiles, npu_hardware
from accelbuild.targets.npu.layers import Layer, array_util, compute_cycles, layers_of
from accelbuild.targets.npu.partition import Offload, Partition, partition
from accelbuild.targets.npu.schedule import actual_batch, plan_layers, schedule
from accelbuild.targets.npu.timeline import Timeline, simulate
from accelbuild.targets.profile_files import load_profile
from accelbuild.util.files import write_bytes_atomic, write_json_atomic
from tools import credibility_mx3 as mx3

ROOT = Path(__file__).resolve().parent.parent
EXPORTER = ROOT / "tools" / "networks" / "export_networks.py"
EXPORTER_MX3 = ROOT / "tools" / "networks" / "export_mx3_networks.py"
EXPORTER_KERAS = ROOT / "tools" / "networks" / "export_keras_networks.py"
MEDIAPIPE_MODELS = ROOT / "tools" / "networks" / "mediapipe_models.py"
RESULTS = ROOT / "tools" / "credibility_results.json"  # the page's run: what a later --write merges
PRIOR_WEIGHT = 0.05  # residual of a parameter at the edge of its range, against 1.0 for a factor e off a figure


@dataclasses.dataclass(frozen=True)
class Point:
    platform: str
    network: str          # export_networks.py name
    metric: str           # fps (throughput, frames in flight) | latency_ms (one frame alone, end to end) |
    #                       accelerator_ms (one frame alone through the accelerator: the NPU subgraphs and
    #                       the runtime's fixed time per call, tensors quantized in and out: no conversion)
    value: float
    source: str
    batch: int = 1
    note: str = ""
    bits: int = 8         # the bits every layer was built at (16: the vendor's build raised all of them)


RDK_CLS = ("D-Robotics/rdk_model_zoo demos/classification/README.md @ 0a290df, RDK X5 (Bayes-e at 1 GHz): "
           "single-thread latency / 4-thread throughput ('the frame rate of a 4-thread project')")
RDK_X5 = ("D-Robotics/rdk_model_zoo demos/Vision/ultralytics_YOLO/README_cn.md @ 04df3bf, RDK X5 (BPU at 1.0 GHz): "
          "1-thread latency / 2-thread throughput")
RDK_X3 = ("D-Robotics/rdk_model_zoo (rdk_x3 @ 0eb344b) demos/classification/README.md, RDK X3 (2x Bernoulli2 at "
          "1 GHz): single-thread latency / multi-thread throughput")
TI_DS = "TI Processor SDK Linux SK-TDA4VM datasheet ({sdk}), inference time"
TI_DS_LATEST = ("TI Edge AI SDK J721E datasheet (edgeai-sdk-j721e/latest as stored by the search index, {model}), "
                "inference time")
TI_MM = ("TexasInstruments/edgeai-tensorlab edgeai-modelmaker classification.py @ 3ed073b, "
         "TARGET_DEVICE_{device} performance_infer_time_ms")
TI_DET = ("TexasInstruments/edgeai-tensorlab edgeai-modelmaker detection.py @ 12e095d, TARGET_DEVICE_{device} "
          "performance_infer_time_ms")
SIMA_ZOO = ("SiMa-ai/models README.md @ bafcdfc (Palette 1.1, developer kit, accelerator mode): FPS of the compiled "
            "MLA stage alone (network_eval.py times <model>_stage1_mla.lm: quantized tensors in and out), read as "
            "one frame at a time (it matches MLPerf SingleStream, not Offline)")


def _pair(platform: str, network: str, latency_ms: float, fps: float, source: str) -> list[Point]:
    return [Point(platform, network, "latency_ms", latency_ms, source), Point(platform, network, "fps", fps, source)]


def _sima_zoo(rows: tuple[tuple[str, float], ...]) -> list[Point]:
    """Rows of SiMa's zoo table, (network, FPS): each one frame through the accelerator, 1000 / FPS ms."""
    return [Point("mlsoc", net, "accelerator_ms", round(1000 / fps, 3), SIMA_ZOO) for net, fps in rows]


def _pairs(platform: str, source: str, rows: tuple[tuple[str, float, float], ...]) -> list[Point]:
    """A source's table of (network, latency_ms, fps) rows."""
    return [q for network, latency_ms, fps in rows for q in _pair(platform, network, latency_ms, fps, source)]


POINTS = [
    *_pair("x5", "resnet18", 2.95, 448.8, RDK_CLS),
    *_pair("x5", "mobileone_s0", 0.80, 2453, RDK_CLS),
    *_pair("x5", "mobileone_s4", 4.58, 256.5, RDK_CLS),
    *_pair("x5", "repvgg_a0", 1.85, 757.7, RDK_CLS),
    *_pair("x5", "repvgg_a2", 6.07, 186.0, RDK_CLS),
    *_pair("x5", "efficientformer_l3", 17.55, 60.5, RDK_CLS),
    *_pair("x5", "fastvit_sa12", 11.56, 93.4, RDK_CLS),
    # the rest of the same table (added at stop 43, after the profile had been fitted without them)
    # EdgeNeXt's frame rates in that table are 1000 / its single-thread latency (113.35 x 8.80 ms = 997, and
    # so for all four, within 0.5%), not a 4-thread measurement as the other rows' are (their FPS is about
    # 4000 / the 4-thread latency column): only the latencies are points
    *[Point("x5", network, "latency_ms", latency_ms, RDK_CLS) for network, latency_ms in (
        ("edgenext_base", 8.80), ("edgenext_small", 4.41), ("edgenext_x_small", 2.88), ("edgenext_xx_small", 2.47))],
    *_pairs("x5", RDK_CLS, (
        ("efficientformer_l1", 5.88, 191.605),
        ("efficientformerv2_s2", 6.99, 152.40), ("efficientformerv2_s1", 4.24, 275.95),
        ("efficientformerv2_s0", 5.79, 198.45), ("efficientvit_m5", 6.34, 174.70), ("fastvit_s12", 5.86, 193.87),
        ("fastvit_t12", 4.97, 234.78), ("fastvit_t8", 2.09, 667.21), ("fasternet_s", 6.73, 162.83),
        ("fasternet_t2", 3.39, 342.48), ("fasternet_t1", 1.96, 708.40), ("fasternet_t0", 1.41, 1135.13),
        ("repvgg_b1g4", 7.58, 144.39), ("repvgg_b0", 3.07, 410.55), ("repvgg_a1", 2.67, 482.20),
        ("repvit_m1_1", 2.32, 590.42), ("repvit_m1_0", 1.97, 692.29), ("repvit_m0_9", 1.65, 902.69),
        ("mobileone_s3", 2.93, 437.85), ("mobileone_s2", 2.11, 653.68), ("mobileone_s1", 1.31, 1066.95),
        ("mobilenetv2_100", 1.42, 1152.07),
    )),
    *_pairs("x5", RDK_X5, (
        ("yolov5nu_640", 6.3, 291.8), ("yolov5su_640", 12.3, 105.6), ("yolov5mu_640", 26.5, 42.4),
        ("yolov5lu_640", 52.7, 20.1), ("yolov5xu_640", 91.1, 11.4), ("yolov8n_640", 7.0, 247.2),
        ("yolov8s_640", 13.6, 93.2), ("yolov8m_640", 30.6, 36.1), ("yolov8l_640", 59.4, 17.7),
        ("yolov8x_640", 92.4, 11.2), ("yolo11n_640", 8.2, 188.9), ("yolo11s_640", 15.7, 77.7),
        ("yolo11m_640", 34.5, 31.7), ("yolo11l_640", 45.0, 23.7), ("yolo11x_640", 95.6, 10.8),
        ("yolov8n_cls_224", 0.7, 2023.2), ("yolov8s_cls_224", 1.4, 848.0), ("yolov8m_cls_224", 3.7, 290.6),
        ("yolov8l_cls_224", 7.9, 130.8), ("yolov8x_cls_224", 13.1, 78.3),
        # the same table's YOLO11 classifiers (C3k2 blocks, a C2PSA attention block at 7x7), predicted by the
        # committed profile (0b80012) before they joined the fit: 0.72-0.91x, median |error| 23%, worst 28%
        ("yolo11n_cls_224", 1.0, 1238.4), ("yolo11s_cls_224", 2.1, 572.2), ("yolo11m_cls_224", 3.8, 282.2),
        ("yolo11l_cls_224", 5.0, 211.2), ("yolo11x_cls_224", 10.0, 103.2),
    )),
    *_pairs("x3", RDK_X3, (
        ("googlenet_tv", 8.34, 243.51), ("mobilenetv4_conv_small", 1.43, 1309.17), ("mobilenetv2_100", 2.41, 890.99),
        ("mobileone_s1", 4.50, 455.87), ("repghostnet_100", 2.09, 855.18), ("repvgg_a1", 11.58, 174.94),
        ("repvit_m0_9", 28.34, 96.47), ("resnet18", 8.87, 232.74),
    )),
    *[Point("mx3", network, metric, value, source) for network, metric, value, source in mx3.published()],
    # the SK-TDA4VM datasheet gives a model's time in several SDK releases (MobileNetV1: 1.90 in 08_01, 1.04 in
    # 08_02, 1.06 in 08_04, 1.51 in the latest); the profile models the current toolchain, so the newest
    # release that lists the model is used, chosen by release, not by fit
    Point("tda4vm", "mobilenetv1_100", "latency_ms", 1.51, TI_DS_LATEST.format(model="TFL-CL-0000")),
    Point("tda4vm", "regnetx_002", "latency_ms", 2.02, TI_DS.format(sdk="08_05, ONR-CL-6360")),
    Point("tda4vm", "mobilenetv2_140", "latency_ms", 3.02, TI_DS_LATEST.format(model="ONR-CL-6150 (QAT)")),
    Point("tda4vm", "mobilenetv2_100", "latency_ms", 2.27, TI_MM.format(device="TDA4VM") + " (mobilenet_v2_lite)"),
    Point("tda4vm", "regnetx_004", "latency_ms", 2.61, TI_MM.format(device="TDA4VM")),
    Point("tda4vm", "regnetx_008", "latency_ms", 2.95, TI_MM.format(device="TDA4VM")),
    Point("am62a", "mobilenetv1_100", "latency_ms", 4.27, "TI processor-sdk-doc AM62AX edgeai datasheet (TFL-CL-0000)"),
    Point("am62a", "regnetx_002", "latency_ms", 4.80, "TI processor-sdk-doc AM62AX edgeai datasheet (ONR-CL-6360)"),
    Point("am62a", "mobilenetv2_100", "latency_ms", 4.03, TI_MM.format(device="AM62A") + " (mobilenet_v2_lite)"),
    Point("am62a", "regnetx_004", "latency_ms", 5.25, TI_MM.format(device="AM62A")),
    Point("am62a", "regnetx_008", "latency_ms", 5.95, TI_MM.format(device="AM62A")),
    # TI's YOLOX lite detectors; its AM68A figures for tiny, s and YOLOv7-l are left out: the source marks
    # them "TODO: this has to be corrected" (they repeat the TDA4VM figures within 1%)
    *[Point(device.lower(), net, "latency_ms", ms, TI_DET.format(device=device)) for device, net, ms in (
        ("TDA4VM", "yolox_nano_lite_416", 3.74), ("TDA4VM", "yolox_tiny_lite_416", 4.84),
        ("TDA4VM", "yolox_s_lite_640", 10.14), ("AM62A", "yolox_nano_lite_416", 8.87),
        ("AM62A", "yolox_tiny_lite_416", 15.35), ("AM62A", "yolox_s_lite_640", 43.94),
        ("AM68A", "yolox_nano_lite_416", 3.73))],
    # TI's model-zoo frame rates are 1000 / inference time (modelmaker writes performance_fps=77.8,
    # performance_infer_time_ms=1000/77.8), one frame at a time: read as a latency, as SiMa's
    Point("am68a", "mobilenet_v2_tv", "latency_ms", 2.0, "TI application note SPRADA8, table 2-1 (AM68A, "
          "mobileNetV2-tv): 500 FPS, read as 1000 / inference time (TI's model-zoo convention)"),
    Point("am68a", "mobilenetv2_100", "latency_ms", 2.16, TI_MM.format(device="AM68A") + " (mobilenet_v2_lite)"),
    Point("am68a", "regnetx_004", "latency_ms", 2.74, TI_MM.format(device="AM68A")),
    Point("am68a", "regnetx_008", "latency_ms", 2.92, TI_MM.format(device="AM68A")),
    Point("mlsoc", "resnet50", "fps", 2190, "MLPerf Inference v3.0, closed edge, SiMa.ai MLSoC: Offline", batch=8),
    Point("mlsoc", "resnet50", "latency_ms", 1.202, "MLPerf Inference v3.0, closed edge, SiMa.ai MLSoC: "
          "SingleStream p90"),
    *_sima_zoo((
        ("resnet18", 1022), ("resnet34", 857), ("resnet101", 559), ("resnet152", 453), ("mobilenet_v2_tv", 1267),
        ("efficientnet_b0", 760), ("regnetx_004", 1255), ("regnetx_008", 1228), ("squeezenet1_1_tv", 1573),
        ("vgg16_tv", 237), ("densenet121", 480))),
    # the same table's torchvision rows whose weights dominate their frame (added after the profile was fitted
    # without them: the DDR's rate)
    *_sima_zoo((
        ("alexnet_tv", 483), ("vgg11_tv", 266), ("vgg19_tv", 223), ("wide_resnet50_2_tv", 438),
        ("wide_resnet101_2_tv", 276), ("regnet_x_16gf_tv", 453), ("regnet_y_16gf_tv", 297))),
    # the same table's rows with what the profile had not seen, each predicted before they joined the fit:
    # ERFNet at 208x976 (dilation 16, transposed convolutions, a 20 x 208 x 976 output), NFNet-F0 at 256 (GELU,
    # weight standardisation, scalar gains), DLA-34 (tree aggregation), YOLOv4 at 416 (Mish, SPP's 13x13 pools)
    *_sima_zoo((
        ("erfnet_208x976", 521), ("dm_nfnet_f0_256", 308), ("dla34", 929), ("yolov4_416", 195))),
    # and its torchvision EfficientNets (squeeze-excite gating, residual adds: vector work that only NFNet-F0
    # priced before), predicted before they joined the fit
    *_sima_zoo((
        ("efficientnet_b1_tv", 592), ("efficientnet_b3_tv", 492), ("efficientnet_b5_tv", 317),
        ("efficientnet_b7_tv", 208), ("efficientnet_v2_s_tv", 327), ("efficientnet_v2_m_tv", 243))),
]

# Networks whose published build raised every layer to 16 bits: the RDK X5 zoo's conversion configs set
# calibration_parameters.optimization "set_all_nodes_int16" for these three (its other configs do not). They
# are built here the same way: every layer at 16 bits, each unit's bits16_factor slower.
ZOO_CONFIGS = "D-Robotics/rdk_model_zoo demos/classification/{family}/yaml/{file} @ {commit}"
BUILT_AT_16_BITS = {
    ("x5", "efficientformer_l1"): ZOO_CONFIGS.format(family="EfficientFormer", file="EfficientFormer_l1_config.yaml",
                                                     commit="01b4318"),
    ("x5", "efficientformer_l3"): ZOO_CONFIGS.format(family="EfficientFormer", file="EfficientFormer_l3_config.yaml",
                                                     commit="01b4318"),
    ("x5", "efficientformerv2_s0"): ZOO_CONFIGS.format(family="EfficientFormerV2",
                                                       file="EfficientFormerv2_s0_config.yaml", commit="6a2ee48"),
}
POINTS = [dataclasses.replace(p, bits=16, source=f"{p.source}; built with every layer at 16 bits, as the "
                              f"zoo's config sets (set_all_nodes_int16: {BUILT_AT_16_BITS[p.platform, p.network]})")
          if (p.platform, p.network) in BUILT_AT_16_BITS else p for p in POINTS]


@dataclasses.dataclass(frozen=True)
class Free:
    """One fitted profile value: its dotted path, plausible range and what it is physically; ``platform``:
    the one platform of a joint fit it belongs to (None: every platform the fit covers); ``setup``: the one
    measurement setup whose figures it prices (``SETUPS``; None: the profile's value)."""

    path: str
    low: float
    high: float
    meaning: str
    integer: bool = False
    platform: str | None = None
    setup: str | None = None
    default: float | None = None  # the product's value where a profile does not state one

    @property
    def key(self) -> str:
        """The path, and the setup's name for a setup's own value (``crossing.call_us@rdk_cls``)."""
        return self.path if self.setup is None else f"{self.path}@{self.setup}"


# Platforms fitted together, with one set of values for the parameters of their shared cores and software:
# TI's TDA4VM, AM62A and AM68A run TIDL on the same C7x DSP + MMA deep-learning core. Their profiles differ in
# what the datasheets give (MMA size, cores, DDR bandwidth, host CPUs), so one fit sees 22 figures where each
# alone has 5 to 9 for its 7 parameters. The host hand-over is the host CPU's work (Cortex-A72 or -A53), so
# the crossing parameters (``PER_PLATFORM``) stay each platform's own.
JOINT_FITS = (("tda4vm", "am62a", "am68a"),)
PER_PLATFORM = ("crossing.",)

# Measurement setups whose figures carry host time of their own. Horizon's two RDK X5 tables were both measured
# with hrt_model_exec perf, but by different runtime releases (the classification table's own log: DNN runtime
# 1.23.5 of August 2024; the YOLO table is later): at 224 a classifier's single-thread latency exceeds its BPU
# time per frame (1/FPS at 2-4 threads) by 0.37-1.02 ms in the classification table and by 0.21-0.33 ms in
# the YOLO table, the same kind of networks on the same chip. So the runtime's host time per call
# (``SETUP_PARAMETERS``) is fitted once per setup: the profile keeps the YOLO table's (the newer runtime), the
# classification table's is this bench's, named on the page. Nothing of the NPU is per setup.
SETUPS = {RDK_CLS: "rdk_cls", SIMA_ZOO: "sima_zoo"}
SETUP_PARAMETERS = ("crossing.call_us",)


def setup_of(point: Point) -> str | None:
    """The measurement setup of ``SETUPS`` a point's source is (None: the profile's own values price it)."""
    return next((name for source, name in SETUPS.items() if point.source.startswith(source)), None)


def fit_groups(platforms: list[str]) -> list[tuple[str, ...]]:
    """The platforms to fit, as fits: a joint fit's chosen members together, every other platform alone."""
    groups: list[tuple[str, ...]] = []
    for name in platforms:
        joint = next((g for g in JOINT_FITS if name in g), (name,))
        group = tuple(p for p in joint if p in platforms)
        if group not in groups:
            groups.append(group)
    return groups


SIXTEEN_BIT_PLATFORMS = {p.platform for p in POINTS if p.bits == 16}  # their figures price the 16-bit passes
# platforms whose on-chip memory is not public: the feature maps' share of the SRAM the profile states is fitted
# (its weight buffer stays as stated: the X5 fit took it to its lower bound and nothing else moved)
SRAM_NOT_PUBLIC = {"x5"}
MIN_FEATURE_BUFFER = 512 * 1024
# platforms whose DDR width is not public: its peak is fitted within the widths the memory type allows, and the
# DMA's share of it stays as the profile states (only their product prices a byte, so only one is fitted).
# mlsoc: SiMa's zoo lists VGG-11 at 266 FPS, 133 M weights in 3.76 ms: 35.3 GB/s for its weights alone, more
# than LPDDR4 at 4266 MT/s on 64 bits (34.1 GB/s, the figure the profile stated) can carry.
DDR_NOT_PUBLIC = {"mlsoc": (4266e6 * 4, 4266e6 * 16)}  # LPDDR4 at 4266 MT/s on 32 to 128 bits
# platforms whose units' wait on their DMA (npu.dma_overlap) is fitted; the others keep the product's full overlap.
# Chosen by in-sample fits at 0149e45: x5 took 0.65 (rms log error 0.1548, against 0.1563 with full overlap; 100
# of 112 figures within 20%, against 98); mlsoc stayed at 1.00 (0.0883 either way), so it is not fitted. x5's
# value is the latest refit's, in its profile.
DMA_OVERLAP_FITTED = {"x5"}
# platforms whose matrix unit has its own efficiency for 1x1 layers (and Gemm) and for strided convolutions: those
# where, fitted, the rms log error of the left-out predictions fell on every platform of the fit (runs at c5cf728):
# x5 0.1853 -> 0.1812, mlsoc 0.1153 -> 0.1026. Not on x3 (0.0975 -> 0.1352; its left-out worst 22.4% -> 34.0%),
# nor on all of TI's joint fit (tda4vm 0.1315 -> 0.1175, am62a 0.1545 -> 0.1573, am68a 0.1035 -> 0.1105), so
# those do not fit them.
KERNEL_SHAPES_FITTED = {"x5", "mlsoc"}


def free_parameters(raw: dict[str, Any]) -> list[Free]:
    """The physical quantities a profile's figures depend on and the datasheets do not give."""
    ddr = Free("memory.ddr_efficiency", 0.2, 0.95, "share of the DDR peak the NPU's DMA achieves")
    if raw["name"] in DDR_NOT_PUBLIC:
        ddr = Free("memory.ddr_bytes_per_second", *DDR_NOT_PUBLIC[raw["name"]],
                   "DDR peak, bytes per second (its width is not public; the DMA's share stays as stated)",
                   integer=True)
    found = [Free("npu.layer_overhead_cycles", 100, 30000, "fixed cost of one layer (set-up, sync), cycles",
                  integer=True),
             ddr,
             Free("crossing.sync_us", 5, 1000, "NPU <-> host hand-over (task submission, cache maintenance), us"),
             Free("crossing.bytes_per_second", 2e8, 2e10, "float bytes per second the host converts and copies")]
    if raw["name"] in DMA_OVERLAP_FITTED:
        found.append(Free("npu.dma_overlap", 0.01, 1.0, "share of a layer's DDR transfer time its unit computes "
                          "through (1 - it: the unit waits, on the SRAM ports it shares with the DMA)", default=1.0))
    if raw["name"] in SRAM_NOT_PUBLIC:
        room = sum(level["bytes"] for level in raw["memory"]["sram"]) - raw["memory"]["weight_buffer_bytes"]
        found.append(Free("memory.feature_buffer_bytes", MIN_FEATURE_BUFFER, room,
                          "on-chip bytes for feature maps (the SRAM less the weight buffer at most)", integer=True))
    if "call_us" in raw["crossing"]:
        found.append(Free("crossing.call_us", 1, 3000, "host time of one inference call (the runtime's entry, "
                                                      "input and output set-up, the wait), us"))
    for name, unit in raw["units"].items():
        if unit["kind"] == "matrix":
            found.append(Free(f"units.{name}.efficiency", 0.05, 1.0, "MAC-array efficiency on aligned layers"))
            found.append(Free(f"units.{name}.depthwise_efficiency", 0.02, float(unit["align"][0]),
                              "reduction lanes a depthwise convolution keeps busy"))
            if "large_depthwise_efficiency" in unit:
                found.append(Free(f"units.{name}.large_depthwise_efficiency", 0.02, float(unit["align"][0]),
                                  "reduction lanes a depthwise convolution larger than 3x3 keeps busy"))
            if raw["name"] in KERNEL_SHAPES_FITTED:
                for key, kind in (("pointwise", "a 1x1 convolution or a Gemm"),
                                  ("strided", "a dense convolution with a stride above 1")):
                    found.append(Free(f"units.{name}.{key}_efficiency", 0.05, 1.0, f"MAC-array efficiency of {kind} "
                                      "on aligned channels", default=float(unit["efficiency"])))
            if raw["name"] in SIXTEEN_BIT_PLATFORMS:
                found.append(Free(f"units.{name}.bits16_factor", 1.0, 4.0, "passes of the array a 16-bit layer "
                                  "takes (1: a native 16-bit mode; 2: 16-bit activations x 8-bit weights; 4: 16 x 16)"))
            if "dynamic_matmul_efficiency" in unit:
                found.append(Free(f"units.{name}.dynamic_matmul_efficiency", 0.01, 1.0,
                                  "share of the array a MatMul of two run-time tensors keeps (attention)"))
        else:
            found.append(Free(f"units.{name}.efficiency", 0.05, 1.0, f"{unit['kind']}-unit efficiency"))
        if "overhead_cycles" in unit:
            found.append(Free(f"units.{name}.overhead_cycles", 100, 30000, f"fixed cost of one layer on the "
                              f"{unit['kind']} unit (its own set-up, sync), cycles", integer=True))
    return found


def group_parameters(raws: dict[str, dict[str, Any]], points: Sequence[Point] = ()) -> list[Free]:
    """A fit's free parameters: each platform's alone, or a joint fit's shared ones plus each member's
    ``PER_PLATFORM`` ones (every member's profile has the same units); and for each measurement setup among
    ``points``, its own value of each of its platform's ``SETUP_PARAMETERS``."""
    found = _platform_parameters(raws)
    setups = sorted({(p.platform, setup_of(p)) for p in points if setup_of(p) and p.platform in raws})
    for platform, setup in setups:
        found += [dataclasses.replace(f, platform=platform, setup=setup, meaning=f"{f.meaning}; {setup}'s own")
                  for f in found if f.path in SETUP_PARAMETERS and f.platform in (None, platform) and f.setup is None]
    return found


def _platform_parameters(raws: dict[str, dict[str, Any]]) -> list[Free]:
    names = list(raws)
    shared = free_parameters(raws[names[0]])
    for name in names[1:]:
        own = free_parameters(raws[name])
        if [f.path for f in own] != [f.path for f in shared]:
            raise SystemExit(f"joint fit {names}: {name}'s units differ from {names[0]}'s")
        # one value must be plausible on every member (depthwise lanes: up to the narrowest array)
        shared = [dataclasses.replace(f, low=max(f.low, o.low), high=min(f.high, o.high)) for f, o in zip(shared, own)]
    if len(names) == 1:
        return shared
    found = []
    for f in shared:
        if f.path.startswith(PER_PLATFORM):
            found += [dataclasses.replace(f, platform=name) for name in names]
        else:
            found.append(f)
    return found


def get(raw: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        raw = raw[key]
    return raw


def stated(raw: dict[str, Any], free: Free) -> float:
    """A fitted quantity's value as ``raw`` states it, or the product's default where it states none."""
    try:
        return float(get(raw, free.path))
    except KeyError:
        if free.default is None:
            raise
        return free.default


def with_values(raw: dict[str, Any], free: list[Free], values: np.ndarray,
                platform: str | None = None, setup: str | None = None) -> dict[str, Any]:
    """``raw`` with the fit's values set: the shared ones, ``platform``'s own and ``setup``'s own (last: they
    replace the profile's value of the same path)."""
    result = deepcopy(raw)
    for f, v in sorted(zip(free, values), key=lambda fv: fv[0].setup is not None):
        if f.platform not in (None, platform) or f.setup not in (None, setup):
            continue
        parent, _, last = f.path.rpartition(".")
        get(result, parent)[last] = int(round(v)) if f.integer else float(v)
    return result


class Hardware:
    """Each platform of a fit with the fit's values, and with each measurement setup's own values where a
    setup has some: ``of(point)`` is the hardware a point is priced on."""

    def __init__(self, raws: dict[str, dict[str, Any]], free: list[Free], values: np.ndarray) -> None:
        keys = [(name, None) for name in raws] + sorted({(f.platform, f.setup) for f in free if f.setup})
        self.by_key = {(name, setup): npu_hardware(with_values(raws[name], free, values, name, setup))
                       for name, setup in keys}

    def key(self, point: Point) -> tuple[str, str | None]:
        setup = setup_of(point)
        return (point.platform, setup) if (point.platform, setup) in self.by_key else (point.platform, None)

    def of(self, point: Point) -> NpuHardware:
        return self.by_key[self.key(point)]

    def products(self) -> dict[tuple[str, str | None], ProductFigures]:
        return {key: ProductFigures(hw) for key, hw in self.by_key.items()}


# ------------------------------------------------------------------------------------------- the networks
def export_networks(torch_python: str, folder: Path, names: list[str]) -> None:
    missing = sorted({n for n in names if not mx3.model_file(folder, n).exists()})
    keras = [n for n in missing if n in mx3.KERAS]
    mediapipe = [n for n in missing if n in mx3.MEDIAPIPE]
    for_mx3 = [n for n in missing if n in mx3.NETWORKS and n not in mx3.KERAS | mx3.MEDIAPIPE | mx3.FROM_NPU_EXPORTER]
    others = [n for n in missing if n not in keras and n not in mediapipe and n not in for_mx3]
    if keras:  # TensorFlow is accelbuild's own (the tensorflow extra), not the torch venv's
        logging.info("exporting %d Keras network(s)", len(keras))
        subprocess.run([sys.executable, str(EXPORTER_KERAS), str(folder), *keras], check=True,
                       stdout=subprocess.DEVNULL)
    if mediapipe:  # trained files from mediapipe's wheel, fetched with accelbuild's own pip
        logging.info("fetching %d MediaPipe model(s)", len(mediapipe))
        subprocess.run([sys.executable, str(MEDIAPIPE_MODELS), str(folder), *mediapipe], check=True,
                       stdout=subprocess.DEVNULL)
    if others:
        logging.info("exporting %d network(s) with %s", len(others), torch_python)
        subprocess.run([torch_python, str(EXPORTER), str(folder), *others], check=True, stdout=subprocess.DEVNULL)
    if for_mx3:
        logging.info("exporting %d mx3 network(s) with %s", len(for_mx3), torch_python)
        subprocess.run([torch_python, str(EXPORTER_MX3), "--out", str(folder), "--only", ",".join(for_mx3),
                        "--ort-python", sys.executable], check=True, stdout=subprocess.DEVNULL)


def imported(folder: Path, name: str) -> onnx.ModelProto:
    """The network as accelbuild's import stage leaves it (shape inference, then the passes); kept in
    ``folder/imported`` under a digest of the network and of accelbuild's passes."""
    source = folder / f"{name}.onnx"
    passes = sorted((ROOT / "accelbuild" / "passes").glob("*.py"))
    digest = hashlib.sha256(source.read_bytes() + b"".join(p.read_bytes() for p in passes)).hexdigest()[:16]
    cached = folder / "imported" / f"{name}.{digest}.onnx"
    if cached.exists():
        return onnx.load(str(cached))
    model = onnx.shape_inference.infer_shapes(onnx.load(str(source)))
    run_passes(model)
    cached.parent.mkdir(exist_ok=True)
    tmp = cached.with_suffix(f".{os.getpid()}.tmp")  # two runs may import the same network at once
    onnx.save(model, str(tmp))
    tmp.replace(cached)
    return model


# -------------------------------------------------------------------------------------------- prediction
@dataclasses.dataclass
class Case:
    """A point with its network partitioned for the platform; the NPU subgraphs are fixed, their cost is not.
    ``layers``: each NPU subgraph's layers at the profile's stated values (``at_values`` moves them)."""

    point: Point
    model: onnx.ModelProto
    part: Partition
    infos: dict[int, GraphInfo]
    layers: dict[int, list[Layer]]


def offload(hw: NpuHardware) -> Offload:
    """A build's offload with ``max_subgraphs`` at the profile's limit: the vendors' figures are of the whole
    model, however many segments their toolchain cut it into (a user raises ``offload.max_subgraphs``)."""
    return Offload(max_subgraphs=hw.max_subgraphs)


def prepare(point: Point, model: onnx.ModelProto, hw: NpuHardware) -> Case:
    part = partition(model, hw, offload(hw), default_bits=point.bits)
    infos = {s.id: GraphInfo.of(s.model) for s in part.npu_subgraphs}
    return Case(point, model, part, infos,
                {sid: layers_of(info, hw, default_bits=point.bits) for sid, info in infos.items()})


def at_values(layers: list[Layer], info: GraphInfo, hw: NpuHardware) -> list[Layer]:
    """``layers`` as ``layers_of`` finds them on ``hw``, which differs from the profile they were found on
    in fitted values only: of a layer, only a matrix unit's array share moves with them (the fit's hot path;
    finding the layers and their fused groups again took half of each evaluation)."""
    moved = []
    for layer in layers:
        unit = hw.unit(layer.unit)
        util = layer.util if unit.kind != "matrix" else array_util(info, info.node(layer.name), unit)
        moved.append(layer if util == layer.util else dataclasses.replace(layer, util=util))
    return moved


class ProductFigures:
    """Each network partitioned and simulated once per hardware and batch, as a build would: both of its
    points (throughput and latency) read the same timeline. Only the last run is kept (a network's points
    are adjacent): a timeline of a detector at 640 holds hundreds of MB of intervals."""

    def __init__(self, hw: NpuHardware) -> None:
        self.hw = hw
        self._runs: dict[tuple[str, int, int], tuple[Partition, Timeline]] = {}

    def run(self, case: Case) -> tuple[Partition, Timeline]:
        key = (case.point.network, case.point.batch, case.point.bits)
        if key not in self._runs:
            self._runs.clear()
            bits = case.point.bits
            part = partition(case.model, self.hw, offload(self.hw), default_bits=bits)  # may move with the costs
            schedules = {s.id: schedule(s.model, self.hw, batch_size=case.point.batch, default_bits=bits)
                         for s in part.npu_subgraphs}
            self._runs[key] = part, simulate(part, schedules, self.hw, model=case.model)
        return self._runs[key]

    def figure(self, case: Case) -> tuple[float, float]:
        """(cost model, simulator) figure of the point's metric, exactly as a build reports it."""
        part, timeline = self.run(case)
        if case.point.metric == "fps":
            return timeline.cost_model_fps, timeline.fps
        if case.point.metric == "accelerator_ms":  # perf.json's stages of the NPU subgraphs and the call
            stages = [s for s in timeline.stages if s.name in {"call", *(f"sg{g.id}" for g in part.npu_subgraphs)}]
            return sum(s.cost_seconds for s in stages) * 1e3, sum(s.seconds for s in stages) * 1e3
        return timeline.cost_model_latency_ms, timeline.latency_ms


def planned_totals(layers: list[Layer], hw: NpuHardware, batch: int) -> tuple[int, int]:
    """One batch of a subgraph as the fit plans it (effort normal, latency): its cycles and DDR bytes."""
    plans = plan_layers(layers, hw, batch, "normal", "latency")
    return (plans[-1].end_cycle if plans else 0), sum(p.ddr_bytes for p in plans)


class PlanMemo:
    """``plan_layers``' (cycles, DDR bytes) of one NPU subgraph, keyed by all it reads: the layers (the point's
    platform, network, bits and subgraph), the batch, each layer's compute cycles and the profile's clock,
    memory, overheads and DMA overlap. A fit's finite-difference steps move one value at a time, most move no layer of a
    given network (a crossing value, a unit it has no layer on), and a network's latency and FPS points plan
    the same layers: those are looked up instead of planned again. The figures are the same either way."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._plans: dict[tuple[Any, ...], tuple[int, int]] = {}

    def __len__(self) -> int:
        """Plans made (and kept) so far."""
        return len(self._plans)

    def cycles_and_bytes(self, case: Case, sid: int, layers: list[Layer], hw: NpuHardware,
                         batch: int) -> tuple[int, int]:
        computes = tuple(0 if layer.free else compute_cycles(layer, hw.unit(layer.unit), batch) for layer in layers)
        point = case.point
        key = (point.platform, point.network, point.bits, sid, batch, computes, hw.clock_mhz, hw.memory,
               hw.layer_overhead_cycles, tuple(u.overhead_cycles for u in hw.units), hw.tile_overhead_cycles,
               hw.min_tiles, hw.dma_overlap)
        found = self._plans.get(key)
        if found is None:
            found = planned_totals(layers, hw, batch)
            if len(self._plans) >= self.limit:
                self._plans.clear()
            self._plans[key] = found
        return found


PLANS = PlanMemo()


def fast_figure(case: Case, hw: NpuHardware, fixed: dict[str, float], memo: PlanMemo | None = PLANS) -> float:
    """The cost model's figure with the partition and host stages held: only the NPU layers are re-planned
    (what the fit varies). ``fixed``: the host / crossing seconds and DDR bytes outside the NPU; ``memo``:
    where plans already made are looked up (None: plan every subgraph)."""
    planned = []
    for sid, info in case.infos.items():  # the layers' utilisation depends on the fitted values too
        layers = at_values(case.layers[sid], info, hw)
        planned.append((sid, layers, actual_batch(layers, hw, case.point.batch)))
    batch = max((actual for _, _, actual in planned), default=1)  # as the timeline: the largest actual batch
    npu = 0.0
    ddr = 0
    for sid, layers, actual in planned:
        jobs = math.ceil(batch / actual)
        cycles, nbytes = planned_totals(layers, hw, actual) if memo is None else \
            memo.cycles_and_bytes(case, sid, layers, hw, actual)
        npu += jobs * cycles / hw.clock_hz
        ddr += jobs * nbytes
    if case.point.metric == "accelerator_ms":
        return npu * 1e3 + hw.crossing.call_us * 1e-3
    if case.point.metric == "latency_ms":
        return (npu + outside_seconds(fixed, hw, "serial")) * 1e3
    period = max(npu / hw.cores, outside_seconds(fixed, hw, "arm") / hw.arm.cores,
                 ddr / hw.memory.effective_ddr_bytes_per_second)
    return batch / period


def host_part(case: Case, raw: dict[str, Any]) -> dict[str, float]:
    """One batch outside the NPU subgraphs, as linear in the crossing's three parameters: host seconds, and per
    unit of ``sync_us``, of 1 / ``bytes_per_second`` and of ``call_us`` (from the product's timeline at four
    settings)."""
    def outside(sync_us: float, bytes_per_second: float, call_us: float = 0.0) -> tuple[float, float]:
        changed = deepcopy(raw)
        changed["crossing"] = {"sync_us": sync_us, "bytes_per_second": bytes_per_second, "call_us": call_us}
        hw = npu_hardware(changed)
        schedules = {s.id: schedule(s.model, hw, batch_size=case.point.batch, default_bits=case.point.bits)
                     for s in case.part.npu_subgraphs}
        stages = simulate(case.part, schedules, hw, model=case.model).stages
        # by name, not by resource: a host subgraph on a DSP that shares the NPU (tda4vm's C7x) is an "npu" stage too
        npu_ids = {f"sg{s.id}" for s in case.part.npu_subgraphs}
        rest = [s for s in stages if s.name not in npu_ids]
        return sum(s.cost_seconds for s in rest), sum(s.cost_seconds for s in rest if s.resource == "arm")

    base, base_arm = outside(1e-9, 1e30)
    sync, sync_arm = outside(1.0, 1e30)
    per_byte, per_byte_arm = outside(1e-9, 1.0)
    call, call_arm = outside(1e-9, 1e30, 1.0)
    return {"serial": base, "serial_per_sync_us": sync - base, "serial_per_inverse_rate": per_byte - base,
            "serial_per_call_us": call - base,
            "arm": base_arm, "arm_per_sync_us": sync_arm - base_arm, "arm_per_inverse_rate": per_byte_arm - base_arm,
            "arm_per_call_us": call_arm - base_arm}


def outside_seconds(fixed: dict[str, float], hw: NpuHardware, key: str) -> float:
    return fixed[key] + fixed[f"{key}_per_sync_us"] * hw.crossing.sync_us + \
        fixed[f"{key}_per_inverse_rate"] / hw.crossing.bytes_per_second + \
        fixed[f"{key}_per_call_us"] * hw.crossing.call_us


# ------------------------------------------------------------------------------------------------- fit
def fit(raws: dict[str, dict[str, Any]], free: list[Free], points: list[Point],
        predict: Callable[[np.ndarray], list[float]], start: np.ndarray | None = None,
        max_evaluations: int | None = None) -> np.ndarray:
    """Least squares on log(predicted / published), parameters in log space within their ranges, pulled
    weakly towards the profiles' stated values (a shared one: the first platform's). ``predict``: the points'
    figures at given values; ``start``: where to begin (default: the stated values); ``max_evaluations``: a cap
    for a fit that starts near its answer."""
    first = next(iter(raws.values()))
    as_stated = np.array([stated(raws[f.platform] if f.platform else first, f) for f in free])
    low = np.log([f.low for f in free])
    width = np.log([f.high for f in free]) - low

    # Each parameter as 1 + its place in its range on a log scale, in [1, 2]: scipy's finite-difference step is
    # relative to the variable, so it must never be 0 (as log(1.0) was: a parameter stated as exactly 1 got a
    # step of 1e-8, moved no cycle count and stayed where it started).
    def values(x: np.ndarray) -> np.ndarray:
        return np.exp(low + (x - 1) * width)

    def place(v: np.ndarray) -> np.ndarray:
        return 1 + np.clip((np.log(v) - low) / width, 0, 1)

    prior = place(as_stated)

    def residuals(x: np.ndarray) -> np.ndarray:
        figures = predict(values(x))
        r = [math.log(v / p.value) if p.metric == "fps" else -math.log(v / p.value) for v, p in zip(figures, points)]
        return np.concatenate([np.array(r), PRIOR_WEIGHT * (x - prior)])

    # cycles are whole numbers: a finite-difference step must move them (2-4% of each range does)
    x0 = prior if start is None else place(start)
    from scipy.optimize import least_squares  # the fit's only need: the page and the tests do without scipy

    result = least_squares(residuals, x0, bounds=(1.0, 2.0), diff_step=2e-2, max_nfev=max_evaluations)
    return values(result.x)


def npu_predictor(cases: list[Case], fixed: list[dict[str, float]], raws: dict[str, dict[str, Any]],
                  free: list[Free], corrections: list[float] | None = None) -> Callable[[np.ndarray], list[float]]:
    """The fit's figures of npu cases: the cost model with partitions and outside parts held, each scaled by
    its simulator correction (``simulator_corrections``; none: 1)."""
    scale = corrections or [1.0] * len(cases)

    def predict(values: np.ndarray) -> list[float]:
        hws = Hardware(raws, free, values)
        return [fast_figure(c, hws.of(c.point), f) * k for c, f, k in zip(cases, fixed, scale)]
    return predict


def simulator_corrections(cases: list[Case], fixed: list[dict[str, float]], raws: dict[str, dict[str, Any]],
                          free: list[Free], values: np.ndarray) -> list[float]:
    """Each case's simulated figure over the fit's cost-model figure, at ``values``: what the effects the cost
    model leaves out (tile fill and drain, DDR contention, frames in flight, a partition that moved) change.
    Computed by the simulator at given parameters, never from a published figure."""
    hws = Hardware(raws, free, stored(free, values))
    products = hws.products()
    return [products[hws.key(c.point)].figure(c)[1] / fast_figure(c, hws.of(c.point), f)
            for c, f in zip(cases, fixed)]


# a left-out fit starts from the full fit's values and takes at most this many solver steps in each pass
LEFT_OUT_STEPS = 15


def fit_simulated(raws: dict[str, dict[str, Any]], free: list[Free], cases: list[Case], fixed: list[dict[str, float]],
                  start: np.ndarray | None = None) -> np.ndarray:
    """Fit the figures a build reports (the simulator's): the fast cost-model fit, then refitted once with
    the simulator's corrections at its answer. A left-out fit (``start``: the full fit's values) is capped."""
    points = [c.point for c in cases]
    cap = None if start is None else LEFT_OUT_STEPS
    values = fit(raws, free, points, npu_predictor(cases, fixed, raws, free), start=start, max_evaluations=cap)
    corrections = simulator_corrections(cases, fixed, raws, free, values)
    return fit(raws, free, points, npu_predictor(cases, fixed, raws, free, corrections), start=values,
               max_evaluations=cap)


def error(ratio: float) -> float:
    """Signed relative error of a predicted / published ratio (+0.10: 10% above)."""
    return ratio - 1.0


def summary(errors: list[float]) -> dict[str, float]:
    absolute = [abs(e) for e in errors]
    return {"median_abs_error": statistics.median(absolute), "worst_abs_error": max(absolute)}


@dataclasses.dataclass
class Group:
    """One platform, or a joint fit's platforms, with every point's network partitioned (``prepare_group``)."""

    names: tuple[str, ...]
    raws: dict[str, dict[str, Any]]
    cases: list[Case]
    refused: dict[str, list[dict[str, Any]]]
    free: list[Free]
    fixed: list[dict[str, float]]

    @property
    def networks(self) -> list[str]:
        return sorted({c.point.network for c in self.cases})


def prepare_group(names: tuple[str, ...], points: list[Point], models: dict[str, onnx.ModelProto]) -> Group:
    raws = {name: load_profile(builtin_profiles()[name], NPU_PROFILES) for name in names}
    cases: list[Case] = []
    refused: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for p in points:
        try:
            cases.append(prepare(p, models[p.network], npu_hardware(raws[p.platform])))
        except AccelbuildError as exc:  # a network the profile cannot build is reported, not fitted
            refused[p.platform].append({"network": p.network, "metric": p.metric, "published": p.value,
                                        "source": p.source, "reason": str(exc).splitlines()[0]})
    free = group_parameters(raws, [c.point for c in cases])
    return Group(names, raws, cases, refused, free, [host_part(c, raws[c.point.platform]) for c in cases])


def left_out_ratios(group: Group, everything: np.ndarray, networks: list[str]) -> dict[tuple[str, str, str], float]:
    """Each of ``networks``' figures as a build would report them with a fit that saw none of that network's
    figures on any of the group's platforms (``everything``: the full fit, where each left-out fit starts).
    Keyed (platform, network, metric)."""
    ratios = {}
    for done, network in enumerate(networks):
        logging.info("%s: leaving out %s (%d of this worker's %d)", "+".join(group.names), network, done + 1,
                     len(networks))
        rest = [j for j, c in enumerate(group.cases) if c.point.network != network]
        values = fit_simulated(group.raws, group.free, [group.cases[j] for j in rest],
                               [group.fixed[j] for j in rest], start=everything)
        hws = Hardware(group.raws, group.free, stored(group.free, values))
        without = hws.products()
        for case in group.cases:
            point = case.point
            if point.network == network:
                ratios[point.platform, point.network, point.metric] = \
                    _as_time_ratio(without[hws.key(point)].figure(case)[1], point)
    return ratios


def fitted_results(group: Group, everything: np.ndarray) -> list[dict[str, Any]]:
    """One result per platform at the full fit (``left_out_ratio`` None until ``with_left_out``)."""
    values = stored(group.free, everything)
    fitted_hws = Hardware(group.raws, group.free, values)
    products = fitted_hws.products()
    results = []
    for name in group.names:
        rows = []
        for case, fixed_part in zip(group.cases, group.fixed):
            if case.point.platform != name:
                continue
            product = products[fitted_hws.key(case.point)]
            cost, sim = product.figure(case)
            # the outside part does not depend on the fitted values (its crossing terms are per unit)
            fast = fast_figure(case, fitted_hws.of(case.point), fixed_part)
            if [s.nodes for s in product.run(case)[0].subgraphs] == [s.nodes for s in case.part.subgraphs] \
                    and abs(fast / cost - 1) > 1e-6:
                raise SystemExit(f"{name} {case.point.network}: the fit's cost model ({fast:.6g}) is not the "
                                 f"product's ({cost:.6g})")
            rows.append({"network": case.point.network, "metric": case.point.metric, "published": case.point.value,
                         "batch": case.point.batch, "source": case.point.source,
                         "predicted": cost, "simulated": sim,
                         "ratio": _as_time_ratio(cost, case.point), "simulated_ratio": _as_time_ratio(sim, case.point),
                         "left_out_ratio": None})
        mine = [(f, v) for f, v in zip(group.free, values) if f.platform in (None, name)]
        results.append({
            "platform": name, "points": rows, "refused": group.refused[name],
            "fitted": {f.key: (int(v) if f.integer else float(v)) for f, v in mine},
            "fitted_with": [n for n in group.names if n != name],
            "free": [{"path": f.key, "low": f.low, "high": f.high, "meaning": f.meaning,
                      "shared": f.platform is None and len(group.names) > 1} for f, _ in mine],
            "in_sample": summary([error(r["simulated_ratio"]) for r in rows]) if rows else None,
            "leave_one_out": None})
    return results


def with_left_out(result: dict[str, Any], ratios: dict[tuple[str, str, str], float]) -> dict[str, Any]:
    """``result`` with its rows' left-out ratios (``left_out_ratios``, from any number of jobs) and their summary."""
    for row in result["points"]:
        row["left_out_ratio"] = ratios.get((result["platform"], row["network"], row["metric"]))
    loo_errors = [error(r["left_out_ratio"]) for r in result["points"] if r["left_out_ratio"] is not None]
    result["leave_one_out"] = summary(loo_errors) if loo_errors else None
    return result


def run_mx3(points: list[Point], folder: Path) -> dict[str, Any]:
    """The mx3 profile against its published figures (``tools/credibility_mx3.py``): chip figures against
    its calibration and the vendor's own measurements (held out), end-to-end figures against Frigate's;
    nothing fitted."""
    with tempfile.TemporaryDirectory(prefix="accelbuild-credibility-mx3-") as scratch:  # GBs of builds
        rows, refused = _mx3_rows(points, folder, Path(scratch))
    calibration = [r for r in rows if r["kind"] == "calibration"]
    held_out = [r for r in rows if r["kind"] == "held_out"]
    whole_rows = [r for r in rows if r["kind"] == "end_to_end"]
    return {"platform": "mx3", "family": "mx3", "points": rows, "refused": refused, "fitted": {}, "free": [],
            "not_fitted": "the one figure of the chips the profile was set to (ResNet-50, 1,800 FPS) and the "
                          "vendor's own measurements of the chips disagree by about 2x on that network, and "
                          "Frigate's figures are end to end, bound by its Python host code",
            "in_sample": summary([error(r["simulated_ratio"]) for r in calibration]) if calibration else None,
            "held_out": summary([error(r["simulated_ratio"]) for r in held_out]) if held_out else None,
            "end_to_end": summary([error(r["simulated_ratio"]) for r in whole_rows]) if whole_rows else None,
            "chips_sustain_published_fps": [r["chip"] >= r["published"] for r in whole_rows if r["metric"] == "fps"],
            "leave_one_out": None}


def _mx3_rows(points: list[Point], folder: Path, work: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each mx3 network built in ``work``: its compared rows, and the rows of the networks refused."""
    rows, refused = [], []
    for network in sorted({p.network for p in points}):
        mine = [p for p in points if p.network == network]
        try:
            bench = mx3.build(network, folder, work / network)
        except AccelbuildError as exc:
            refused += [{"network": p.network, "metric": p.metric, "published": p.value, "source": p.source,
                         "reason": str(exc).splitlines()[0]} for p in mine]
            continue
        chip = dict(zip(("fps", "latency_ms"), mx3.chip_figures(bench)))
        whole = dict(zip(("fps", "latency_ms"), mx3.end_to_end_figures(bench)))
        host = bench.get("host") or {}
        for p in mine:
            end_to_end = mx3.NETWORKS[network]
            figure = whole[p.metric] if end_to_end else chip[p.metric]
            kind = "end_to_end" if end_to_end else "calibration" if network in mx3.CALIBRATION else "held_out"
            rows.append({"network": p.network, "metric": p.metric, "published": p.value, "batch": 1,
                         "source": p.source, "kind": kind,
                         "predicted": figure, "simulated": figure, "ratio": _as_time_ratio(figure, p),
                         "simulated_ratio": _as_time_ratio(figure, p), "left_out_ratio": None,
                         "chip": chip[p.metric], "chip_ratio": _as_time_ratio(chip[p.metric], p),
                         "host_ms": (host.get("pre_ms") or 0.0) + (host.get("post_ms") or 0.0),
                         "bound": bench["end_to_end_bound"]})
    return rows, refused


FullJob = tuple[tuple[str, ...], list[Point], Path]
LeftOutJob = tuple[tuple[str, ...], list[Point], Path, list[float], list[str]]


def _group_of(names: tuple[str, ...], points: list[Point], folder: Path) -> Group:
    logging.getLogger("accelbuild").setLevel(logging.WARNING)
    models = {network: without_weights(imported(folder, network)) for network in sorted({p.network for p in points})}
    return prepare_group(names, points, models)


def without_weights(model: onnx.ModelProto, keep: int = 4096) -> onnx.ModelProto:
    """``model`` with its large float initializers' values dropped (dims and type kept, marked external): the
    cost model and the partition read shapes, never weight values, and a fit's workers then hold the detectors
    at 640 in a few hundred MB instead of several GB each. Small tensors (shapes, scales) keep their values."""
    for tensor in model.graph.initializer:
        if tensor.data_type == onnx.TensorProto.FLOAT and math.prod(tensor.dims) > keep:
            tensor.ClearField("raw_data")
            tensor.ClearField("float_data")
            tensor.data_location = onnx.TensorProto.EXTERNAL
            del tensor.external_data[:]
            tensor.external_data.add(key="location", value="dropped")
    return model


def fit_job(job: FullJob) -> tuple[list[dict[str, Any]], list[float], list[str]]:
    """A group's full fit: (its results, the fitted values, its networks)."""
    names, points, folder = job
    if names == ("mx3",):
        logging.getLogger("accelbuild").setLevel(logging.WARNING)
        return [run_mx3(points, folder)], [], []
    group = _group_of(names, points, folder)
    everything = fit_simulated(group.raws, group.free, group.cases, group.fixed)
    return fitted_results(group, everything), [float(v) for v in everything], group.networks


def left_out_job(job: LeftOutJob) -> dict[tuple[str, str, str], float]:
    """Part of a group's leave-one-out fits (the full fit's values given): one job per core."""
    names, points, folder, everything, networks = job
    return left_out_ratios(_group_of(names, points, folder), np.array(everything), networks)


def run_all(groups: list[tuple[tuple[str, ...], list[Point]]], folder: Path, jobs: int,
            loo: bool) -> dict[str, dict[str, Any]]:
    """Every group's full fit, then every leave-one-out fit, ``jobs`` at a time (a group's left-out fits
    split over the workers, so one platform alone uses them all). Results by platform."""
    groups = sorted(groups, key=lambda g: -len(g[1]))  # the largest first, so the workers finish together
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        full = list(pool.map(fit_job, [(names, points, folder) for names, points in groups]))
        left_out_jobs = [(names, points, folder, everything, networks[i::jobs])
                         for (names, points), (_, everything, networks) in zip(groups, full)
                         if loo and len(networks) >= 2 for i in range(min(jobs, len(networks)))]
        ratios: dict[tuple[str, str, str], float] = {}
        for part in pool.map(left_out_job, left_out_jobs):
            ratios.update(part)
    return {r["platform"]: with_left_out(r, ratios) for results, _, _ in full for r in results}


def _as_time_ratio(figure: float, point: Point) -> float:
    """Predicted time over published time (>1: the model is slower than the device)."""
    return point.value / figure if point.metric == "fps" else figure / point.value


# ---------------------------------------------------------------------------------------------- writing
def write_profile_values(path: Path, values: dict[str, float | int], source: str) -> None:
    """Set dotted-path values in a profile YAML in place (comments and layout kept): a block key's value, a
    key inside a one-line ``{...}`` mapping, or a new nested key under the deepest existing block; and set
    each value's ``sources`` entry to ``source``. A setup's own value (``crossing.call_us@rdk_cls``) goes to
    the ``call_us`` of the profile's calibration points that setup measured."""
    lines = path.read_text().splitlines()
    unknown = sorted(set(re.findall(r"[{,]\s*setup:\s*([^,}\s]+)", "\n".join(lines))) - set(SETUPS.values()))
    if unknown:  # its call_us would never be written, and go stale without a word
        raise ValueError(f"{path}: a calibration point names setup {', '.join(unknown)}, which this bench does not "
                         f"know (its setups: {', '.join(sorted(SETUPS.values()))})")
    for dotted, value in values.items():
        if "@" in dotted:
            lines = _set_calibration_call_us(lines, dotted, _yaml_number(value))
            continue
        lines = _set(lines, dotted.split("."), _yaml_number(value))
        lines = _set_source(lines, dotted, source)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def _yaml_number(value: float | int) -> str:
    """As the profile stores it: integers whole, other values to 4 significant digits."""
    if isinstance(value, int) or abs(value) >= 1e6:
        return str(int(round(value)))
    return f"{value:.4g}"


def stored(free: list[Free], values: np.ndarray) -> np.ndarray:
    """The fitted values as the profile file will hold them (so every figure printed is the file's)."""
    return np.array([float(_yaml_number(int(round(v)) if f.integer else float(v))) for f, v in zip(free, values)])


def _blocks(lines: list[str]) -> dict[tuple[str, ...], int]:
    """Line index of every block key, by its key path (two-space indentation, as the profiles are written)."""
    found: dict[tuple[str, ...], int] = {}
    stack: list[tuple[int, str]] = []
    for index, line in enumerate(lines):
        match = re.match(r"^( *)([A-Za-z_][A-Za-z0-9_]*):(.*)$", line)
        if not match or line.lstrip().startswith("#"):
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group(2)))
        found[tuple(key for _, key in stack)] = index
    return found


def _set(lines: list[str], keys: list[str], text: str) -> list[str]:
    blocks = _blocks(lines)
    where = blocks.get(tuple(keys))
    if where is not None:
        lines[where] = re.sub(r":.*$", f": {text}", lines[where])
        return lines
    for depth in range(len(keys) - 1, 0, -1):
        parent = blocks.get(tuple(keys[:depth]))
        if parent is None:
            continue
        rest = keys[depth:]
        line = lines[parent]
        if re.search(r":\s*\{.*\}\s*$", line) and len(rest) == 1:  # a one-line mapping
            if re.search(rf"[{{,]\s*{rest[0]}:", line):
                lines[parent] = re.sub(rf"([{{,]\s*{rest[0]}:\s*)[^,}}]+", rf"\g<1>{text}", line)
            else:
                lines[parent] = re.sub(r"\}\s*$", f", {rest[0]}: {text}}}", line)
            return lines
        indent = 2 * depth
        added = [" " * (indent + 2 * i) + f"{key}:" for i, key in enumerate(rest[:-1])]
        added.append(" " * (indent + 2 * (len(rest) - 1)) + f"{rest[-1]}: {text}")
        return lines[:parent + 1] + added + lines[parent + 1:]
    before = next(i for i, line in enumerate(lines) if line.startswith("sources:"))
    added = [" " * (2 * i) + f"{key}:" for i, key in enumerate(keys[:-1])]
    added.append(" " * (2 * (len(keys) - 1)) + f"{keys[-1]}: {text}")
    return lines[:before] + added + lines[before:]


def _set_calibration_call_us(lines: list[str], key: str, text: str) -> list[str]:
    """``crossing.call_us@<setup>`` into every calibration point marked ``setup: <setup>`` (others: none)."""
    path, setup = key.split("@")
    if path not in SETUP_PARAMETERS:
        raise ValueError(f"{key}: only {', '.join(SETUP_PARAMETERS)} has a setup's own value in a profile")
    marked = re.compile(rf"([{{,]\s*setup:\s*{re.escape(setup)}\s*,\s*call_us:\s*)[^,}}]+")
    return [marked.sub(rf"\g<1>{text}", line) for line in lines]


def _set_source(lines: list[str], dotted: str, source: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith("sources:"))
    entry = f'  {dotted}: "{source}"'
    for i in range(start + 1, len(lines)):
        if lines[i].startswith(f"  {dotted}:"):
            end = i + 1
            while end < len(lines) and lines[end].startswith("    "):  # a folded value's lines
                end += 1
            return lines[:i] + [entry] + lines[end:]
        if lines[i] and not lines[i].startswith(" "):
            break
    return lines[:start + 1] + [entry] + lines[start + 1:]


def git_commit() -> str:
    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def band_entry(result: dict[str, Any], digest: str) -> dict[str, Any]:
    """credibility.json's record of one profile: the band reports quote (leave-one-out when it ran)."""
    loo = result["leave_one_out"]
    held_out = None if loo else result.get("held_out")  # mx3: figures of the chips the profile was never set to
    chosen = loo or held_out or result["in_sample"]
    kinds = ("held_out",) if held_out else ("held_out", "calibration", None)  # mx3: the chips' figures only
    measured = [r for r in result["points"] if r.get("kind") in kinds]
    entry = {"profile_digest": digest, "points": len(measured),
             "networks": len({r["network"] for r in measured}),
             "band_pct": round(100 * chosen["worst_abs_error"], 1),
             "median_pct": round(100 * chosen["median_abs_error"], 1),
             "cross_validated": loo is not None, **direction(measured, "left_out_ratio" if loo else "simulated_ratio")}
    return {**entry, "held_out": True} if held_out else entry


def direction(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Which side of the published figures the model is on, when every point says the same: ``model_faster``
    (every predicted time shorter than the published one: read FPS as an upper bound) or ``model_slower``,
    with the nearest point's distance; {} when the points lie on both sides."""
    ratios = [r[key] for r in rows if r.get(key) is not None]
    if ratios and all(x < 1 for x in ratios):
        return {"direction": "model_faster", "nearest_pct": round(100 * (1 - max(ratios)), 1)}
    if ratios and all(x > 1 for x in ratios):
        return {"direction": "model_slower", "nearest_pct": round(100 * (min(ratios) - 1), 1)}
    return {}

LIMITS = """\
- **Weights only through their size.** A layer's time comes from its MACs, its shape (channel alignment,
  depthwise or dense), its bytes to and from DDR and its unit; values never matter, so sparsity or zero
  weights a real compiler exploits are not modelled.
- **Efficiency by kernel class, not by layer.** The matrix unit keeps one efficiency for dense kernels
  larger than 1x1 at stride 1; on x5 and mlsoc a 1x1 layer (or a Gemm) and a strided convolution each have
  their own, and a depthwise convolution keeps its own lanes busy (on x5, one count for 3x3 kernels and one
  for larger ones). Within a class every aligned layer is alike: real engines also differ with the output
  width, the kernel's exact size and the stride's value; those differences end up in the error band.
- **Figures their own family contradicts.** `tools/siblings.py` takes each step of a series (one architecture
  at a larger width, depth or input size, built at the same bits: 57 steps on x5, mlsoc and TI's three) and
  divides the published time per frame by the NPU MACs, larger network over smaller. The fitted profiles'
  quotients follow the published ones: a median 4.6% apart (90% of the steps within 17%), and 5.6% (23%) with
  each figure predicted by a fit that did not see its network. On x5, 36 of 37 steps lie at 0.56-1.20x.
  FastViT-T12, which is T8 with 4/3 the channels and two more blocks, spends 1.40x T8's time per MAC (4.26
  against 1.50 ms per frame at 4 threads, for 2.03x the MACs), where the model gives 0.77x (0.61x left out);
  both within 20% would need 0.93x or more, and no other step of the 57 is above 1.20x (RepVGG-A2 over A1,
  model 0.92x). A price set by a layer's shape moves a family's steps together: three quarters of T8's
  modelled NPU time is its 7x7 depthwise convolutions, whose price sets most of T12's and S12's too, so T8
  stays out.
- **One fixed cost per layer, per unit.** Every layer pays its unit's start-up once: the profile's
  `npu.layer_overhead_cycles`, or a unit's own where the profile gives one (x5's layout unit, whose
  transposes, slices and splits are fitted apart from the convolutions). A vendor compiler that merges
  small layers into one job, or splits one into several, is not modelled. On a profile that stores feature
  maps channel-last (x5: `npu.channels_last`), an exporter's NCHW <-> NHWC transpose moves no data; every
  other transpose is a full pass of the layout unit.
- **Depth-first streaming is a rule, not a search.** An output read only by the next layer streams through
  on-chip memory in row bands (twice the reader's kernel rows) when that fits half the feature buffer;
  branches and concatenations keep whole tensors or go to DDR. Vendor compilers search tilings.
- **Only weights load ahead.** The DMA loads a layer's first weight chunk in earlier layers' idle time (up
  to 16 layers back, as far as the weight buffer has room); a feature map stored to DDR by an older layer
  (a skip connection) loads only when its reader opens.
- **One share of DMA overlap per profile.** Where a profile fits `npu.dma_overlap` (x5), a unit waits
  the same share of every layer's transfer time, whatever the layer's shape or the SRAM banks its tiles
  use; the others assume the DMA never holds a unit up.
- **On-chip memory as two buffers of fixed size.** Weights and feature maps each get their own share of the
  SRAM for the whole network, and weights load again for every batch (none stay on chip between batches); a
  compiler that moves the split layer by layer keeps more on chip. Where the vendor does not publish the
  SRAM's size (x5), the feature maps' share is fitted, within the SRAM the profile states.
- **One DDR, shared equally.** With frames in flight, the stages moving bytes at once (NPU jobs, the Arm's
  crossings, host layers) each get an equal share of the DDR's effective bandwidth; a host layer streams
  its float tensors through DDR whatever their size (no caches), and a crossing moves a float copy and an
  8-bit one. Real memory controllers arbitrate by priority, and the Arm's caches hold small tensors.
  Where the vendor does not publish the DDR's width (mlsoc), its peak is fitted within the widths the memory
  type allows, at a stated DMA share; weights that a toolchain compresses would show up as a higher rate.
- **Transformer layers are priced as their ONNX ops.** Attention is MatMul + Softmax + MatMul on the
  matrix and vector units; a MatMul of two run-time tensors keeps its own share of the array (x5:
  `dynamic_matmul_efficiency`, one number for every head size and token count); LayerNormalization is vector
  work. GELU in the erf form exporters write runs in the output stage of the convolution or matrix layer
  before it where the profile lists the chain op (x5), else (after a residual Add, say) as one activation layer
  of the vector unit, as do SiLU and Mish; a Mul or Div by one constant is its producer's requantization scale,
  no work of its own. No fused attention kernel is modelled, and nothing explains FastViT-SA12's one attention
  stage doubling S12's time: not a cost per head nor one per 16-bit Softmax element, since EfficientFormer-L3
  has as many of both and is priced within 10%. SA12 alone reshapes its attention's qkv to 5-D.
- **Operator support is this project's reading of the vendor's list.** An operator a profile's units do
  not list runs on the host, with its hand-overs (EdgeNeXt's ReduceL2 on x5, as the RDK X5 operator list
  says; RepViT's GELU on x3); where the vendor's toolchain runs it on the NPU after all, the network comes
  out too slow. A vendor's node-level options (run_on_bpu) are taken as the zoo used them: x5's Softmax
  runs on the BPU. mlsoc's stated limits were checked against SiMa's own zoo, which runs on the MLA what they
  had sent to the Arm: 3,024 channels (RegNetY-16GF), dilation 16 (ERFNet), GELU (NFNet-F0), Mish and 13x13
  max-pools (YOLOv4); each is now sourced to its row. Other profiles' limits have not been checked that way.
- **Pooling is priced as its window.** A max-pool costs kernel-area comparisons per output on the vector
  unit; a compiler that splits a 13x13 window into rows and columns or cascades 5x5 pools (YOLOv4's SPP)
  does less.
- **Published figures are not all one kind.** Horizon's are `hrt_model_exec perf` (NV12 input; latency at one
  thread, throughput at two (YOLO) or four (classification) threads), TI's are the SDK's per-frame inference
  time, SiMa's model-zoo FPS times the compiled MLA stage (`<model>_stage1_mla.lm` in accelerator mode:
  quantized tensors in and out), read as one frame at a time through the accelerator (`accelerator_ms`: the
  NPU subgraphs and the runtime's fixed time per call, fitted for that setup as `crossing.call_us@sima_zoo`,
  and no float conversion: ERFNet's 4 M-element output could not be converted on the host within its
  1.92 ms, and priced so it came out 1.48x slow with the host's conversion rate at its bound; without the
  call, ResNet-18 and SqueezeNet came out at half their published time). The model's latency is one frame
  alone with the host hand-overs (on x5 and mlsoc also the runtime's fixed time per call, `crossing.call_us`,
  which frames in flight overlap); its FPS the steady state with frames in flight. Where a source's definition differs, the
  crossing parameters absorb it. Horizon's two X5 tables come from different runtime releases: a classifier
  at 224 takes 0.37-1.02 ms more alone than its time per frame at 4 threads in the classification table and
  0.21-0.33 ms more in the YOLO table, so the runtime's time per call is fitted for each (the profile keeps
  the YOLO table's; `crossing.call_us@rdk_cls` is the classification table's). The RDK X5 table's EdgeNeXt
  frame rates are 1000 / its single-thread latency, so only those latencies are points; the three X5
  networks the zoo built with every layer at 16 bits (EfficientFormer L1/L3, EfficientFormerV2-S0) are built
  at 16 bits here, and the passes of the array a 16-bit layer takes (`bits16_factor`) are fitted on them.
- **Clocks and SDK versions.** Each profile models one clock and one toolchain generation (its sources say
  which); a figure from another SDK release can differ by 50% (TDA4VM MobileNetV1: 1.90 ms in SDK 08_01,
  1.04 in 08_02, 1.06 in 08_04, 1.51 in the newest datasheet). Where a source gives several releases, the
  newest one that lists the model is the point, chosen by release before any fit.
- **TI's frame rates are one frame at a time.** TI's model zoo writes FPS as 1000 / inference time, so a
  TI FPS figure (SPRADA8's AM68A MobileNetV2) is compared as a latency.
"""


def _earlier_runs(results: list[dict[str, Any]], earlier: list[str]) -> list[str]:
    """Which earlier run (its commit) each merged platform comes from."""
    by_commit: dict[str, list[str]] = {}
    for r in results:
        if r["platform"] in earlier:
            by_commit.setdefault(r.get("commit", ""), []).append(r["platform"])
    return [f"Platforms {', '.join(names)} are from an earlier run given to `--merge` (its commit is in"
            " `tools/credibility_results.json`); their profiles have not changed since."
            for _, names in sorted(by_commit.items())]


def credibility_page(results: list[dict[str, Any]], commit: str, command: str, earlier: list[str]) -> str:
    """docs/credibility.md, from one run of this bench."""
    out = ["# How far to trust the modelled accelerators", "",
           "<!-- generated by tools/credibility.py: do not edit by hand -->", "",
           "Every figure a family npu or mx3 build reports (FPS, latency) is a prediction of the platform's",
           "profile and cost model. This page says how well those predictions meet figures vendors published for real",
           "networks, and the band each benchmark.json and report.html quote comes from the numbers below",
           "(`accelbuild/targets/credibility.json`, written in the same run). Generated with this command (the run's",
           "commit is in `tools/credibility_results.json`):",
           "", f"    {command}", "",
           *([*_earlier_runs(results, earlier), ""] if earlier else []),
           "How it is measured:", "",
           "- Each network is rebuilt untrained at its published input size with torch + timm / ultralytics",
           "  (`tools/networks/export_networks.py`), imported by accelbuild, partitioned and scheduled for the",
           "  platform as a build would be (with `offload.max_subgraphs` at the profile's limit: a vendor's figure",
           "  is of the whole model, however many segments its toolchain cut), and simulated.",
           "- A `fps` point is the simulated steady state against a published throughput (several threads,",
           "  MLPerf Offline); a `latency_ms` point is one frame alone against a published single-frame time;",
           "  an `accelerator_ms` point is one frame through the accelerator alone (perf.json's stages of the NPU",
           "  subgraphs and of the runtime's call, no conversion) against a published time of the accelerator.",
           "- Per platform the free parameters below are fitted by least squares on log(predicted / published),",
           "  each within a physical range, with a weak pull to the profile's stated value. The fit runs the fast",
           "  cost model, then refits once with each point scaled by the simulator's figure over the cost model's",
           "  at the first answer (the effects the cost model leaves out), so it fits what a build reports.",
           "- **Joint fits**: TI's TDA4VM, AM62A and AM68A run TIDL on the same C7x + MMA core, so they are fitted",
           "  together: one value of each core parameter for all their figures, each platform's own host",
           "  hand-over (`crossing.*`: its Arm cores' work). Their profiles differ where the datasheets do (MMA",
           "  size, cores, DDR bandwidth).",
           "- **Left out**: each network's figures predicted by a fit on the other networks only",
           "  (leave-one-network-out; in a joint fit, left out of every platform). The band a report quotes is",
           "  the worst left-out error where there are at least two networks, else the worst in-sample error.",
           f"  Each left-out fit starts from the full fit's values and takes at most {LEFT_OUT_STEPS} steps of the",
           "  solver in each of its two passes; a fit run to convergence could move further from the full fit",
           "  than these did.",
           "- Ratio = predicted time / published time: above 1 the model is slower than the device.", "",
           "## Summary", "",
           "| platform | figures | networks | in-sample median / worst error | left-out median / worst error | "
           "not built | band quoted |",
           "|---|---|---|---|---|---|---|"]
    for r in results:
        ins, loo = r["in_sample"], r["leave_one_out"]
        measured = [p for p in r["points"] if p.get("kind") != "end_to_end"]  # mx3: see its section
        nets = len({p["network"] for p in measured})
        held = r.get("held_out")
        loo_text = f"{100 * loo['median_abs_error']:.1f}% / {100 * loo['worst_abs_error']:.1f}%" if loo else \
            f"{100 * held['median_abs_error']:.1f}% / {100 * held['worst_abs_error']:.1f}% (held out)" if held else "-"
        band = f"+-{r['band']['band_pct']:g}%" if r.get("band") else "-"
        out.append(f"| {r['platform']} | {len(measured)} | {nets} | {100 * ins['median_abs_error']:.1f}% / "
                   f"{100 * ins['worst_abs_error']:.1f}% | {loo_text} | {len(r['refused'])} | {band} |")
    out += ["", "## What the model cannot represent", "", LIMITS]
    for r in results:
        if r["platform"] == "mx3":
            out += mx3_section(r)
            continue
        joint = r.get("fitted_with") or []
        out += [f"## {r['platform']}", "",
                f"Fitted parameters{' (jointly with ' + ', '.join(joint) + ': shared ones marked)' if joint else ''}:",
                "", "| parameter | value | range | what it is |", "|---|---|---|---|"]
        for f in r["free"]:
            shared = " (shared)" if f.get("shared") else ""
            out.append(f"| `{f['path']}`{shared} | {_yaml_number(r['fitted'][f['path']])} | {f['low']:g} to "
                       f"{f['high']:g} | {f['meaning']} |")
        out += ["", "| network | figure | published | simulated | ratio | left out | source |",
                "|---|---|---|---|---|---|---|"]
        for row in r["points"]:
            loo = "-" if row["left_out_ratio"] is None else f"{row['left_out_ratio']:.2f}"
            out.append(f"| {row['network']} | {row['metric']} | {row['published']:g} | {row['simulated']:.4g} | "
                       f"{row['simulated_ratio']:.2f} | {loo} | {row['source']} |")
        for row in r["refused"]:
            out.append(f"| {row['network']} | {row['metric']} | {row['published']:g} | not built: "
                       f"{row['reason']} | - | - | {row['source']} |")
        out.append("")
    return "\n".join(out)


def mx3_section(r: dict[str, Any]) -> list[str]:
    """The mx3 part of the page: chip figures against the vendor's, end-to-end figures against Frigate's."""
    whole = r["end_to_end"]
    sustained = r["chips_sustain_published_fps"]
    held = r.get("held_out")
    out = ["## mx3", "",
           f"Not fitted: {r['not_fitted']}. The profile keeps its stated values (accelbuild/targets/mx3/profiles/"
           "mx3.yaml says where each comes from). The band reports quote is the error on the held-out rows: "
           "figures of the chips the vendor measured and the profile was never set to.", "",
           "- **calibration** rows compare the simulated figures of the chips with the ResNet-50 figure the "
           "profile's values were set to (quoted by third-party benchmarks; no stored copy of a MemryX page "
           "with it was found).",
           "- **held_out** rows compare the simulated FPS of the chips with MemryX's own factory-diagnostics "
           "runs: the SDK's Benchmark on synthetic frames, gbf80 input and output, a pre-release SDK of February "
           "2024, clock not stated. Each network is built for the chips its DFP was compiled for (the row's "
           "name says: 1 to 8; the M.2 module has 4). Many small networks in the same run sit at 1,560-1,620 FPS "
           "whatever their size (MobileNetV1 and V2, MobileNetV3, YOLOv8n-cls, MnasNet), a per-frame ceiling of "
           "that run's host and driver that the model does not have. The Keras networks are rebuilt from Keras "
           "Applications (`tools/networks/export_keras_networks.py`) and imported from `.keras`, as the vendor "
           "compiled them; YOLOv8n and -s at 640 end at their raw heads, where the vendor's TFLite files go on "
           "to decode the boxes. The MediaPipe rows are MediaPipe's own trained TFLite files "
           "(`tools/networks/mediapipe_models.py`).",
           "- **end_to_end** rows compare the build's end-to-end figures with Frigate's: FPS is the slowest of the "
           "simulated chips and the host sections (cropped by `crop: {auto: true}`, timed in onnxruntime on this "
           "machine), latency the simulated latency plus the host times. Frigate times its own host code (Python, "
           "NumPy, an Intel i7-13700), so these rows check the end-to-end composition, not the chips, and "
           "their error includes two different hosts.",
           "- As a bound on the chips: their simulated FPS must be at least the published end-to-end FPS; "
           f"it is on {sum(sustained)} of {len(sustained)} networks.",
           "- `tools/mx3_vendor_reading.py` reads the held-out rows two ways (the stated profile, and TOPS as 2 ops "
           "per MAC), with one fitted time per frame added to the chips' period and with four fitted terms (a "
           "scale of the period, a time per frame, per activation byte per chip and per layer), each network also "
           "left out of the fit. It changes no profile: no reading meets every row (see its output).", ""]
    if held:
        out += [f"Held-out rows: median error {100 * held['median_abs_error']:.1f}%, worst "
                f"{100 * held['worst_abs_error']:.1f}%.", ""]
    if whole:
        out += [f"End-to-end rows: median error {100 * whole['median_abs_error']:.1f}%, worst "
                f"{100 * whole['worst_abs_error']:.1f}%.", ""]
    out += ["| network | figure | kind | published | accelbuild | ratio | chips alone | chips ratio | host ms | "
            "bound by | source |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in r["points"]:
        out.append(f"| {row['network']} | {row['metric']} | {row['kind']} | {row['published']:g} | "
                   f"{row['simulated']:.4g} | {row['simulated_ratio']:.2f} | {row['chip']:.4g} | "
                   f"{row['chip_ratio']:.2f} | {row['host_ms']:.3g} | {row['bound']} | {row['source']} |")
    for row in r["refused"]:
        out.append(f"| {row['network']} | {row['metric']} | - | {row['published']:g} | not built: {row['reason']} "
                   f"| - | - | - | - | - | {row['source']} |")
    out.append("")
    return out


def write_all(results: list[dict[str, Any]], page: list[dict[str, Any]], command: str) -> None:
    """This run's fitted values into the profiles, then their bands (with the written profiles' digests), and
    the page from ``page`` (this run's results and, with --merge, an earlier run's other platforms)."""
    from accelbuild.targets.npu.hardware import load_npu_hardware

    commit = git_commit()

    def source(joint: list[str]) -> str:
        jointly = f" jointly with {', '.join(joint)}" if joint else ""
        return f"fitted by tools/credibility.py at {commit}{jointly} (docs/credibility.md)"

    table_path = ROOT / "accelbuild" / "targets" / "credibility.json"
    table = json.loads(table_path.read_text()) if table_path.exists() else {}
    npu = table.setdefault("npu", {})
    for r in results:
        if r["platform"] == "mx3":  # not fitted: its band only
            entries = table.setdefault("mx3", {})
            for name, digest in mx3.builtin_digests().items():  # mx3_preprod: the same values under its name
                entries[name] = band_entry(r, digest)
            r["band"] = entries["mx3"]
            continue
        write_profile_values(builtin_profiles()[r["platform"]], r["fitted"], source(r.get("fitted_with") or []))
        r["band"] = npu[r["platform"]] = band_entry(r, load_npu_hardware(r["platform"]).digest)
    table["generated_by"] = f"tools/credibility.py at {commit}"
    write_json_atomic(table_path, table)
    this_run = {r["platform"] for r in results}
    earlier = sorted(r["platform"] for r in page if r["platform"] not in this_run)
    run = {"commit": commit, "command": command, "earlier": earlier, "results": page}
    write_json_atomic(RESULTS, run)
    text = credibility_page(page, commit, command, earlier) + "\n"
    write_bytes_atomic(ROOT / "docs" / "credibility.md", text.encode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-python", required=True, help="a python with torch, timm and ultralytics")
    parser.add_argument("--models", type=Path, default=Path(tempfile.gettempdir()) / "accelbuild-credibility-nets")
    parser.add_argument("--platforms", default=",".join(sorted({p.platform for p in POINTS})))
    parser.add_argument("--networks", help="only these networks (comma-separated; development)")
    parser.add_argument("--jobs", type=int, default=2, help="fits run at once (processes)")
    parser.add_argument("--no-loo", action="store_true", help="skip leave-one-out (development)")
    parser.add_argument("--save", type=Path, help="also write the results as JSON here")
    parser.add_argument("--merge", type=Path, default=RESULTS,
                        help="with --write: the other platforms' results, from an earlier --save or (default) "
                             "the page's run, tools/credibility_results.json (the page lists every platform)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write", action="store_true",
                        help="write the fitted values into the built-in profiles, docs/credibility.md and "
                             "accelbuild/targets/credibility.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("accelbuild").setLevel(logging.WARNING)
    platforms = args.platforms.split(",")
    points = [p for p in POINTS if p.platform in platforms and
              (not args.networks or p.network in args.networks.split(","))]
    args.models.mkdir(parents=True, exist_ok=True)
    export_networks(args.torch_python, args.models, [p.network for p in points])
    for name in sorted({p.network for p in points if p.platform != "mx3"}):
        imported(args.models, name)  # once, before the platforms share the work
    groups = [(group, [p for p in points if p.platform in group]) for group in fit_groups(platforms)]
    by_name = run_all(groups, args.models, args.jobs, not args.no_loo)
    commit = git_commit()
    for r in by_name.values():
        r["commit"] = commit  # a later --merge names the run
    results = [by_name[name] for name in platforms]
    if args.write:
        earlier = json.loads(args.merge.read_text()) if args.merge.exists() else []
        earlier = earlier["results"] if isinstance(earlier, dict) else earlier  # a results file or a --save
        merged = [r for r in earlier if r["platform"] not in platforms] + results
        merged.sort(key=lambda r: r["platform"])
        write_all(results, merged, " ".join(["python -m tools.credibility", *sys.argv[1:]]))
        results = merged
    if args.save:
        args.save.write_text(json.dumps(results, indent=1))
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for r in results:
        print(f"\n{r['platform']}: fitted {r['fitted']}")
        for row in r["points"]:
            loo = "" if row["left_out_ratio"] is None else f"{row['left_out_ratio']:.2f}"
            print(f"  {row['network']:<20} {row['metric']:<10} published {row['published']:>9g} "
                  f"time ratio {row['ratio']:.2f} (simulated {row['simulated_ratio']:.2f}) left out {loo}")
        print(f"  in sample {r['in_sample']}; leave-one-out {r['leave_one_out']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
