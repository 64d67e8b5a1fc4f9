"""Rebuild published networks with random weights and export them to ONNX, run by ``tools/credibility.py``
in a venv of its own (torch, timm, ultralytics; never dependencies of accelbuild).

Timing depends on the architecture, not the weights, so each network is built untrained at its published
input size, in the form the published figure was measured on:

- timm classifiers, reparameterised where the model family has a deploy form (MobileOne, RepVGG, FastViT:
  ``timm.utils.reparameterize_model``), head included;
- torchvision MobileNetV2 (TI's ``mobileNetV2-tv``);
- ultralytics YOLOv8 detectors cut where the RDK model zoo cuts them for the BPU: the six raw head
  convolutions (box and class per stride), no DFL / decode;
- YOLOv5 v7.0 (anchor-based): ultralytics' YOLOv5 backbone and neck with the v7.0 head (one 1x1
  convolution of 3 x (5 + 80) channels per stride), as the RDK zoo exports it;
- TI's YOLOX "lite" detectors (edgeai-mmdetection ``configs_edgeailite/yolox``): MMDetection's YOLOX
  (CSPDarknet, PAFPN, decoupled head) with its model surgery: ReLU for SiLU, a stride-2 convolution for the
  Focus slicing and 3x3 max-pool cascades for SPP's 5/9/13 pools (TIDL pools 3x3 at most); nano uses
  regular convolutions. Exported up to the per-stride (box, objectness, classes) maps TIDL's detection layer
  decodes.

    python tools/networks/export_networks.py OUT_DIR NAME [NAME ...]

Prints one JSON line per network: its name, file and parameter count. Existing files are kept.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import export_cli
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


def _conv(c_in: int, c_out: int, k: int = 1, s: int = 1, act: Callable[[], nn.Module] = nn.ReLU) -> nn.Module:
    """Convolution (no bias), batch norm and ``act``."""
    return nn.Sequential(nn.Conv2d(c_in, c_out, k, s, k // 2, bias=False), nn.BatchNorm2d(c_out), act())


class _Csp(nn.Module):
    """YOLOX's CSP layer: two 1x1 halves, ``n`` bottlenecks (1x1, 3x3) on one, a 1x1 over both."""

    def __init__(self, c_in: int, c_out: int, n: int, shortcut: bool = True) -> None:
        super().__init__()
        hidden = c_out // 2
        self.main, self.short, self.final = _conv(c_in, hidden), _conv(c_in, hidden), _conv(2 * hidden, c_out)
        self.blocks = nn.ModuleList(nn.Sequential(_conv(hidden, hidden), _conv(hidden, hidden, 3)) for _ in range(n))
        self.shortcut = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.main(x)
        for block in self.blocks:
            y = y + block(y) if self.shortcut else block(y)
        return self.final(torch.cat([y, self.short(x)], 1))


