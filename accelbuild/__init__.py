"""accelbuild: declarative, incremental builds of neural networks for edge accelerators."""

__version__ = "0.1.0"
