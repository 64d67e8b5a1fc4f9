"""Rebuild the Keras Applications networks of MemryX's published MX3 figures (random weights, architecture
only) and save them as ``.keras`` files, run by ``bench/credibility.py`` (its mx3 part).

MemryX's factory-diagnostics runs name these networks ``k_real_<name>``: Keras models, compiled from Keras.
accelbuild imports ``.keras`` files itself (TensorFlow's converter, the ``tensorflow`` extra), so the builds
start from the same framework the vendor's did. Each network is ``keras.applications.<Class>(weights=None)``
at the application's default input size (static), classifier included.

    python bench/peers/export_keras_networks.py OUT_DIR NAME [NAME ...]

Prints one JSON line per network: its name, file, input size and parameter count. Existing files are kept.
Needs TensorFlow (``pip install -e '.[tensorflow]'``); it runs in accelbuild's own venv.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import export_cli

# name -> (keras.applications class, its default input size)
NETWORKS = {
    "k_resnet50": ("ResNet50", 224),
    "k_resnet50_v2": ("ResNet50V2", 224),
    "k_inceptionv3": ("InceptionV3", 299),
    "k_xception": ("Xception", 299),
    "k_densenet121": ("DenseNet121", 224),
    "k_efficientnetb1": ("EfficientNetB1", 240),
    "k_efficientnetv2b0": ("EfficientNetV2B0", 224),
    "k_efficientnetv2b1": ("EfficientNetV2B1", 240),
    "k_efficientnetv2b2": ("EfficientNetV2B2", 260),
    "k_efficientnetv2b3": ("EfficientNetV2B3", 300),
    "k_mobilenetv3_large": ("MobileNetV3Large", 224),
}


def export(name: str, out: Path) -> dict:
    import keras

    keras.utils.set_random_seed(0)
    application, size = NETWORKS[name]
    model = getattr(keras.applications, application)(weights=None, input_shape=(size, size, 3))
    target = out / f"{name}.keras"
    if not target.exists():
        tmp = out / f".{name}.{os.getpid()}.keras"  # keras wants the suffix; renamed into place
        model.save(str(tmp))
        tmp.replace(target)
    return {"name": name, "file": str(target), "input_size": size,
            "parameters": int(model.count_params())}


if __name__ == "__main__":
    sys.exit(export_cli.main(__doc__, NETWORKS, export))