class _Spp(nn.Module):
    """SPP with TI's 3x3 cascades: pools of 5, 9 and 13 as 2, 4 and 6 chained 3x3 max-pools."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.reduce, self.expand = _conv(c_in, c_in // 2), _conv(c_in // 2 * 4, c_out)
        self.pool = nn.MaxPool2d(3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.reduce(x)
        outs = [x]
        for _ in range(3):  # each stage is two more 3x3 pools: 5, 9, 13
            outs.append(self.pool(self.pool(outs[-1])))
        return self.expand(torch.cat(outs, 1))


class YoloxLite(nn.Module):
    """MMDetection's YOLOX (CSPDarknet-P5, YOLOXPAFPN, YOLOXHead) after TI's lite surgery."""

    def __init__(self, deepen: float, widen: float, classes: int = 80) -> None:
        super().__init__()
        c = [int(v * widen) for v in (64, 128, 256, 512, 1024)]
        n = [max(round(v * deepen), 1) for v in (3, 9, 9, 3)]
        self.stem = _conv(3, c[0], 3, 2)  # TI: a stride-2 convolution for Focus
        self.dark2 = nn.Sequential(_conv(c[0], c[1], 3, 2), _Csp(c[1], c[1], n[0]))
        self.dark3 = nn.Sequential(_conv(c[1], c[2], 3, 2), _Csp(c[2], c[2], n[1]))
        self.dark4 = nn.Sequential(_conv(c[2], c[3], 3, 2), _Csp(c[3], c[3], n[2]))
        self.dark5 = nn.Sequential(_conv(c[3], c[4], 3, 2), _Spp(c[4], c[4]), _Csp(c[4], c[4], n[3], False))
        blocks = n[3]
        self.reduce5, self.reduce4 = _conv(c[4], c[3]), _conv(c[3], c[2])
        self.top_down4, self.top_down3 = _Csp(2 * c[3], c[3], blocks, False), _Csp(2 * c[2], c[2], blocks, False)
        self.down3, self.down4 = _conv(c[2], c[2], 3, 2), _conv(c[3], c[3], 3, 2)
        self.bottom_up4, self.bottom_up5 = _Csp(2 * c[2], c[3], blocks, False), _Csp(2 * c[3], c[4], blocks, False)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        feat = c[2]  # the head's width: the neck's out_channels
        self.outs = nn.ModuleList(_conv(ch, feat) for ch in (c[2], c[3], c[4]))
        self.cls = nn.ModuleList(nn.Sequential(_conv(feat, feat, 3), _conv(feat, feat, 3)) for _ in range(3))
        self.reg = nn.ModuleList(nn.Sequential(_conv(feat, feat, 3), _conv(feat, feat, 3)) for _ in range(3))
        self.cls_pred = nn.ModuleList(nn.Conv2d(feat, classes, 1) for _ in range(3))
        self.reg_pred = nn.ModuleList(nn.Conv2d(feat, 4, 1) for _ in range(3))
        self.obj_pred = nn.ModuleList(nn.Conv2d(feat, 1, 1) for _ in range(3))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x3 = self.dark3(self.dark2(self.stem(x)))
        x4 = self.dark4(x3)
        x5 = self.dark5(x4)
        top5 = self.reduce5(x5)
        p4 = self.top_down4(torch.cat([self.upsample(top5), x4], 1))
        top4 = self.reduce4(p4)
        p3 = self.top_down3(torch.cat([self.upsample(top4), x3], 1))
        n4 = self.bottom_up4(torch.cat([self.down3(p3), top4], 1))
        n5 = self.bottom_up5(torch.cat([self.down4(n4), top5], 1))
        results = []
        for level, feature in enumerate((p3, n4, n5)):
            f = self.outs[level](feature)
            cls_feat, reg_feat = self.cls[level](f), self.reg[level](f)
            results.append(torch.cat([self.reg_pred[level](reg_feat), self.obj_pred[level](reg_feat).sigmoid(),
                                      self.cls_pred[level](cls_feat).sigmoid()], 1))
        return results


class _Downsampler(nn.Module):
    """ERFNet's downsampler: a stride-2 3x3 convolution beside a 2x2 max-pool, concatenated."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv, self.pool = nn.Conv2d(c_in, c_out - c_in, 3, 2, 1), nn.MaxPool2d(2, 2)
        self.bn = nn.BatchNorm2d(c_out, eps=1e-3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(torch.cat([self.conv(x), self.pool(x)], 1)))


