"""Rebuild published networks with random weights and export them to ONNX, run by ``bench/credibility.py``
in a venv of its own (torch, timm, ultralytics; never dependencies of accelbuild).

Timing depends on the architecture, not the weights, so each network is built untrained at its published
input size, in the form the published figure was measured on:

- timm classifiers, reparameterised where the model family has a deploy form (MobileOne, RepVGG, FastViT:
  ``timm.utils.reparameterize_model``), head included;
- torchvision MobileNetV2 (TI's ``mobileNetV2-tv``);
- ultralytics YOLOv8 detectors cut where the RDK model zoo cuts them for the BPU: the six raw head
  convolutions (box and class per stride), no DFL / decode;
- YOLOv5 v7.0 (anchor-based): ultralytics' YOLOv5 backbone and neck with the v7.0 head (one 1x1
  convolution of 3 x (5 + 80) channels per stride), as the RDK zoo exports it.

    python bench/peers/export_networks.py OUT_DIR NAME [NAME ...]

Prints one JSON line per network: its name, file and parameter count. Existing files are kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch import nn

OPSET = 17


def timm_net(name: str, reparameterize: bool = False) -> nn.Module:
    import timm

    model = timm.create_model(name, pretrained=False)
    if reparameterize:
        from timm.utils.model import reparameterize_model

        model = reparameterize_model(model)
    return model


def torchvision_net(name: str) -> nn.Module:
    import torchvision

    extra = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
    return getattr(torchvision.models, name)(weights=None, **extra)


class _RawHeads(nn.Module):
    """YOLOv8's Detect without DFL and decode: per stride, the box and class convolutions' outputs."""

    def __init__(self, detect: nn.Module) -> None:
        super().__init__()
        self.detect = detect
        self.f, self.i, self.type = detect.f, detect.i, "raw_heads"

    def forward(self, x: list[torch.Tensor]) -> list[torch.Tensor]:
        outs = []
        for level in range(self.detect.nl):
            outs += [self.detect.cv2[level](x[level]), self.detect.cv3[level](x[level])]
        return outs


class _V5Head(nn.Module):
    """YOLOv5 v7.0's anchor-based head: one 1x1 convolution of 3 x (5 + classes) channels per stride."""

    def __init__(self, detect: nn.Module, channels: list[int], classes: int = 80) -> None:
        super().__init__()
        self.f, self.i, self.type = detect.f, detect.i, "v5_head"
        self.m = nn.ModuleList(nn.Conv2d(c, 3 * (5 + classes), 1) for c in channels)

    def forward(self, x: list[torch.Tensor]) -> list[torch.Tensor]:
        return [conv(level) for conv, level in zip(self.m, x)]


def yolo_cls(config: str) -> nn.Module:
    from ultralytics.nn.tasks import ClassificationModel

    return ClassificationModel(config, verbose=False)


def yolo(config: str, v5_head: bool = False) -> nn.Module:
    from ultralytics.nn.tasks import DetectionModel

    model = DetectionModel(config, verbose=False)
    detect = model.model[-1]
    if v5_head:
        channels = [seq[0].conv.in_channels for seq in detect.cv2]
        model.model[-1] = _V5Head(detect, channels)
    else:
        model.model[-1] = _RawHeads(detect)
    return model


# name -> (builder, input size)
NETWORKS = {
    "resnet18": (lambda: timm_net("resnet18"), 224),
    "resnet50": (lambda: timm_net("resnet50"), 224),
    "mobileone_s0": (lambda: timm_net("mobileone_s0", True), 224),
    "mobileone_s4": (lambda: timm_net("mobileone_s4", True), 224),
    "repvgg_a0": (lambda: timm_net("repvgg_a0", True), 224),
    "repvgg_a2": (lambda: timm_net("repvgg_a2", True), 224),
    "efficientformer_l3": (lambda: timm_net("efficientformer_l3"), 224),
    "fastvit_sa12": (lambda: timm_net("fastvit_sa12", True), 224),
    "mobilenetv1_100": (lambda: timm_net("mobilenetv1_100"), 224),
    "regnetx_002": (lambda: timm_net("regnetx_002"), 224),
    "mobilenet_v2_tv": (lambda: torchvision_net("mobilenet_v2"), 224),
    **{name: ((lambda name=name: timm_net(name, True)), 224) for name in (
        "mobilenetv4_conv_small", "mobileone_s1", "repghostnet_100", "repvgg_a1", "repvit_m0_9", "mobilenetv2_100",
        "mobilenetv2_140", "regnetx_004", "regnetx_008", "resnet34", "resnet101", "resnet152", "efficientnet_b0",
        "densenet121")},
    "googlenet_tv": (lambda: torchvision_net("googlenet"), 224),
    "squeezenet1_1_tv": (lambda: torchvision_net("squeezenet1_1"), 224),
    "vgg16_tv": (lambda: torchvision_net("vgg16"), 224),
    **{f"yolov8{s}_cls_224": ((lambda s=s: yolo_cls(f"yolov8{s}-cls.yaml")), 224) for s in "nsmlx"},
    **{f"yolov5{s}u_640": ((lambda s=s: yolo(f"yolov5{s}u.yaml")), 640) for s in "nsmlx"},
    **{f"yolo11{s}_640": ((lambda s=s: yolo(f"yolo11{s}.yaml")), 640) for s in "nsmlx"},
    **{f"yolov8{s}_640": ((lambda s=s: yolo(f"yolov8{s}.yaml")), 640) for s in "nsmlx"},
    **{f"yolov5{s}_640": ((lambda s=s: yolo(f"yolov5{s}.yaml", v5_head=True)), 640) for s in "nsmlx"},
}


def export(name: str, out: Path) -> dict:
    builder, size = NETWORKS[name]
    target = out / f"{name}.onnx"
    torch.manual_seed(0)
    model = builder().eval()
    params = sum(p.numel() for p in model.parameters())
    if not target.exists():
        tmp = target.with_suffix(".tmp.onnx")
        with torch.no_grad():
            torch.onnx.export(model, torch.zeros(1, 3, size, size), str(tmp), opset_version=OPSET,
                              input_names=["input"], dynamo=False, do_constant_folding=True)
        tmp.replace(target)
    return {"name": name, "file": str(target), "input_size": size, "parameters": params}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("names", nargs="+", choices=sorted(NETWORKS))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names:
        print(json.dumps(export(name, args.out)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
