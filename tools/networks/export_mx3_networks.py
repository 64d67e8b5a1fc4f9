#!/usr/bin/env python3
"""Export the networks of the published MX3 figures (random weights, architecture only) to ONNX, run by
``tools/credibility.py`` (its mx3 part) in the torch venv, like ``export_networks.py``. Needs, besides torch and
ultralytics: ``pip install yolox==0.3.0 --no-deps --no-build-isolation`` with loguru and tabulate, and
``pip install super-gradients==3.7.1 --no-deps`` with omegaconf, hydra-core, antlr4-python3-runtime==4.9.3,
termcolor, boto3, stringcase, jsonschema, rapidfuzz, torchmetrics==0.8.0, treelib==1.6.1, imagesize, scipy,
einops, Deprecated, data-gradients==0.3.2, platformdirs, pandas, seaborn and pytz (``_install_sg_import_shims``
stubs the modules super-gradients imports only for its own export and logging).

Produces (opset 17, batch 1, static NCHW float32 shapes):
  yolov9s_320.onnx, yolov9s_640.onnx     ultralytics YOLOv9s built from yolov9s.yaml (no weights)
  yolox_s_640.onnx, yolox_m_640.onnx     Megvii YOLOX-S / -M (pip package `yolox` 0.3.0), decode_in_inference=False
  yolo_nas_s_320.onnx, yolo_nas_s_640.onnx  Deci YOLO-NAS-S (super-gradients 3.7.1), QARepVGG fused
  ssdlite_mobilenetv2_320.onnx           SSDlite + MobileNetV2 (TF OD API ssdlite_mobilenet_v2_coco layout),
                                         network only (raw box regressions + class logits, no anchors/NMS)
  resnet50_224.onnx                      torchvision resnet50(weights=None)

Usage (python of a venv with torch, torchvision, ultralytics, yolox, super-gradients):
  /work/venv-timm/bin/python export_mx3_networks.py [--out /tmp/nets_mx3] [--only yolox_s_640,...]
        [--ort-python /work/venv/bin/python]

Every file is checked with onnx.checker.check_model(full_check=True) and onnx.shape_inference.infer_shapes
(strict), all value shapes must be static, and (if --ort-python has onnxruntime) each file is run once with
onnxruntime on CPU and compared against the PyTorch output.  A manifest.json with versions, parameter counts
and Conv/Gemm/MatMul MAC counts is written next to the files.

Weights: random (framework default init).  BatchNorm affine params / running stats are additionally jittered
with a fixed seed (randomize_bn) so that BN-folded conv biases are not all zero; otherwise the torch exporter
de-duplicates identical zero tensors into Identity-aliased initializers.  This only changes values, never the
graph structure.

YOLO-NAS is exported in a child process of this script because importing super-gradients here needs a few
import shims (pkg_resources, onnxsim, onnxruntime, tensorboard, xhtml2pdf, imagededup are stubbed) which should
not leak into the other exports.
"""
import argparse
import copy
import importlib
import json
import os
import subprocess
import sys
import tempfile
import types

import numpy as np

OPSET = 17
SEED = 0
ALL = ["yolov9s_320", "yolov9s_640", "yolox_s_640", "yolox_m_640", "yolo_nas_s_320", "yolo_nas_s_640",
       "ssdlite_mobilenetv2_320", "resnet50_224"]


