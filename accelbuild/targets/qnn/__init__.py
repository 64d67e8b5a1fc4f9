"""Family qnn: Qualcomm HTP through onnxruntime-qnn (docs/qnn.md)."""
