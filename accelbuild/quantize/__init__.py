"""Weight quantization: per-output-channel symmetric integers at 4/8/16 bits, and how much it costs."""
