"""Quantization: per-channel integer weights (mx3), activation calibration and post-training QDQ
quantization (``qdq``), mixed precision (``auto_precision``), and measurement."""
