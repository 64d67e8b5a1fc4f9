"""Hardware profiles: accelerator facts as data, separate from compiler options."""
