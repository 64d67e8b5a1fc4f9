"""Family rknn: Rockchip NPUs through RKNN-Toolkit2 (docs/rknn.md)."""