# ----------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------
def randomize_bn(model, seed=SEED):
    """Deterministically jitter BN params/stats (values only) so folded biases are non-degenerate."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                n = m.num_features
                if m.weight is not None:
                    m.weight.copy_(1.0 + 0.1 * (torch.rand(n, generator=g) - 0.5))
                    m.bias.copy_(0.02 * torch.randn(n, generator=g))
                if m.running_mean is not None:
                    m.running_mean.copy_(0.02 * torch.randn(n, generator=g))
                    m.running_var.copy_(1.0 + 0.1 * (torch.rand(n, generator=g) - 0.5))
    return model


def torch_params(model):
    return int(sum(p.numel() for p in model.parameters()))


def to_numpy_outputs(y):
    import torch
    if isinstance(y, torch.Tensor):
        return [y.detach().cpu().numpy()]
    if isinstance(y, dict):
        y = list(y.values())
    out = []
    for t in y:
        out += to_numpy_outputs(t)
    return out


def torch_export(model, x, path, input_names, output_names):
    import torch
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, (x,), path, opset_version=OPSET, input_names=input_names,
                          output_names=output_names, do_constant_folding=True, dynamo=False,
                          training=torch.onnx.TrainingMode.EVAL)


def save_ref(path, x, outs):
    np.savez(path + ".ref.npz", input=x.detach().cpu().numpy(), **{f"out{i}": o for i, o in enumerate(outs)})


def export_with_reference(model, x, path, input_names, output_names):
    """The model's outputs on ``x`` (saved beside the file for the onnxruntime check), then the export."""
    import torch
    model.eval()
    with torch.no_grad():
        outs = to_numpy_outputs(model(x))
    torch_export(model, x, path, input_names, output_names)
    save_ref(path, x, outs)


# ----------------------------------------------------------------------------------------------------------
# 1. YOLOv9s (ultralytics)
# ----------------------------------------------------------------------------------------------------------
def export_yolov9s(out_dir, imgsz):
    import torch
    from ultralytics import YOLO
    torch.manual_seed(SEED)
    yolo = YOLO("yolov9s.yaml")          # builds from config, no weight download
    randomize_bn(yolo.model, SEED)
    n_params = torch_params(yolo.model)
    x = torch.rand(1, 3, imgsz, imgsz)
    ref = copy.deepcopy(yolo.model).eval()
    with torch.no_grad():
        y = ref(x)
    outs = to_numpy_outputs(y[0] if isinstance(y, (list, tuple)) else y)
    dst = os.path.join(out_dir, f"yolov9s_{imgsz}.onnx")
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as td:
        os.chdir(td)
        try:
            f = yolo.export(format="onnx", imgsz=imgsz, opset=OPSET, simplify=False, dynamic=False,
                            batch=1, device="cpu")
            os.replace(os.path.abspath(f), dst)
        finally:
            os.chdir(cwd)
    n_folded = fold_shape_arithmetic(dst)
    save_ref(dst, x, outs)
    return dst, dict(torch_params_unfused=n_params, shape_nodes_folded=n_folded,
                     built_with=f"ultralytics YOLO('yolov9s.yaml').export(format='onnx', imgsz={imgsz}, opset=17, "
                                 "simplify=False, dynamic=False)")


# ----------------------------------------------------------------------------------------------------------
# 2. YOLOX-S (Megvii yolox package)
# ----------------------------------------------------------------------------------------------------------
def export_yolox(out_dir, size="s"):
    """Megvii YOLOX-S or -M at 640 (the exp's test_size), as yolox/tools/export_onnx.py exports it."""
    import torch
    from torch import nn
    from yolox.exp import get_exp
    from yolox.models.network_blocks import SiLU
    from yolox.utils import replace_module
    torch.manual_seed(SEED)
    exp = get_exp(None, f"yolox-{size}")  # s: depth 0.33, width 0.50; m: 0.67, 0.75; 80 classes, act silu, 640
    assert (exp.depth, exp.width, exp.num_classes) == {"s": (0.33, 0.50, 80), "m": (0.67, 0.75, 80)}[size]
    model = exp.get_model()              # YOLOX(YOLOPAFPN(depth, width), YOLOXHead(80, width)) + YOLOX init
    randomize_bn(model, SEED)
    n_params = torch_params(model)
    model.eval()
    # exactly what yolox/tools/export_onnx.py does (its default is decode_in_inference=False)
    model = replace_module(model, nn.SiLU, SiLU)
    model.head.decode_in_inference = False
    x = torch.rand(1, 3, *exp.test_size)
    dst = os.path.join(out_dir, f"yolox_{size}_640.onnx")
    export_with_reference(model, x, dst, ["images"], ["output"])
    return dst, dict(torch_params_unfused=n_params,
                     built_with=f"yolox 0.3.0: get_exp(None,'yolox-{size}').get_model(); replace_module(nn.SiLU->SiLU); "
                                "head.decode_in_inference=False; torch.onnx.export(dynamo=False, opset 17)")


