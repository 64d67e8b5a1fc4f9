"""Target families: one package per family of accelerators, behind one small protocol (``base.Target``)."""