class _NonBottleneck1d(nn.Module):
    """ERFNet's residual block: 3x1 and 1x3 convolutions, the second pair dilated by ``dilation``."""

    def __init__(self, channels: int, dilation: int) -> None:
        super().__init__()
        c, d = channels, dilation
        self.conv1 = nn.Sequential(nn.Conv2d(c, c, (3, 1), padding=(1, 0)), nn.ReLU(),
                                   nn.Conv2d(c, c, (1, 3), padding=(0, 1)), nn.BatchNorm2d(c, eps=1e-3), nn.ReLU())
        self.conv2 = nn.Sequential(nn.Conv2d(c, c, (3, 1), padding=(d, 0), dilation=(d, 1)), nn.ReLU(),
                                   nn.Conv2d(c, c, (1, 3), padding=(0, d), dilation=(1, d)),
                                   nn.BatchNorm2d(c, eps=1e-3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv2(self.conv1(x)) + x)


def _upsampler(c_in: int, c_out: int) -> nn.Module:
    return nn.Sequential(nn.ConvTranspose2d(c_in, c_out, 3, 2, 1, output_padding=1), nn.BatchNorm2d(c_out, eps=1e-3),
                         nn.ReLU())


def erfnet(classes: int = 20) -> nn.Module:
    """ERFNet (Romera et al., 2017; OpenVINO's erfnet, Cityscapes' 20 classes): factorised residual blocks,
    dilated by 2 to 16 in the encoder's last stage, transposed convolutions back to full size."""
    dilated = [_NonBottleneck1d(128, d) for _ in range(2) for d in (2, 4, 8, 16)]
    return nn.Sequential(_Downsampler(3, 16), _Downsampler(16, 64), *[_NonBottleneck1d(64, 1) for _ in range(5)],
                         _Downsampler(64, 128), *dilated,
                         _upsampler(128, 64), _NonBottleneck1d(64, 1), _NonBottleneck1d(64, 1),
                         _upsampler(64, 16), _NonBottleneck1d(16, 1), _NonBottleneck1d(16, 1),
                         nn.ConvTranspose2d(16, classes, 2, 2))


_mish = partial(_conv, act=nn.Mish)  # Darknet's convolutions: Mish in YOLOv4's backbone,
_leaky = partial(_conv, act=partial(nn.LeakyReLU, 0.1))  # leaky ReLU 0.1 in its neck


class _CspStage(nn.Module):
    """CSPDarknet53's stage: a stride-2 convolution, two 1x1 halves, ``n`` residual blocks on one, a 1x1 over
    both (the first stage keeps full width in its halves)."""

    def __init__(self, c_in: int, c_out: int, n: int) -> None:
        super().__init__()
        half = c_out if n == 1 else c_out // 2
        inner = c_out // 2 if n == 1 else half
        self.down, self.short, self.main = _mish(c_in, c_out, 3, 2), _mish(c_out, half), _mish(c_out, half)
        self.blocks = nn.ModuleList(nn.Sequential(_mish(half, inner), _mish(inner, half, 3)) for _ in range(n))
        self.after, self.final = _mish(half, half), _mish(2 * half, c_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.down(x)
        y = self.main(x)
        for block in self.blocks:
            y = y + block(y)
        return self.final(torch.cat([self.after(y), self.short(x)], 1))


def _five(c_in: int, c: int) -> nn.Module:
    """The neck's five alternating 1x1 / 3x3 convolutions."""
    return nn.Sequential(_leaky(c_in, c), _leaky(c, 2 * c, 3), _leaky(2 * c, c),
                         _leaky(c, 2 * c, 3), _leaky(2 * c, c))


class YoloV4(nn.Module):
    """YOLOv4 (Bochkovskiy et al., 2020; OpenVINO's yolo-v4-tf, from keras-YOLOv3-model-set): CSPDarknet53 with
    Mish, SPP (max-pools of 5, 9 and 13), PANet with leaky ReLU, three 1x1 heads of 3 x 85 channels."""

    def __init__(self, classes: int = 80) -> None:
        super().__init__()
        out = 3 * (5 + classes)
        self.stem = _mish(3, 32, 3)
        self.stages = nn.ModuleList(_CspStage(c_in, c_out, n) for c_in, c_out, n in (
            (32, 64, 1), (64, 128, 2), (128, 256, 8), (256, 512, 8), (512, 1024, 4)))
        self.pre_spp = nn.Sequential(_leaky(1024, 512), _leaky(512, 1024, 3),
                                     _leaky(1024, 512))
        self.pools = nn.ModuleList(nn.MaxPool2d(k, 1, k // 2) for k in (5, 9, 13))
        self.post_spp = nn.Sequential(_leaky(2048, 512), _leaky(512, 1024, 3),
                                      _leaky(1024, 512))
        self.up5, self.lat4, self.td4 = _leaky(512, 256), _leaky(512, 256), _five(512, 256)
        self.up4, self.lat3, self.td3 = _leaky(256, 128), _leaky(256, 128), _five(256, 128)
        self.down3, self.bu4 = _leaky(128, 256, 3, 2), _five(512, 256)
        self.down4, self.bu5 = _leaky(256, 512, 3, 2), _five(1024, 512)
        self.heads = nn.ModuleList(nn.Sequential(_leaky(c, 2 * c, 3), nn.Conv2d(2 * c, out, 1))
                                   for c in (128, 256, 512))
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.stem(x)
        features = []
        for stage in self.stages:
            x = stage(x)
            features.append(x)
        c3, c4, c5 = features[2:]
        p5 = self.pre_spp(c5)
        p5 = self.post_spp(torch.cat([p5, *(pool(p5) for pool in self.pools)], 1))
        p4 = self.td4(torch.cat([self.lat4(c4), self.upsample(self.up5(p5))], 1))
        p3 = self.td3(torch.cat([self.lat3(c3), self.upsample(self.up4(p4))], 1))
        n4 = self.bu4(torch.cat([self.down3(p3), p4], 1))
        n5 = self.bu5(torch.cat([self.down4(n4), p5], 1))
        return [head(level) for head, level in zip(self.heads, (p3, n4, n5))]


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


# name -> (builder, input size: square, or (height, width))
NETWORKS: dict[str, tuple[Callable[[], nn.Module], int | tuple[int, int]]] = {
    "resnet18": (lambda: timm_net("resnet18"), 224),
    "resnet50": (lambda: timm_net("resnet50"), 224),
    "mobileone_s0": (lambda: timm_net("mobileone_s0", True), 224),
    "mobileone_s4": (lambda: timm_net("mobileone_s4", True), 224),
    "repvgg_a0": (lambda: timm_net("repvgg_a0", True), 224),
    "repvgg_a2": (lambda: timm_net("repvgg_a2", True), 224),
    "repvgg_b0": (lambda: timm_net("repvgg_b0", True), 224),
    "gernet_m": (lambda: timm_net("gernet_m"), 224),
    "gernet_s": (lambda: timm_net("gernet_s"), 224),
    "efficientformer_l3": (lambda: timm_net("efficientformer_l3"), 224),
    "fastvit_sa12": (lambda: timm_net("fastvit_sa12", True), 224),
    "mobilenetv1_100": (lambda: timm_net("mobilenetv1_100"), 224),
    "regnetx_002": (lambda: timm_net("regnetx_002"), 224),
    "mobilenet_v2_tv": (lambda: torchvision_net("mobilenet_v2"), 224),
    **{name: ((lambda name=name: timm_net(name, True)), 224) for name in (
        "mobilenetv4_conv_small", "mobileone_s1", "repghostnet_100", "repvgg_a1", "repvit_m0_9", "mobilenetv2_100",
        "mobilenetv2_140", "regnetx_004", "regnetx_008", "resnet34", "resnet101", "resnet152", "efficientnet_b0",
        "densenet121",
        # the RDK X5 classification table's other networks (tools/credibility.py RDK_CLS)
        "edgenext_base", "edgenext_small", "edgenext_x_small", "edgenext_xx_small", "efficientformer_l1",
        "efficientformerv2_s0", "efficientformerv2_s1", "efficientformerv2_s2", "efficientvit_m5", "fastvit_s12",
        "fastvit_t12", "fastvit_t8", "fasternet_s", "fasternet_t0", "fasternet_t1", "fasternet_t2", "repvgg_b1g4",
        "repvit_m1_0", "repvit_m1_1", "mobileone_s2", "mobileone_s3")},
    "googlenet_tv": (lambda: torchvision_net("googlenet"), 224),
    "mnasnet1_0_tv": (lambda: torchvision_net("mnasnet1_0"), 224),
    "squeezenet1_1_tv": (lambda: torchvision_net("squeezenet1_1"), 224),
    "vgg16_tv": (lambda: torchvision_net("vgg16"), 224),
    # SiMa's model zoo's torchvision rows whose weights dominate their frame (tools/credibility.py: mlsoc)
    **{f"{name}_tv": ((lambda name=name: torchvision_net(name)), 224) for name in (
        "alexnet", "vgg11", "vgg19", "wide_resnet50_2", "wide_resnet101_2", "regnet_x_16gf", "regnet_y_16gf")},
    # the same table's rows with operators or limits the mlsoc profile had not seen: dilation 16, GELU,
    # tree aggregation, Mish and 13x13 pools (OpenVINO's erfnet at 208x976, nfnet-f0 at 256, dla-34 and
    # yolo-v4-tf at 416; timm's dm_nfnet_f0 is DeepMind's NFNet-F0, the weights OpenVINO converted)
    "erfnet_208x976": (erfnet, (208, 976)),
    "dm_nfnet_f0_256": (lambda: timm_net("dm_nfnet_f0"), 256),
    "dla34": (lambda: timm_net("dla34"), 224),
    "yolov4_416": (YoloV4, 416),
    # and its torchvision EfficientNets, whose squeeze-excite gating and residual adds are vector work
    **{f"{name}_tv": ((lambda name=name: torchvision_net(name)), 224) for name in (
        "efficientnet_b1", "efficientnet_b3", "efficientnet_b5", "efficientnet_b7", "efficientnet_v2_s",
        "efficientnet_v2_m")},
    **{f"yolov8{s}_cls_224": ((lambda s=s: yolo_cls(f"yolov8{s}-cls.yaml")), 224) for s in "nsmlx"},
    **{f"yolo11{s}_cls_224": ((lambda s=s: yolo_cls(f"yolo11{s}-cls.yaml")), 224) for s in "nsmlx"},
    **{f"yolov5{s}u_640": ((lambda s=s: yolo(f"yolov5{s}u.yaml")), 640) for s in "nsmlx"},
    **{f"yolo11{s}_640": ((lambda s=s: yolo(f"yolo11{s}.yaml")), 640) for s in "nsmlx"},
    **{f"yolov8{s}_640": ((lambda s=s: yolo(f"yolov8{s}.yaml")), 640) for s in "nsmlx"},
    **{f"yolov5{s}_640": ((lambda s=s: yolo(f"yolov5{s}.yaml", v5_head=True)), 640) for s in "nsmlx"},
    # edgeai-mmdetection configs_edgeailite/yolox: (deepen_factor, widen_factor) and the published input size
    "yolox_nano_lite_416": (lambda: YoloxLite(0.33, 0.25), 416),
    "yolox_tiny_lite_416": (lambda: YoloxLite(0.33, 0.375), 416),
    "yolox_s_lite_640": (lambda: YoloxLite(0.33, 0.5), 640),
}


def export(name: str, out: Path) -> dict:
    builder, size = NETWORKS[name]
    height, width = size if isinstance(size, tuple) else (size, size)
    target = out / f"{name}.onnx"
    torch.manual_seed(0)
    model = builder().eval()
    params = sum(p.numel() for p in model.parameters())
    if not target.exists():
        tmp = target.with_suffix(".tmp.onnx")
        with torch.no_grad():
            torch.onnx.export(model, torch.zeros(1, 3, height, width), str(tmp), opset_version=OPSET,
                              input_names=["input"], dynamo=False, do_constant_folding=True)
        tmp.replace(target)
    return {"name": name, "file": str(target), "input_size": size, "parameters": params}


if __name__ == "__main__":
    sys.exit(export_cli.main(__doc__, NETWORKS, export))