# ----------------------------------------------------------------------------------------------------------
# 3. YOLO-NAS-S (super-gradients) -- runs in a child process (see module docstring)
# ----------------------------------------------------------------------------------------------------------
def _install_sg_import_shims():
    """Minimal shims so `super_gradients` 3.7.1 imports without its full dependency tree."""
    from importlib import machinery as _mach

    # pkg_resources was removed from recent setuptools; SG uses a handful of its functions
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        from importlib.metadata import distributions
        from importlib.metadata import version as _version

        from packaging.requirements import Requirement
        from packaging.version import parse as parse_version
        m = types.ModuleType("pkg_resources")

        def resource_filename(pkg, name=""):
            spec = importlib.util.find_spec(pkg)
            base = (list(spec.submodule_search_locations)[0]
                    if spec is not None and spec.submodule_search_locations else os.path.abspath(pkg))
            return os.path.join(base, name)

        def parse_requirements(lines):
            if isinstance(lines, str):
                lines = lines.splitlines()
            for line in lines:
                line = line.strip()
                if line and not line.startswith("#"):
                    r = Requirement(line)
                    yield types.SimpleNamespace(name=r.name, specs=[(s.operator, s.version) for s in r.specifier],
                                                __str__=lambda s=line: s)

        m.resource_filename = resource_filename
        m.parse_version = parse_version
        m.parse_requirements = parse_requirements
        m.get_distribution = lambda name: types.SimpleNamespace(version=_version(name), project_name=name)
        m.DistributionNotFound = type("DistributionNotFound", (Exception,), {})
        m.VersionConflict = type("VersionConflict", (Exception,), {})
        m.require = lambda *a, **k: []
        m.working_set = [types.SimpleNamespace(key=(d.metadata["Name"] or "").lower(),
                                               project_name=d.metadata["Name"], version=d.version)
                         for d in distributions()]
        sys.modules["pkg_resources"] = m

    def stub_module(name):
        try:
            importlib.import_module(name)
            return
        except ImportError:
            pass
        m = types.ModuleType(name)

        def _missing(*a, **k):
            raise RuntimeError(f"{name} is stubbed (not installed)")

        def _ga(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return _missing
        m.__getattr__ = _ga
        m.__spec__ = _mach.ModuleSpec(name, None)
        m.__version__ = "0.0.0-stub"
        sys.modules[name] = m

    # only used by SG's own export / logging utilities, not by model construction
    for name in ("onnxsim", "onnxruntime", "torch.utils.tensorboard"):
        stub_module(name)

    class _StubFinder:
        """fabricates stub packages (attributes are dummy classes) for data_gradients' report deps"""
        names = {"xhtml2pdf", "imagededup"}

        def find_spec(self, fullname, path=None, target=None):
            if fullname.split(".")[0] in self.names:
                return _mach.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec):
            m = types.ModuleType(spec.name)
            m.__path__ = []

            def _ga(attr):
                if attr.startswith("__"):
                    raise AttributeError(attr)
                return type(attr, (), {"__init__": lambda self, *a, **k: None})
            m.__getattr__ = _ga
            return m

        def exec_module(self, module):
            pass
    sys.meta_path.insert(0, _StubFinder())
    os.environ.setdefault("CRASH_HANDLER", "FALSE")
    if "SUPER_GRADIENTS_LOG_DIR" not in os.environ:      # keep SG's console logs out of ~/sg_logs
        import atexit
        import shutil
        log_dir = tempfile.mkdtemp(prefix="sg_logs_")
        os.environ["SUPER_GRADIENTS_LOG_DIR"] = log_dir
        atexit.register(shutil.rmtree, log_dir, True)


