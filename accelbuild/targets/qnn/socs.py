"""Snapdragon SoCs by name, as the QNN SDK numbers them (``QNN_SOC_MODEL_*`` in its QnnTypes.h), with the HTP
architecture each carries."""

from __future__ import annotations

# name -> (soc_model id, HTP architecture, marketing name)
SOCS: dict[str, tuple[int, str, str]] = {
    "sm8450": (36, "v69", "Snapdragon 8 Gen 1"),
    "sm8475": (42, "v69", "Snapdragon 8+ Gen 1"),
    "sm8550": (43, "v73", "Snapdragon 8 Gen 2"),
    "sm8650": (57, "v75", "Snapdragon 8 Gen 3"),
    "sm8635": (68, "v73", "Snapdragon 8s Gen 3"),
    "sm8750": (69, "v79", "Snapdragon 8 Elite"),
    "sm8735": (85, "v79", "Snapdragon 8s Gen 4"),
    "sm8850": (87, "v81", "Snapdragon 8 Elite Gen 5"),
    "sa8295": (39, "v68", "SA8295P (automotive)"),
    "ssg2115p": (46, "v73", "SSG2115P"),
    "ssg2125p": (58, "v73", "SSG2125P"),
    "sxr1230p": (45, "v73", "SXR1230P"),
    "sxr2230p": (53, "v69", "SXR2230P"),
}
