"""Deterministic tiny ONNX models for tests and examples."""