def export_yolo_nas_s(out_dir, imgsz):
    _install_sg_import_shims()
    import torch
    from super_gradients.common.object_names import Models
    from super_gradients.training import models
    torch.manual_seed(SEED)
    model = models.get(Models.YOLO_NAS_S, num_classes=80, pretrained_weights=None)
    randomize_bn(model, SEED)
    n_params = torch_params(model)
    model.eval()
    # fuses QARepVGG blocks (and fixes eval anchor grid to input size) like SG's deployment export
    model.prep_model_for_conversion(input_size=(1, 3, imgsz, imgsz))
    n_params_fused = torch_params(model)
    x = torch.rand(1, 3, imgsz, imgsz)

    class Wrap(torch.nn.Module):
        """Return the decoded (boxes xyxy in pixels, class scores) pair; this is what NDFLHeads returns
        under torch.jit tracing, i.e. SG's export without NMS post-processing."""
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            y = self.m(x)
            if isinstance(y[0], (tuple, list)):
                y = y[0]
            return y[0], y[1]

    dst = os.path.join(out_dir, f"yolo_nas_s_{imgsz}.onnx")
    export_with_reference(Wrap(model), x, dst, ["images"], ["pred_boxes", "pred_scores"])
    return dst, dict(torch_params_unfused=n_params, torch_params_after_prep=n_params_fused,
                     built_with="super-gradients 3.7.1: models.get('yolo_nas_s', num_classes=80, "
                                "pretrained_weights=None).eval(); prep_model_for_conversion(input_size); "
                                "torch.onnx.export(dynamo=False, opset 17)")


# ----------------------------------------------------------------------------------------------------------
# 4. SSDlite MobileNetV2 (TF OD API ssdlite_mobilenet_v2_coco layout), network only
# ----------------------------------------------------------------------------------------------------------
def build_ssdlite_mobilenetv2(num_classes=91):
    from functools import partial

    from torch import nn
    from torchvision.models import mobilenet_v2
    from torchvision.models.detection.ssdlite import SSDLiteHead, _extra_block, _normal_init

    norm = partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
    feats = mobilenet_v2(weights=None, width_mult=1.0, norm_layer=norm).features
    c4 = 14   # features[14] == TF 'layer_15' (first 160-ch block, stride 2); its expansion conv is 576 ch @ /16

    class SSDLiteMobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            self.stage1 = nn.Sequential(*feats[:c4], feats[c4].conv[0])       # -> 'layer_15/expansion_output'
            self.stage2 = nn.Sequential(*feats[c4].conv[1:], *feats[c4 + 1:])  # -> 'layer_19' (1280 ch @ /32)
            extra = nn.ModuleList([_extra_block(1280, 512, norm), _extra_block(512, 256, norm),
                                   _extra_block(256, 256, norm), _extra_block(256, 128, norm)])
            _normal_init(extra)
            self.extra = extra
            self.head = SSDLiteHead([576, 1280, 512, 256, 256, 128], [3, 6, 6, 6, 6, 6], num_classes, norm)

        def forward(self, x):
            f1 = self.stage1(x)
            f2 = self.stage2(f1)
            fs = [f1, f2]
            y = f2
            for blk in self.extra:
                y = blk(y)
                fs.append(y)
            h = self.head(fs)
            return h["bbox_regression"], h["cls_logits"]

    return SSDLiteMobileNetV2()


