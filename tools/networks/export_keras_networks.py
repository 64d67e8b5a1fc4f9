"""Rebuild the Keras Applications networks of MemryX's published MX3 figures (random weights, architecture
only) and save them as ``.keras`` files, run by ``tools/credibility.py`` (its mx3 part).

MemryX's factory-diagnostics runs name these networks ``k_real_<name>``: Keras models, compiled from Keras.
accelbuild imports ``.keras`` files itself (TensorFlow's converter, the ``tensorflow`` extra), so the builds
start from the same framework the vendor's did. Each network is ``keras.applications.<Class>(weights=None)``
at the application's default input size (static), classifier included; MobileNet's width (``alpha``) and
MobileNetV3's ``minimalistic`` as the vendor's names give them.

    python tools/networks/export_keras_networks.py OUT_DIR NAME [NAME ...]

Prints one JSON line per network: its name, file, input size and parameter count. Existing files are kept.
Needs TensorFlow (``pip install -e '.[tensorflow]'``); it runs in accelbuild's own venv.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import export_cli

# name -> (keras.applications class, its default input size, the class's other arguments)
NETWORKS: dict[str, tuple[str, int, dict]] = {
    "k_resnet50": ("ResNet50", 224, {}),
    "k_resnet50_v2": ("ResNet50V2", 224, {}),
    "k_inceptionv3": ("InceptionV3", 299, {}),
    "k_xception": ("Xception", 299, {}),
    "k_densenet121": ("DenseNet121", 224, {}),
    "k_densenet169": ("DenseNet169", 224, {}),
    "k_densenet201": ("DenseNet201", 224, {}),
    "k_efficientnetb0": ("EfficientNetB0", 224, {}),
    "k_efficientnetb1": ("EfficientNetB1", 240, {}),
    "k_efficientnetv2b0": ("EfficientNetV2B0", 224, {}),
    "k_efficientnetv2b1": ("EfficientNetV2B1", 240, {}),
    "k_efficientnetv2b2": ("EfficientNetV2B2", 260, {}),
    "k_efficientnetv2b3": ("EfficientNetV2B3", 300, {}),
    "k_mobilenetv1": ("MobileNet", 224, {}),
    "k_mobilenetv1_0p75": ("MobileNet", 224, {"alpha": 0.75}),
    "k_mobilenetv1_0p50": ("MobileNet", 224, {"alpha": 0.5}),
    "k_mobilenetv1_0p25": ("MobileNet", 224, {"alpha": 0.25}),
    "k_mobilenetv2": ("MobileNetV2", 224, {}),
    "k_mobilenetv3_large": ("MobileNetV3Large", 224, {}),
    "k_mobilenetv3_large_minimalistic": ("MobileNetV3Large", 224, {"minimalistic": True}),
    "k_mobilenetv3_small": ("MobileNetV3Small", 224, {}),
    "k_mobilenetv3_small_minimalistic": ("MobileNetV3Small", 224, {"minimalistic": True}),
}


def export(name: str, out: Path) -> dict:
    import keras

    keras.utils.set_random_seed(0)
    application, size, arguments = NETWORKS[name]
    model = getattr(keras.applications, application)(weights=None, input_shape=(size, size, 3), **arguments)
    target = out / f"{name}.keras"
    if not target.exists():
        tmp = out / f".{name}.{os.getpid()}.keras"  # keras wants the suffix; renamed into place
        model.save(str(tmp))
        tmp.replace(target)
    return {"name": name, "file": str(target), "input_size": size,
            "parameters": int(model.count_params())}


if __name__ == "__main__":
    sys.exit(export_cli.main(__doc__, NETWORKS, export))