def export_ssdlite(out_dir):
    import torch
    torch.manual_seed(SEED)
    model = build_ssdlite_mobilenetv2(91)
    randomize_bn(model, SEED)
    n_params = torch_params(model)
    model.eval()
    x = torch.rand(1, 3, 320, 320)
    dst = os.path.join(out_dir, "ssdlite_mobilenetv2_320.onnx")
    export_with_reference(model, x, dst, ["images"], ["bbox_regression", "cls_logits"])
    return dst, dict(torch_params_unfused=n_params,
                     built_with="torchvision mobilenet_v2(width 1.0).features split at features[14].conv[0] "
                                "(576ch expansion) + features[18] (1280ch), torchvision ssdlite._extra_block x4 "
                                "(512/256/256/128), torchvision SSDLiteHead(anchors [3,6,6,6,6,6], 91 classes); "
                                "torch.onnx.export(dynamo=False, opset 17)")


# ----------------------------------------------------------------------------------------------------------
# 5. ResNet-50
# ----------------------------------------------------------------------------------------------------------
def export_resnet50(out_dir):
    import torch
    from torchvision.models import resnet50
    torch.manual_seed(SEED)
    model = resnet50(weights=None)
    randomize_bn(model, SEED)
    n_params = torch_params(model)
    model.eval()
    x = torch.rand(1, 3, 224, 224)
    dst = os.path.join(out_dir, "resnet50_224.onnx")
    export_with_reference(model, x, dst, ["input"], ["logits"])
    return dst, dict(torch_params_unfused=n_params,
                     built_with="torchvision resnet50(weights=None); torch.onnx.export(dynamo=False, opset 17)")


# ----------------------------------------------------------------------------------------------------------
# shape-arithmetic folding (used for the ultralytics YOLOv9s export only)
# ----------------------------------------------------------------------------------------------------------
def fold_shape_arithmetic(path, max_iter=50):
    """torch's TorchScript exporter emits `Tensor.chunk` (ultralytics RepNCSPELAN4 / ADown) as
    Shape->Gather->Add->Div->Mul feeding Slice starts/ends.  The shapes are static but onnx shape inference
    cannot propagate through Div, so everything downstream gets unknown dims.  This pass replaces every
    Shape node whose input shape is fully known by a Constant and evaluates nodes whose inputs are all
    constants (the small int64 shape arithmetic) with onnx.reference, repeating until nothing changes.
    Compute nodes (Conv, Slice on activations, ...) are left untouched.  Returns number of folded nodes."""
    import onnx
    from onnx import helper, numpy_helper, shape_inference
    from onnx.reference import ReferenceEvaluator
    m = onnx.load(path)
    folded = 0
    for _ in range(max_iter):
        mi = shape_inference.infer_shapes(m, data_prop=True)
        shapes = {}
        for vi in list(mi.graph.value_info) + list(mi.graph.input) + list(mi.graph.output):
            dims = vi.type.tensor_type.shape.dim
            if vi.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
                shapes[vi.name] = [d.dim_value for d in dims]
        consts = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
        for n in m.graph.node:
            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
                consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        new_nodes, changed = [], False
        for n in m.graph.node:
            val = None
            if n.op_type == "Shape" and n.input[0] in shapes and not n.attribute:
                val = np.array(shapes[n.input[0]], dtype=np.int64)
            elif (n.op_type not in ("Constant",) and n.input and all(i in consts for i in n.input if i)
                  and all(consts[i].size <= 64 and consts[i].dtype.kind in "iu" for i in n.input if i)
                  and len(n.output) == 1):   # integer shape arithmetic only
                g = helper.make_graph([n], "g", [], [helper.make_tensor_value_info(n.output[0], 0, None)])
                mm = helper.make_model(g, opset_imports=m.opset_import)
                feeds = {i: consts[i] for i in n.input if i}
                g.input.extend([helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                                for i, v in feeds.items()])
                val = np.asarray(ReferenceEvaluator(mm).run(None, feeds)[0])
            if val is not None:
                new_nodes.append(helper.make_node("Constant", [], [n.output[0]], name=n.name + "_folded",
                                                  value=numpy_helper.from_array(val, n.output[0])))
                changed = True
                folded += 1
            else:
                new_nodes.append(n)
        del m.graph.node[:]
        m.graph.node.extend(new_nodes)
        if not changed:
            break
    # drop Constant nodes that are no longer consumed
    used = {i for n in m.graph.node for i in n.input} | {o.name for o in m.graph.output}
    keep = [n for n in m.graph.node if not (n.op_type == "Constant" and n.output[0] not in used)]
    del m.graph.node[:]
    m.graph.node.extend(keep)
    del m.graph.value_info[:]
    onnx.save(m, path)
    return folded


# ----------------------------------------------------------------------------------------------------------
# verification / statistics
# ----------------------------------------------------------------------------------------------------------
def onnx_stats(path):
    """check_model(full_check) + strict shape inference; static-shape check; Conv/ConvTranspose/Gemm/MatMul MACs;
    parameter count = elements of float initializers (Identity-aliased initializers counted again)."""
    import onnx
    from onnx import shape_inference
    onnx.checker.check_model(path, full_check=True)
    m = onnx.load(path)
    m = shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
    shapes = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    inits = {t.name: t for t in m.graph.initializer}
    for t in m.graph.initializer:
        shapes[t.name] = list(t.dims)
    for n in m.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    shapes[n.output[0]] = list(a.t.dims)
    dynamic = [k for k, v in shapes.items() if any(d is None for d in v)]
    dynamic += \
        [o for n in m.graph.node for o in n.output if o and o not in shapes]
    macs = 0
    ops = {}
    alias = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
        if n.op_type == "Identity":
            alias[n.output[0]] = n.input[0]
        if n.op_type == "Conv":
            w, o = shapes[n.input[1]], shapes[n.output[0]]
            macs += int(np.prod(o)) * int(np.prod(w[1:]))
        elif n.op_type == "ConvTranspose":
            w, i = shapes[n.input[1]], shapes[n.input[0]]
            macs += int(np.prod(i)) * int(np.prod(w[1:]))
        elif n.op_type in ("Gemm", "MatMul"):
            a, o = shapes[n.input[0]], shapes[n.output[0]]
            trans_a = any(at.name == "transA" and at.i for at in n.attribute)
            k = a[0] if trans_a else a[-1]
            macs += int(np.prod(o)) * int(k)
    params = sum(int(np.prod(t.dims)) for t in m.graph.initializer if t.data_type == onnx.TensorProto.FLOAT)
    aliased = sum(int(np.prod(inits[s].dims)) for s in alias.values()
                  if s in inits and inits[s].data_type == onnx.TensorProto.FLOAT)
    ins = {i.name: shapes[i.name] for i in m.graph.input if i.name not in inits}
    outs = {o.name: shapes[o.name] for o in m.graph.output}
    return dict(inputs=ins, outputs=outs, macs=int(macs), gmacs=round(macs / 1e9, 4), onnx_params=params + aliased,
                identity_aliased_params=aliased, ops=dict(sorted(ops.items())), n_nodes=len(m.graph.node),
                opset=[(o.domain or "ai.onnx", o.version) for o in m.opset_import],
                non_static_values=dynamic[:10], file_bytes=os.path.getsize(path))


ORT_CHECK = r"""
import sys, json, numpy as np, onnxruntime as ort
res = {}
for p in sys.argv[1:]:
    ref = np.load(p + ".ref.npz")
    s = ort.InferenceSession(p, providers=["CPUExecutionProvider"])
    outs = s.run(None, {s.get_inputs()[0].name: ref["input"]})
    diffs = []
    for i, o in enumerate(outs):
        r = ref.get("out%d" % i) if ("out%d" % i) in ref.files else None
        if r is not None and r.shape == o.shape:
            diffs.append(float(np.max(np.abs(o - r)) / (np.max(np.abs(r)) + 1e-12)))
        else:
            diffs.append(None)
    res[p] = dict(ort_version=ort.__version__, out_shapes=[list(o.shape) for o in outs], rel_max_abs_diff=diffs)
print(json.dumps(res))
"""


def versions():
    v = {"python": sys.version.split()[0]}
    for pkg in ("torch", "torchvision", "onnx", "ultralytics", "yolox", "super-gradients", "numpy"):
        try:
            from importlib.metadata import version
            v[pkg] = version(pkg)
        except Exception:
            v[pkg] = None
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=",".join(ALL))
    ap.add_argument("--ort-python", default="/work/venv/bin/python")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    todo = [t for t in args.only.split(",") if t]

    jobs = {
        "yolov9s_320": lambda: export_yolov9s(out_dir, 320),
        "yolov9s_640": lambda: export_yolov9s(out_dir, 640),
        "yolox_s_640": lambda: export_yolox(out_dir, "s"),
        "yolox_m_640": lambda: export_yolox(out_dir, "m"),
        "yolo_nas_s_320": lambda: export_yolo_nas_s(out_dir, 320),
        "yolo_nas_s_640": lambda: export_yolo_nas_s(out_dir, 640),
        "ssdlite_mobilenetv2_320": lambda: export_ssdlite(out_dir),
        "resnet50_224": lambda: export_resnet50(out_dir),
    }

    if args.child:   # used for super-gradients (import shims stay in this process)
        info = {}
        for t in todo:
            p, meta = jobs[t]()
            info[t] = dict(path=p, **meta)
        print("CHILD_RESULT " + json.dumps(info))
        return

    results = {}
    nas = [t for t in todo if t.startswith("yolo_nas")]
    for t in todo:
        if t in nas:
            continue
        print(f"=== exporting {t}", flush=True)
        p, meta = jobs[t]()
        results[t] = dict(path=p, **meta)
    if nas:
        print(f"=== exporting {nas} in child process", flush=True)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--out", out_dir,
                            "--only", ",".join(nas)], capture_output=True, text=True)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("CHILD_RESULT ")]
        if r.returncode != 0 or not line:
            print(r.stdout[-4000:], r.stderr[-4000:])
            raise SystemExit("YOLO-NAS child export failed")
        results.update(json.loads(line[-1][len("CHILD_RESULT "):]))

    for t, r in results.items():
        r.update(onnx_stats(r["path"]))
        assert not r["non_static_values"], (t, r["non_static_values"])
        print(f"{t}: in={r['inputs']} out={r['outputs']} params={r['onnx_params']:,} GMACs={r['gmacs']}")

    ort_ok = False
    if args.ort_python and os.path.exists(args.ort_python):
        paths = [r["path"] for r in results.values()]
        pr = subprocess.run([args.ort_python, "-c", ORT_CHECK, *paths], capture_output=True, text=True)
        if pr.returncode == 0:
            ort = json.loads(pr.stdout.strip().splitlines()[-1])
            for t, r in results.items():
                r["onnxruntime"] = ort[r["path"]]
                print(f"{t}: onnxruntime {ort[r['path']]}")
            ort_ok = True
        else:
            print("onnxruntime check failed:", pr.stderr[-3000:])
    for r in results.values():
        ref = r["path"] + ".ref.npz"
        if os.path.exists(ref):
            os.remove(ref)

    man_path = os.path.join(out_dir, "manifest.json")
    manifest = {}
    if os.path.exists(man_path):
        manifest = json.load(open(man_path)).get("models", {})
    manifest.update({t: {k: v for k, v in r.items()} for t, r in results.items()})
    json.dump(dict(versions=versions(), opset=OPSET, seed=SEED, models=manifest), open(man_path, "w"), indent=1)
    print("wrote", man_path, "onnxruntime checked:", ort_ok)


if __name__ == "__main__":
    main()
